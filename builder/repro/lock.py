"""`builder lock` and `builder wheels --locked`: read back, then rebuild, exactly what was installed.

builder.toml pins what the templates name (compilers, Python, build requirements); a
stage also holds what those pulled in. `builder lock` reads every installed package back
from the built images into the lock file (builder.repro.lockfile: its records and format).

With ``--locked``, a stage whose existing image holds exactly the locked packages is
reused; otherwise it is rendered with every apt package (``name=version``) and every pip
requirement (``--require-hashes``) pinned and built, and then checked against the lock.
A version the package source no longer has, a base image that differs, or a ref that
moved is a :class:`LockError` raised before anything is compiled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

from builder.config import Config
from builder.engine import ContainerSpec, Engine
from builder.errors import BuildError
from builder.repro.lockfile import (  # load_lock: pipeline.py imports it from here
    BaseLock,
    Lock,
    LockError,
    PipPin,
    SourceLock,
    StageLock,
    load_lock,
)
from builder.repro.manifest import redact_url
from builder.stages.images import StageResult, build_stages
from builder.stages.plan import StageSpec, apt_url, render_stage

_PIP_SELF = {"pip"}  # comes with the interpreter's ensurepip, pinned by the python package


# ------------------------------------------------------------------------ pure helpers
def spec_digest(spec: StageSpec) -> str:
    """Digest of a stage's unlocked recipe (its Dockerfile without parent, its files):
    equal digests mean the lock was made from the same builder.toml and templates."""
    dockerfile = render_stage(spec, "<parent>", None).dockerfile
    payload = json.dumps([spec.name, dockerfile, sorted(spec.buildargs.items()),
                          sorted((p, hashlib.sha256(d).hexdigest()) for p, d in spec.files.items())])
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def parse_inspection(output: str) -> tuple[dict[str, str], dict[str, str]]:
    """``dpkg-query`` lines, a ``--- pip`` marker, then ``pip freeze`` lines -> (apt, pip)."""
    apt: dict[str, str] = {}
    pip: dict[str, str] = {}
    section = "apt"
    for line in output.splitlines():
        if line.strip() == "--- pip":
            section = "pip"
        elif section == "apt":
            parts = line.split("\t")
            if len(parts) == 3 and parts[2] == "installed":
                apt[parts[0]] = parts[1]
        elif "==" in line:
            name, _, version = line.strip().partition("==")
            pip[str(canonicalize_name(name))] = version
    return apt, pip


def parse_hashes(output: str) -> dict[str, str]:
    """``sha256sum`` lines over downloaded distributions -> {project: sha256}."""
    hashes: dict[str, str] = {}
    for line in output.splitlines():
        match = re.match(r"^([0-9a-f]{64})\s+\*?(\S+)$", line.strip())
        if not match:
            continue
        filename = match.group(2).rsplit("/", 1)[-1]
        try:
            name = parse_wheel_filename(filename)[0] if filename.endswith(".whl") else \
                parse_sdist_filename(filename)[0]
        except ValueError:
            continue
        hashes[str(name)] = match.group(1)
    return hashes


def apt_delta(apt: dict[str, str], parent: dict[str, str]) -> dict[str, str]:
    """Packages a stage added or changed over its parent: what its apt line must pin."""
    return {name: version for name, version in sorted(apt.items()) if parent.get(name) != version}


def locked_spec(spec: StageSpec, stage: StageLock, parent_apt: dict[str, str]) -> StageSpec:
    """The stage with every apt package and pip requirement of the lock pinned."""
    stale = {p: (v, stage.apt.get(p)) for p, v in spec.pins.items() if stage.apt.get(p) != v}
    if stale:
        listing = ", ".join(f"{p} {want} (lock: {have or 'absent'})" for p, (want, have) in sorted(stale.items()))
        raise LockError(f"builder.lock does not match builder.toml in stage {spec.name}: {listing}",
                        "run `builder lock` again after changing pins")
    delta = apt_delta(stage.apt, parent_apt)
    apt_lock = [f"{name}={version}" for name, version in delta.items() if name not in spec.pins]
    return dataclasses.replace(spec, context={**spec.context, "apt_lock": apt_lock, "pip_lock": pip_lock(stage)},
                               pins={**spec.pins, **delta})


def pip_lock(stage: StageLock) -> list[dict[str, str]]:
    """The stage's pip requirements as the template pins them: ``name==version`` with its hash."""
    return [{"spec": f"{name}=={pin.version}", "hash": f"sha256:{pin.sha256}"}
            for name, pin in sorted(stage.pip.items()) if pin.sha256]


