"""The provenance manifest written beside every built wheel (``files/<wheel>.manifest.json``).

Shaped as an in-toto Statement (v1) carrying a SLSA Provenance (v1) predicate, so it can
be handed to supply-chain tools as is: ``subject`` is the wheel and its sha256,
``resolvedDependencies`` the materials (source commit and submodules, every stage image,
the wheels a build installed first, e.g. torch for torch_xla), ``runDetails`` who built it, when, with which
compilers, SOURCE_DATE_EPOCH and ccache figures. Fields SLSA does not define are
extension fields, which its parsing rules tell consumers to ignore.

``build_key`` (and, for quick readers, ``recipe`` and ``against_sha256``) stay at the
top level: the index finds a reusable wheel by ``manifest["build_key"]``.

Secrets never enter: environment entries whose *name* looks secret (TOKEN, PASSWORD,
SECRET, KEY, CREDENTIAL) are dropped, credentials in URLs are removed, and as a last line
any secret-named variable of the builder's own environment is scrubbed wherever its value
appears. Everything here is pure except :func:`validate_manifest` reading the schema.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from builder.errors import BuilderError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://builder.invalid/buildtypes/wheel-step/v1"
BUILDER_ID = "https://builder.invalid/builder"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "manifest.schema.json"

SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL", re.IGNORECASE)
# scheme://user:password@host or scheme://token@host: the userinfo part of a URL.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
REDACTED = "<redacted>"
# Tools whose ``--version`` banner (read from the build image) the manifest records.
PROVENANCE_TOOLS = ("gcc", "g++", "clang", "clang++", "cmake", "ninja", "ccache", "python")
_MIN_SECRET_LEN = 4  # shorter values ("1", "on") would scrub half the manifest


class ManifestError(BuilderError):
    """A manifest is malformed, or does not match the schema."""


@dataclass(frozen=True)
class ImageRef:
    """A stage image (or the base image) as a material: name, tag, content key, image ID."""

    name: str
    tag: str
    image_id: str
    key: str = ""


@dataclass(frozen=True)
class Provenance:
    """What the pipeline knows beyond one wheel step: the images and compilers it used."""

    ref: str = ""  # the ref the user named (main, v2.9.0); the SHA is in the source tree
    images: tuple[ImageRef, ...] = ()
    compilers: dict[str, str] = field(default_factory=dict)
    against_wheels: tuple[str, ...] = ()  # file names of the wheels the build installed first (its builds_against)


@dataclass(frozen=True)
class StepRecord:
    """One finished wheel step, as the manifest needs it (filled by builder.run.wheelstep)."""

    wheel: str
    sha256: str
    build_key: str
    recipe: str
    command: list[str]
    source_url: str
    source_sha: str
    submodules: dict[str, str]
    commit_time: int
    source_date_epoch: int
    image_tag: str
    image_id: str
    env: dict[str, str]
    jobs: int
    started: float
    finished: float
    ccache: dict[str, Any]
    builder_version: str
    version: str = ""  # explicit wheel version asked for (nightlies); empty: the source's own
    against: tuple[str, ...] = ()  # "project==version" of each wheel the build installed first
    against_sha256: tuple[str, ...] = ()  # their sha256, in the same order
    checkout_recipe: str = ""  # the package whose checkout the build ran inside (xla: torch's), if any
    checkout_url: str = ""
    checkout_sha: str = ""
    platform: dict[str, Any] = field(default_factory=dict)  # the wheel audit (builder.repro.audit)
    normalizer: dict[str, str] = field(default_factory=dict)  # version, the container's python and zlib


# ----------------------------------------------------------------------- secrets
def strip_url_credentials(text: str) -> str:
    """``https://user:tok@host/x`` -> ``https://host/x`` (anywhere in ``text``)."""
    return _URL_USERINFO.sub(lambda m: m.group("scheme"), text)


def redact_url(url: str) -> str:
    """A URL without user or password (for source URLs recorded as materials)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def safe_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(env without secret-named keys and with URL credentials removed, dropped names)."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in sorted(env.items()):
        if is_secret_name(name) or strip_url_credentials(value) != value:
            dropped.append(name)
        else:
            kept[name] = value
    return kept, dropped


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of the secret-named variables of an environment (what must never be written)."""
    return sorted({v for k, v in environ.items() if is_secret_name(k) and len(v) >= _MIN_SECRET_LEN},
                  key=len, reverse=True)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of ``value`` with URL credentials and every ``secrets`` occurrence redacted."""
    secrets = list(secrets)
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, str):
        text = strip_url_credentials(value)
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text
    return value


# ----------------------------------------------------------------------- building
def iso_time(epoch: float) -> str:
    """RFC 3339 in UTC, as SLSA's timestamps are."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _image_digest(image_id: str) -> dict[str, str]:
    algorithm, _, value = image_id.partition(":")
    return {algorithm: value} if value else {"sha256": image_id}


