"""Execute the image stages in order: reuse a stage whose content key is tagged, build it
otherwise, and check the pinned package versions inside each image that was built."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from builder import __version__
from builder.config import Config
from builder.console import Note
from builder.engine import ContainerSpec, Engine, labels_json
from builder.errors import BuildError, ConfigError
from builder.files import atomic_write
from builder.stages.plan import RenderedStage, StageSpec, render_stage, upstream_version


@dataclass
class StageResult:
    name: str
    key: str
    tag: str
    image_id: str
    reused: bool
    seconds: float
    log_path: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)
    banners: dict[str, str] = field(default_factory=dict)
    pulled: bool = False  # reused from a registry (--cache-from) rather than the local store


Reporter = Callable[[str, str], None]  # (stage name, event: "reused" | "building" | "built")


def stage_labels(stage: RenderedStage) -> dict[str, str]:
    return {
        "org.opencontainers.image.title": f"builder-{stage.name}",
        "org.opencontainers.image.version": __version__,
        "org.opencontainers.image.base.name": stage.parent_ref,
        "builder.stage": stage.name,
        "builder.key": stage.key,
        "builder.parent-id": stage.parent_id or "",
        "builder.pins": labels_json(stage.spec.pins),
    }


def installed_versions(engine: Engine, image: str, packages: list[str]) -> dict[str, str]:
    """Read ``dpkg-query`` from the image itself: what is installed, not what was asked."""
    if not packages:
        return {}
    result = engine.run(ContainerSpec(
        image=image, network="none",
        command=["dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Status}\\n", *packages],
    ))
    versions: dict[str, str] = {}
    for line in result.output.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[2] == "installed":
            versions[parts[0]] = parts[1]
    return versions


def check_compilers(stage: str, compilers: dict[str, str], banners: dict[str, str]) -> None:
    for command, pin in sorted(compilers.items()):
        wanted = upstream_version(pin)
        banner = banners.get(command, "")
        if wanted not in banner:
            raise BuildError(f"stage {stage}: `{command} --version` says {banner or 'nothing'!r}, "
                             f"expected version {wanted} (pin {pin})")


def check_pins(stage: str, pins: dict[str, str], versions: dict[str, str]) -> None:
    for package, wanted in sorted(pins.items()):
        found = versions.get(package)
        if found != wanted:
            raise BuildError(
                f"stage {stage}: {package} is {found or 'not installed'} in the image, but the pin is {wanted}",
                "fix the pin in builder.toml (apt-cache madison " + package + ")",
            )


# What OpenSSL-based clients (pip, requests, urllib) and git/curl print when a server's
# certificate chain is not trusted: a TLS-intercepting proxy or a private index whose CA
# the image does not have.
_CERT_FAILURES = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "SSL certificate problem")


def log_shows_certificate_failure(text: str) -> bool:
    return any(marker in text for marker in _CERT_FAILURES)


def explain_certificate_failure(exc: BuildError, log_path: Path, config: Config) -> BuildError:
    """``exc`` unchanged, unless the build log shows a TLS certificate failure: then the
    error says so and names the setting that fixes it (the log stays in the hint)."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return exc
    if not log_shows_certificate_failure(text):
        return exc
    now = (f"it is {config.ca.extra_certificates}" if config.ca.extra_certificates
           else "it is empty, so only Debian's CAs are trusted")
    return BuildError(
        f"{exc.message} (TLS certificate verification failed: CERTIFICATE_VERIFY_FAILED)",
        f"set ca.extra_certificates ([ca] extra_certificates in builder.toml, or BUILDER_CA_EXTRA_CERTIFICATES) "
        f"to the PEM bundle that trusts your proxy or index "
        f"({now}; unset, builder uses $SSL_CERT_FILE, $REQUESTS_CA_BUNDLE or $PIP_CERT); see the log {log_path}")


def compiler_banners(engine: Engine, image: str, commands: list[str]) -> dict[str, str]:
    """First line of ``CMD --version`` for each command, read from a container."""
    if not commands:
        return {}
    script = 'for c in "$@"; do printf \'%s\\t\' "$c"; "$c" --version 2>&1 | head -1; done'
    result = engine.run(ContainerSpec(image=image, network="none",
                                      command=["sh", "-c", script, "sh", *commands]))
    banners = {}
    for line in result.output.splitlines():
        name, _, banner = line.partition("\t")
        if banner:
            banners[name] = banner.strip()
    return banners