def differences(want_apt: dict[str, str], have_apt: dict[str, str], want_pip: dict[str, PipPin] | None = None,
                have_pip: dict[str, str] | None = None) -> list[str]:
    """Human-readable differences between locked and installed packages ([] when equal)."""
    out = [f"{name} {have_apt.get(name, 'absent')} (lock: {want_apt.get(name, 'absent')})"
           for name in sorted(set(want_apt) | set(have_apt)) if want_apt.get(name) != have_apt.get(name)]
    if want_pip is not None and have_pip is not None:
        wanted = {name: pin.version for name, pin in want_pip.items()}
        out += [f"pip {name} {have_pip.get(name, 'absent')} (lock: {wanted.get(name, 'absent')})"
                for name in sorted(set(wanted) | set(have_pip)) if wanted.get(name) != have_pip.get(name)]
    return out


def check_sources(lock: Lock, resolved: list[tuple[str, str, str, str]]) -> None:
    """``resolved``: (recipe, url, ref, sha) of each source target; a ref that moved fails."""
    for recipe, url, ref, sha in resolved:
        locked = lock.sources.get(recipe)
        if locked is None:
            raise LockError(f"builder.lock records no {recipe} source",
                            f"run `builder lock --{recipe} {ref}` to lock it")
        if redact_url(url) != locked.url:
            raise LockError(f"{recipe}: repository {redact_url(url)} is not the locked {locked.url}")
        if sha != locked.sha:
            what = f"ref {ref} moved" if ref == locked.ref else f"--{recipe} {ref} is not the locked {locked.ref}"
            raise LockError(f"{recipe}: {what}: it is now {sha[:12]}, builder.lock has {locked.sha[:12]}",
                            f"build the locked commit (--{recipe} {locked.sha}) or accept the new one with "
                            f"`builder lock --{recipe} {ref}`")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_INSTALL_FAILURES = (
    re.compile(r"E: Version '[^']+' for '[^']+' was not found"),
    re.compile(r"E: Unable to locate package \S+"),
    re.compile(r"E: Package '[^']+' has no installation candidate"),
    re.compile(r"ERROR: (No matching distribution found for \S+|Could not find a version that satisfies .*)"),
    re.compile(r"THESE PACKAGES DO NOT MATCH THE HASHES.*"),
)


def install_failures(log_text: str) -> list[str]:
    """The apt/pip lines of a stage build log that say a locked version cannot be had."""
    found: list[str] = []
    for line in _ANSI.sub("", log_text).splitlines():  # the daemon colours RUN's stderr
        for pattern in _INSTALL_FAILURES:
            match = pattern.search(line)
            if match and match.group(0) not in found:
                found.append(match.group(0))
    return found


# ------------------------------------------------------------------------ Docker side
_INSPECT = ("dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Status}\\n' 2>/dev/null; "
            # A deps layer's freeze (python stage + the commit's build requirements) first.
            "echo '--- pip'; cat /opt/venv/builder-deps-freeze.txt 2>/dev/null || "
            "cat /opt/venv/builder-freeze.txt 2>/dev/null || true")


def inspect_image(engine: Engine, image: str) -> tuple[dict[str, str], dict[str, str]]:
    """(Debian packages, pip packages) installed in ``image``, read from a container."""
    result = engine.run(ContainerSpec(image=image, command=["sh", "-c", _INSPECT], network="none"))
    apt, pip = parse_inspection(result.output)
    if not apt:
        raise BuildError(f"cannot list the Debian packages in {image}: {result.output.strip()[:200]}")
    return apt, pip


def pip_hashes(engine: Engine, cfg: Config, image: str, versions: dict[str, str]) -> dict[str, str]:
    """sha256 of the file pip installs for each ``name==version`` (downloaded in the stage)."""
    wanted = {n: v for n, v in versions.items() if n not in _PIP_SELF}
    if not wanted:
        return {}
    script = ('set -e; d=$(mktemp -d); pip download --no-deps --no-cache-dir --disable-pip-version-check '
              '-q -d "$d" "$@" >&2; cd "$d" && sha256sum *')
    result = engine.run(ContainerSpec(
        image=image, command=["sh", "-c", script, "sh", *(f"{n}=={v}" for n, v in sorted(wanted.items()))],
        environment={"PIP_INDEX_URL": cfg.python.index_url, "PIP_CONFIG_FILE": "/dev/null"},
        network=cfg.build.network))
    hashes = parse_hashes(result.output)
    missing = sorted(set(wanted) - set(hashes))
    if result.exit_code != 0 or missing:
        tail = " ".join(result.output.strip().splitlines()[-3:])[:300]
        raise LockError(f"cannot hash the pip requirements {', '.join(missing) or ''} of {image}: {tail}",
                        "pip download must reach python.index_url (builder.toml) from the python stage")
    return {n: hashes[n] for n in wanted}


