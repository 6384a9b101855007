"""The image stages and their content keys: pure logic, no Docker.

A stage's key hashes everything that can change its output: the stage name, the
rendered Dockerfile, the parent's image ID, the build args and every file copied into
the build context. Equal key -> equal inputs -> the tagged image is reused as is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.config import Config
from builder.errors import ConfigError
from builder.stages.render import render_template

IMAGE_STAGES = ("base", "toolchain", "python")
KEY_LENGTH = 24


@dataclass(frozen=True)
class StageSpec:
    """What one image stage is made of, before its parent is known."""

    name: str
    template: str
    context: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    buildargs: dict[str, str] = field(default_factory=dict)
    # Package name -> pinned version, checked against the built image (dpkg-query).
    pins: dict[str, str] = field(default_factory=dict)
    # Command -> pinned Debian version whose upstream part its ``--version`` must show.
    compilers: dict[str, str] = field(default_factory=dict)


def upstream_version(deb_version: str) -> str:
    """``1:14.0.6-12`` -> ``14.0.6``: what a compiler's own banner prints."""
    without_epoch = deb_version.split(":", 1)[-1]
    return without_epoch.rsplit("-", 1)[0] if "-" in without_epoch else without_epoch


@dataclass(frozen=True)
class RenderedStage:
    spec: StageSpec
    parent_ref: str
    parent_id: str | None
    dockerfile: str
    key: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tag(self) -> str:
        return f"builder/{self.spec.name}:{self.key}"


def stage_key(name: str, dockerfile: str, parent_id: str | None, buildargs: dict[str, str],
              files: dict[str, bytes]) -> str:
    """Content key of a stage; changes when (and only when) one of its inputs changes."""
    payload = {
        "stage": name,
        "dockerfile": dockerfile,
        "parent": parent_id,
        "buildargs": sorted(buildargs.items()),
        "files": sorted((path, hashlib.sha256(data).hexdigest()) for path, data in files.items()),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:KEY_LENGTH]


def apt_url(config: Config) -> str:
    if config.base.snapshot:
        return f"http://snapshot.debian.org/archive/debian/{config.base.snapshot}/"
    return config.base.mirror


def read_extra_ca(config: Config) -> bytes:
    path = config.ca.extra_certificates
    if not path:
        return b""
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ConfigError(f"ca.extra_certificates: cannot read {path}: {exc.strerror}",
                          "point it at a PEM bundle, e.g. /etc/ssl/certs/ca-certificates.crt") from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise ConfigError(f"ca.extra_certificates: {path} holds no PEM certificate")
    return data


def image_stages(config: Config) -> list[StageSpec]:
    """base -> toolchain -> python, each with the config values it depends on."""
    ca = read_extra_ca(config)
    tc = config.toolchain
    py = config.python
    series = py.version
    base = StageSpec(
        name="base",
        template="base.Dockerfile.j2",
        context={
            "base_image": config.base.image,
            "apt_url": apt_url(config),
            "suite": config.base.suite,
            "snapshot": config.base.snapshot,
            "ca_certificates": config.base.ca_certificates,
            "extra_ca": bool(ca),
            "apt_lock": [],  # name=version pins from builder.repro.lock (builder.repro.lock.locked_spec)
        },
        files={"extra-ca.crt": ca} if ca else {},
        pins={"ca-certificates": config.base.ca_certificates},
    )
    toolchain = StageSpec(
        name="toolchain",
        template="toolchain.Dockerfile.j2",
        context={
            "gcc": tc.gcc, "clang": tc.clang, "ccache": tc.ccache, "cmake": tc.cmake,
            "ninja": tc.ninja, "git": tc.git, "make": tc.make,
            "python_series": series, "python_package": py.package_version,
            "apt_lock": [],
        },
        pins={
            "gcc-12": tc.gcc, "g++-12": tc.gcc, "clang-14": tc.clang, "ccache": tc.ccache,
            "cmake": tc.cmake, "ninja-build": tc.ninja, "git": tc.git, "make": tc.make,
            f"python{series}": py.package_version, f"python{series}-dev": py.package_version,
        },
        compilers={"gcc": tc.gcc, "g++": tc.gcc, "clang": tc.clang},
    )
    python = StageSpec(
        name="python",
        template="python.Dockerfile.j2",
        context={"python_series": series, "requirements": list(py.requirements),
                 "index_url": py.index_url, "pip_lock": []},
    )
    return [base, toolchain, python]


def deps_stage(config: Config, requirements: tuple[str, ...], sources: tuple[str, ...],
               bazel_version: str = "") -> StageSpec:
    """The deps layer over the python stage: one commit's build requirements
    (builder.source.buildreqs), from the python stage's index; with a ``.bazelversion``,
    also the pinned bazelisk that runs that Bazel (the version itself is given at
    build time, so commits differing only there share the layer)."""
    tc = config.toolchain
    bazelisk = {}
    if bazel_version:
        bazelisk = {"url": f"{tc.npm_registry.rstrip('/')}/@bazel/bazelisk/-/bazelisk-{tc.bazelisk}.tgz",
                    "version": tc.bazelisk, "sha512": tc.bazelisk_sha512}
    return StageSpec(
        name="deps",
        template="deps.Dockerfile.j2",
        context={"requirements": list(requirements), "sources": list(sources) or ["none"],
                 "index_url": config.python.index_url, "pip_lock": [], "bazelisk": bazelisk},
    )


def select_stages(specs: list[StageSpec], upto: str | None) -> list[StageSpec]:
    """Stages up to and including ``upto`` (its parents are always needed)."""
    if upto is None:
        return specs
    names = [s.name for s in specs]
    if upto not in names:
        raise ConfigError(f"unknown stage {upto!r}", f"choose one of: {', '.join(names)}")
    return specs[: names.index(upto) + 1]


def render_stage(spec: StageSpec, parent_ref: str, parent_id: str | None,
                 templates: Path | None = None) -> RenderedStage:
    context = dict(spec.context)
    if spec.name != "base":
        context["parent"] = parent_ref
    dockerfile = render_template(spec.template, context, templates)
    key = stage_key(spec.name, dockerfile, parent_id, spec.buildargs, spec.files)
    return RenderedStage(spec=spec, parent_ref=parent_ref, parent_id=parent_id,
                         dockerfile=dockerfile, key=key)