def remembered_banners(engine: Engine, image: str, image_id: str, commands: list[str],
                       cache_dir: Path) -> dict[str, str]:
    """compiler_banners, remembered per image ID in ``cache_dir`` (the user's cache, shared by
    every data dir: the images are the machine's): an image ID names its content, so its
    tools' banners never change, and a warm rebuild starts no container for them. A record
    that cannot be read or written only costs that container."""
    path = cache_dir / f"{image_id.removeprefix('sha256:')}.json"
    asked = sorted(commands)
    try:
        record = json.loads(path.read_text())
        if record["commands"] == asked and isinstance(record["banners"], dict):
            return record["banners"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    banners = compiler_banners(engine, image, asked)
    if banners:
        try:
            atomic_write(path, json.dumps({"image": image, "commands": asked, "banners": banners}, indent=1))
        except OSError:
            pass
    return banners


def registry_ref(registry: str, local: str) -> str:
    """``builder/python:<key>`` in ``127.0.0.1:5000`` -> ``127.0.0.1:5000/builder/python:<key>``."""
    return f"{registry.rstrip('/')}/{local}"


def pull_as(engine: Engine, registry: str, local: str) -> str | None:
    """Pull ``local``'s counterpart from ``registry`` and tag it locally; its image ID is kept
    across push and pull, so the content keys of the stages after it still match."""
    image_id = engine.pull_if_present(registry_ref(registry, local))
    if image_id is not None:
        engine.tag(image_id, local)
    return image_id


def prepare_base(engine: Engine, config: Config, note: Note, cache_from: str | None = None) -> str:
    """The base image's ID: local, else pulled from ``cache_from``, else bootstrapped."""
    from builder.stages.bootstrap import bootstrap_base

    if engine.image_id(config.base.image) is None and cache_from and "@" not in config.base.image:
        if pull_as(engine, cache_from, config.base.image):
            note(f"base image {config.base.image} pulled from {cache_from}")
    if engine.image_id(config.base.image) is None and config.base.bootstrap and "@" not in config.base.image:
        note(f"base image {config.base.image} missing: bootstrapping it from {config.base.mirror} ...")
        result = bootstrap_base(engine, config, config.logs_dir / "bootstrap.log")
        note(f"bootstrapped {result.tag} in {result.seconds:.1f} s")
    return ensure_parent(engine, config)


def ensure_parent(engine: Engine, config: Config) -> str:
    image_id = engine.image_id(config.base.image)
    if image_id is None:
        hint = ("run `builder base bootstrap` (or `builder images`, which bootstraps when base.bootstrap is true)"
                if "@" not in config.base.image else f"docker pull {config.base.image}")
        raise ConfigError(f"base image {config.base.image} is not present", hint)
    return image_id


def build_stages(engine: Engine, config: Config, specs: list[StageSpec], report: Reporter,
                 logs_dir: Path, base_id: str, force: tuple[str, ...] = (),
                 cache_from: str | None = None, parent_ref: str | None = None) -> list[StageResult]:
    """Build (or reuse by key) ``specs`` in order, the first on ``base_id`` (the base image,
    or ``parent_ref`` with that ID when a stage goes on top of another stage)."""
    results: list[StageResult] = []
    parent_ref, parent_id = parent_ref or config.base.image, base_id
    for spec in specs:
        stage = render_stage(spec, parent_ref, parent_id)
        existing = None if spec.name in force else engine.image_id(stage.tag)
        pulled = None
        if existing is None and cache_from and spec.name not in force:
            started = time.monotonic()
            pulled = pull_as(engine, cache_from, stage.tag)
        if existing:
            report(stage.name, "reused")
            results.append(StageResult(stage.name, stage.key, stage.tag, existing, True, 0.0))
        elif pulled:
            report(stage.name, f"pulled from {cache_from}")
            results.append(StageResult(stage.name, stage.key, stage.tag, pulled, True,
                                       time.monotonic() - started, pulled=True))
        else:
            report(stage.name, "building")
            started = time.monotonic()
            log_path = logs_dir / f"{stage.name}-{stage.key}.log"
            try:
                built = engine.build(stage.dockerfile, spec.files, stage.tag, stage_labels(stage),
                                     spec.buildargs, log_path, network=config.build.network,
                                     replace=spec.name in force)
            except BuildError as exc:
                raise explain_certificate_failure(exc, log_path, config) from None
            versions = installed_versions(engine, stage.tag, sorted(spec.pins))
            banners = compiler_banners(engine, stage.tag, sorted(spec.compilers))
            try:
                check_pins(stage.name, spec.pins, versions)
                check_compilers(stage.name, spec.compilers, banners)
            except BuildError:
                engine.remove_image(stage.tag)  # a mismatching image must not be reused later
                raise
            results.append(StageResult(stage.name, stage.key, stage.tag, built.image_id, False,
                                       time.monotonic() - started, log_path, versions, banners))
            report(stage.name, "built")
        parent_ref, parent_id = stage.tag, results[-1].image_id
    return results


@dataclass(frozen=True)
class StageLookup:
    """A stage as the plan sees it: its key and image when they can be known without
    building (a stage over a parent that must be built has neither yet)."""

    name: str
    key: str | None
    tag: str | None
    image_id: str | None  # None: to build


def lookup_stages(engine: Engine, config: Config, specs: list[StageSpec], base_id: str | None,
                  parent_ref: str | None = None) -> list[StageLookup]:
    """What ``build_stages`` would reuse, read from the engine's image list only (no build,
    no container): keys chain on parent image IDs, so after the first missing image the
    keys of the stages above it are unknown."""
    found: list[StageLookup] = []
    parent_ref, parent_id = parent_ref or config.base.image, base_id
    for spec in specs:
        if parent_id is None:
            found.append(StageLookup(spec.name, None, None, None))
            continue
        stage = render_stage(spec, parent_ref, parent_id)
        image_id = engine.image_id(stage.tag)
        found.append(StageLookup(spec.name, stage.key, stage.tag, image_id))
        parent_ref, parent_id = stage.tag, image_id
    return found


@dataclass(frozen=True)
class Images:
    """The image stages a run stands on, base first."""

    base_id: str
    stages: list[StageResult]

    @property
    def python(self) -> StageResult:
        """The last stage: where a deps layer (and every container) goes on top."""
        return self.stages[-1]


StageBuilder = Callable[[Engine, Config, list[StageSpec], Reporter, Path, str], list[StageResult]]


def bring_up(engine: Engine, config: Config, note: Note, specs: list[StageSpec] | None = None, *,
             report: Reporter | None = None, force: tuple[str, ...] = (), cache_from: str | None = None,
             build: StageBuilder | None = None) -> Images:
    """The one place images come up: the base (local, pulled from ``cache_from``, or
    bootstrapped), then each stage reused by key or built. ``build`` replaces the
    key-based builder (the lock file's, which installs exactly the locked packages)."""
    from builder.stages.plan import image_stages

    base_id = prepare_base(engine, config, note, cache_from)
    specs = image_stages(config) if specs is None else specs
    report = report or (lambda stage, event: note(f"stage {stage}: {event}"))
    logs = config.logs_dir / "images"
    if build is not None:
        return Images(base_id, build(engine, config, specs, report, logs, base_id))
    return Images(base_id, build_stages(engine, config, specs, report, logs, base_id, force, cache_from))


def push_stages(engine: Engine, config: Config, results: list[StageResult], registry: str,
                moving_tags: tuple[str, ...], note: Note) -> list[str]:
    """Push the base image and every stage under its content-key tag, plus moving tags
    (``nightly``, ``nightly-YYYYMMDD``) so humans and CI can find the latest."""
    pushed = []
    locals_ = [config.base.image] if "@" not in config.base.image else []
    locals_ += [r.tag for r in results]
    for local in locals_:
        refs = [registry_ref(registry, local)]
        repository = local.rpartition(":")[0]
        refs += [registry_ref(registry, f"{repository}:{tag}") for tag in moving_tags]
        for ref in refs:
            engine.tag(local, ref)
            engine.push(ref)
            note(f"pushed {ref}")
            pushed.append(ref)
    return pushed