def _materials(step: StepRecord, prov: Provenance) -> list[dict[str, Any]]:
    url = redact_url(step.source_url)
    # a git commit (40 hex), or an sdist from a package index: its URL and sha256 (64 hex)
    sdist = len(step.source_sha) == 64
    materials: list[dict[str, Any]] = [{
        "name": "source", "uri": url if sdist else f"git+{url}@{step.source_sha}",
        "digest": {"sha256" if sdist else "gitCommit": step.source_sha},
        "annotations": {"ref": prov.ref, "commitTime": step.commit_time},
    }]
    for path, sha in sorted(step.submodules.items()):
        materials.append({"name": f"submodule:{path}", "uri": f"git+{url}#{path}", "digest": {"gitCommit": sha}})
    images = list(prov.images)
    if not any(i.image_id == step.image_id for i in images):
        images.append(ImageRef("build", step.image_tag, step.image_id))
    for image in images:
        entry: dict[str, Any] = {"name": f"image:{image.name}", "uri": f"docker-image:{image.tag}",
                                 "digest": _image_digest(image.image_id)}
        if image.key:
            entry["annotations"] = {"key": image.key}
        materials.append(entry)
    names = list(prov.against_wheels) + [""] * len(step.against_sha256)
    for requirement, sha, filename in zip(step.against, step.against_sha256, names, strict=False):
        materials.append({"name": f"against:{requirement.partition('==')[0]}", "uri": filename or requirement,
                          "digest": {"sha256": sha}})
    if step.checkout_sha:
        materials.append({"name": f"checkout:{step.checkout_recipe}", "uri": f"git+{redact_url(step.checkout_url)}",
                          "digest": {"gitCommit": step.checkout_sha}})
    return materials


def build_manifest(step: StepRecord, prov: Provenance | None = None,
                   environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The manifest of one wheel step; ``environ`` (default: ours) names the secrets to scrub."""
    prov = prov or Provenance()
    env, dropped = safe_env(step.env)
    manifest: dict[str, Any] = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": step.wheel, "digest": {"sha256": step.sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "recipe": step.recipe,
                    "source": {"uri": redact_url(step.source_url), "ref": prov.ref, "sha": step.source_sha},
                    "version": step.version,
                },
                "internalParameters": {
                    "env": env,
                    "redactedEnv": dropped,
                    "command": list(step.command),
                    "buildImage": {"tag": step.image_tag, "id": step.image_id},
                    "against": list(step.against),
                    "sourceDateEpoch": step.source_date_epoch,
                },
                "resolvedDependencies": _materials(step, prov),
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID, "version": {"builder": step.builder_version}},
                "metadata": {"invocationId": step.build_key, "startedOn": iso_time(step.started),
                             "finishedOn": iso_time(step.finished)},
                "sourceDateEpoch": step.source_date_epoch,
                "compilers": dict(sorted(prov.compilers.items())),
                "ccache": dict(step.ccache),
                "jobs": step.jobs,
            },
        },
        "build_key": step.build_key,
        "recipe": step.recipe,
        "against_sha256": list(step.against_sha256),
    }
    if step.platform:
        manifest["platform"] = dict(step.platform)
    if step.normalizer:
        manifest["normalizer"] = dict(step.normalizer)
    return scrub(manifest, secret_values(os.environ if environ is None else environ))


# ----------------------------------------------------------------------- reading
@dataclass(frozen=True)
class RebuildSpec:
    """What `builder verify` needs from a manifest to repeat the build."""

    wheel: str
    sha256: str
    build_key: str
    recipe: str
    source_url: str
    source_sha: str
    version: str
    env: dict[str, str]
    redacted_env: list[str]
    image_tag: str
    image_id: str
    against: tuple[str, ...]
    against_sha256: tuple[str, ...]
    source_date_epoch: int
    checkout_recipe: str = ""
    checkout_url: str = ""
    checkout_sha: str = ""


def rebuild_spec(manifest: Mapping[str, Any]) -> RebuildSpec:
    """Read the parts of a (schema-valid) manifest that define the build."""
    if manifest.get("_type") != STATEMENT_TYPE:
        raise ManifestError("the manifest is not a provenance statement (written by an older builder?)",
                            "rebuild the wheel with `builder wheels` to record one")
    validate_manifest(manifest)
    definition = manifest["predicate"]["buildDefinition"]
    external, internal = definition["externalParameters"], definition["internalParameters"]
    subject = manifest["subject"][0]
    checkout = next((m for m in definition.get("resolvedDependencies", []) if m.get("name", "").startswith(
        "checkout:")), {})
    return RebuildSpec(
        wheel=subject["name"], sha256=subject["digest"]["sha256"], build_key=manifest["build_key"],
        recipe=external["recipe"], source_url=external["source"]["uri"], source_sha=external["source"]["sha"],
        version=external["version"], env=dict(internal["env"]), redacted_env=list(internal["redactedEnv"]),
        image_tag=internal["buildImage"]["tag"], image_id=internal["buildImage"]["id"],
        against=tuple(internal["against"]), against_sha256=tuple(manifest.get("against_sha256", [])),
        source_date_epoch=internal["sourceDateEpoch"],
        checkout_recipe=checkout.get("name", "").removeprefix("checkout:"),
        checkout_url=checkout.get("uri", "").removeprefix("git+"),
        checkout_sha=checkout.get("digest", {}).get("gitCommit", ""),
    )


@cache
def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def schema_errors(manifest: Any) -> list[str]:
    """Every schema violation, as ``path: message`` lines (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(manifest), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]


def validate_manifest(manifest: Any) -> None:
    errors = schema_errors(manifest)
    if errors:
        raise ManifestError(f"manifest does not match {SCHEMA_PATH.name}: " + "; ".join(errors[:5]))