def repo_digests(engine: Engine, ref: str) -> list[str]:
    try:
        return sorted(engine.api.inspect_image(ref).get("RepoDigests") or [])
    except Exception:  # noqa: BLE001 - digests are informative; a local image has none
        return []


def make_lock(engine: Engine, cfg: Config, base_id: str, stages: list[StageResult],
              sources: dict[str, SourceLock], specs: list[StageSpec]) -> Lock:
    """Read the lock back from the built images (``stages``, in order, from ``specs``)."""
    base_apt, _ = inspect_image(engine, base_id)
    base = BaseLock(cfg.base.image, base_id, repo_digests(engine, cfg.base.image), base_apt)
    locks: dict[str, StageLock] = {}
    for spec, stage in zip(specs, stages, strict=True):
        apt, pip = inspect_image(engine, stage.tag)
        hashes = pip_hashes(engine, cfg, stage.tag, pip) if pip else {}
        locks[stage.name] = StageLock(stage.name, stage.key, stage.tag, stage.image_id, spec_digest(spec), apt,
                                      {n: PipPin(v, hashes.get(n, "")) for n, v in sorted(pip.items())})
    return Lock(base=base, stages=locks, sources=sources, wheels=wheels_record(cfg, locks))


def wheels_record(cfg: Config, stages: dict[str, StageLock]) -> dict[str, str]:
    """What decides the wheels' platform tag: the [wheels] settings and the auditwheel
    version the python stage holds (its hash is in that stage's pip pins)."""
    auditwheel = next((s.pip["auditwheel"].version for s in stages.values() if "auditwheel" in s.pip), "")
    return {"plat": cfg.wheels.plat, "external_libs": cfg.wheels.external_libs, "auditwheel": auditwheel}


def check_wheels(lock: Lock, cfg: Config) -> None:
    """--locked with other [wheels] settings than the lock's would give other tags: refused."""
    if not lock.wheels:
        return  # a lock from before the audit recorded none
    asked = {"plat": cfg.wheels.plat, "external_libs": cfg.wheels.external_libs}
    differ = [f"{k} {asked[k]!r} (lock: {lock.wheels.get(k)!r})" for k in asked if lock.wheels.get(k) != asked[k]]
    if differ:
        raise LockError(f"[wheels] differs from builder.lock: {', '.join(differ)}",
                        "set [wheels] as the lock has it, or run `builder lock` again with these settings")


def check_base(engine: Engine, lock: Lock, base_id: str) -> None:
    if base_id == lock.base.image_id:
        return
    apt, _ = inspect_image(engine, base_id)
    diff = differences(lock.base.apt, apt)
    if diff:
        raise LockError(f"the base image {lock.base.ref} ({base_id[:19]}) is not the locked one "
                        f"({lock.base.image_id[:19]}): {'; '.join(diff[:8])}",
                        "use the locked image (or a base.snapshot that reproduces it), or run `builder lock`")


def build_locked_stages(engine: Engine, cfg: Config, lock: Lock, specs: list[StageSpec],
                        report: Callable[[str, str], None], logs_dir: Path, base_id: str) -> list[StageResult]:
    """Stages as the lock has them: an existing image with exactly the locked packages is
    reused, anything else is built from the pinned recipe and checked."""
    check_base(engine, lock, base_id)
    missing = [s.name for s in specs if s.name not in lock.stages]
    if missing:
        raise LockError(f"builder.lock has no stage {', '.join(missing)}", "run `builder lock`")
    results: list[StageResult] = []
    parent_ref, parent_id, parent_apt = cfg.base.image, base_id, lock.base.apt
    for spec in specs:
        locked = lock.stages[spec.name]
        if spec_digest(spec) != locked.spec_digest:
            raise LockError(f"builder.lock was made for another recipe of stage {spec.name} "
                            "(builder.toml or the templates changed since)", "run `builder lock` again")
        plain = render_stage(spec, parent_ref, parent_id)
        image_id = engine.image_id(plain.tag)
        if image_id and _holds(engine, plain.tag, locked):
            report(spec.name, "reused")
            result = StageResult(spec.name, plain.key, plain.tag, image_id, True, 0.0)
        else:
            result = _build_pinned(engine, cfg, locked_spec(spec, locked, parent_apt), locked, report, logs_dir,
                                   parent_ref, parent_id)
        results.append(result)
        parent_ref, parent_id, parent_apt = result.tag, result.image_id, locked.apt
    return results


def _holds(engine: Engine, image: str, locked: StageLock) -> bool:
    """Whether ``image`` holds exactly the locked packages (then it is what the lock describes)."""
    apt, pip = inspect_image(engine, image)
    return not differences(locked.apt, apt, locked.pip, pip)


def _build_pinned(engine: Engine, cfg: Config, spec: StageSpec, locked: StageLock,
                  report: Callable[[str, str], None], logs_dir: Path, parent_ref: str,
                  parent_id: str) -> StageResult:
    # build_stages starts from config.base.image: hand it this stage's parent instead.
    as_parent = cfg.replace(base=dataclasses.replace(cfg.base, image=parent_ref))
    key = render_stage(spec, parent_ref, parent_id).key
    try:
        [result] = build_stages(engine, as_parent, [spec], report, logs_dir, parent_id)
    except BuildError as exc:
        log = logs_dir / f"{spec.name}-{key}.log"
        failures = install_failures(log.read_text(errors="replace")) if log.is_file() else []
        if failures:
            source = apt_url(cfg) if failures[0].startswith("E:") else redact_url(cfg.python.index_url)
            raise LockError(f"stage {spec.name}: builder.lock pins versions the package source no longer has "
                            f"({source}): {'; '.join(failures[:5])}",
                            "set base.snapshot (builder.toml) to a snapshot.debian.org time that has them, or "
                            f"run `builder lock` to accept today's versions (log: {log})") from None
        raise LockError(f"stage {spec.name}: building the locked recipe failed: {exc}") from None
    apt, pip = inspect_image(engine, result.tag)
    diff = differences(locked.apt, apt, locked.pip, pip)
    if diff:
        engine.remove_image(result.tag)
        raise LockError(f"stage {spec.name}: the locked build installed something else: {'; '.join(diff[:8])}")
    return result


# ------------------------------------------------------------------------ deps layers
def make_deps_lock(engine: Engine, cfg: Config, spec: StageSpec, stage: StageResult,
                   python_pip: dict[str, PipPin]) -> StageLock:
    """The lock of one deps layer: every pip package in it, with hashes for those it
    added or changed over the python stage (what its install line pins)."""
    apt, pip = inspect_image(engine, stage.tag)
    added = {n: v for n, v in pip.items() if n not in python_pip or python_pip[n].version != v}
    hashes = pip_hashes(engine, cfg, stage.tag, added) if added else {}
    return StageLock(stage.name, stage.key, stage.tag, stage.image_id, spec_digest(spec), apt,
                     {n: PipPin(v, hashes.get(n, "")) for n, v in sorted(pip.items())})


def build_locked_deps(engine: Engine, cfg: Config, recipe: str, lock: Lock, spec: StageSpec, parent: StageResult,
                      report: Callable[[str, str], None], logs_dir: Path) -> StageResult:
    """The deps layer as the lock has it: the commit's requirements must be the locked
    ones; an image holding exactly the locked packages is reused, else the layer is
    built with ``--require-hashes`` from the locked pins and checked."""
    locked = lock.deps.get(recipe)
    if locked is None:
        raise LockError(f"builder.lock has no deps layer for {recipe}", f"run `builder lock --{recipe} REF` again")
    if spec_digest(spec) != locked.spec_digest:
        raise LockError(f"the build requirements of {recipe} differ from the locked ones (the commit or the "
                        "python stage changed)", "run `builder lock` again")
    plain = render_stage(spec, parent.tag, parent.image_id)
    image_id = engine.image_id(plain.tag)
    if image_id and _holds(engine, plain.tag, locked):
        report(spec.name, "reused")
        return StageResult(spec.name, plain.key, plain.tag, image_id, True, 0.0)
    pinned = dataclasses.replace(spec, context={**spec.context, "pip_lock": pip_lock(locked)})
    return _build_pinned(engine, cfg, pinned, locked, report, logs_dir, parent.tag, parent.image_id)


__all__ = ["build_locked_deps", "build_locked_stages", "check_sources", "check_wheels", "load_lock", "make_deps_lock",
           "make_lock"]
