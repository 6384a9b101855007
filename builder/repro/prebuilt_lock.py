"""Locking a prebuilt package (torch_tpu 0.2.0, a torch 2.13.0): its version and the sha256
of its wheel and of each dependency wheel a run takes with it (``lock_prebuilt``).

With ``--locked``, another version is refused before anything is fetched
(``check_prebuilt_version``), and after the fetch every locked file must be in the local
index with the locked sha256 (``check_prebuilt``).
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement

from builder.config import Config
from builder.index.deps import requires_dist, runtime_requirements, satisfied_by
from builder.index.directory import DirectoryIndex
from builder.index.prebuilt import find_prebuilt
from builder.index.resolve import Sources, resolve
from builder.index.wheelmeta import normalize_name
from builder.interpreter import Interpreter
from builder.repro.lockfile import Lock, LockError, PrebuiltLock


def lock_prebuilt(cfg: Config, project: str, version: str, own_projects: frozenset[str] = frozenset(),
                  log: Path | None = None) -> PrebuiltLock:
    """``project==version`` and the dependency wheels a run takes with it, each with its
    sha256, as a run on this data dir would: a wheel the local index holds is that file
    (its requirements followed through the index), the rest as ``[prebuilt]`` resolves it
    (pip, PEP 658 metadata, the page's hashes; nothing is downloaded). ``own_projects``
    (what builder builds: torch for a torch_tpu) are not followed: the run brings them."""
    index = DirectoryIndex(cfg.index_dir)
    python = Interpreter.of(cfg)
    sources = Sources(cfg.prebuilt.index_url, tuple(cfg.prebuilt.find_links))
    own = {normalize_name(p) for p in own_projects}
    entries = index.entries()
    files: dict[str, str] = {}
    entry = find_prebuilt(index, project, version)
    if entry is not None:
        files[entry.filename] = entry.sha256
        wanted = runtime_requirements(requires_dist(index.files_dir / entry.filename), python)
    else:
        [pin] = resolve([f"{project}=={version}"], python, sources, False, log)
        files[pin.filename] = pin.sha256
        wanted = runtime_requirements(list(pin.requires_dist), python)
    missing, seen = [], {normalize_name(project)}
    while wanted:  # through the index, breadth first
        text = wanted.pop(0)
        name = normalize_name(Requirement(text).name)
        if name in own or name in seen:
            continue
        seen.add(name)
        found = [e for e in entries if e.normalized == name and satisfied_by([e], text, python)]
        if not found:
            missing.append(text)
            continue
        have = max(found, key=lambda e: e.filename)
        files[have.filename] = have.sha256
        wanted += runtime_requirements(requires_dist(index.files_dir / have.filename), python)
    if missing:
        for pin in resolve(missing, python, sources, True, log):
            if normalize_name(pin.name) not in own:
                files.setdefault(pin.filename, pin.sha256)
    return PrebuiltLock(version, files)


def check_prebuilt_version(lock: Lock, recipe: str, version: str, flag: str) -> None:
    """Before anything is fetched: the lock records this package at this version."""
    locked = lock.prebuilt.get(recipe)
    if locked is None:
        raise LockError(f"builder.lock records no prebuilt {recipe}", f"run `builder lock {flag} {version}` to lock it")
    if locked.version != version:
        raise LockError(f"{recipe} {version} is not the locked {locked.version}",
                        f"ask for {flag} {locked.version}, or accept {version} with `builder lock {flag} {version}`")


def check_prebuilt(lock: Lock, recipe: str, index: DirectoryIndex) -> None:
    """After the fetch: every locked file is in the index with the locked sha256."""
    have = {e.filename: e.sha256 for e in index.entries()}
    for filename, sha256 in lock.prebuilt[recipe].files.items():
        if filename not in have:
            raise LockError(f"{recipe}: the locked {filename} is not in the local index after the fetch",
                            "[prebuilt] no longer offers it (or resolves another file): re-create the lock with "
                            "`builder lock`")
        if have[filename] != sha256:
            raise LockError(f"{recipe}: {filename} has sha256 {have[filename][:16]}..., builder.lock has "
                            f"{sha256[:16]}...", "the file changed upstream or in the index: check where it came "
                            "from, then re-create the lock with `builder lock`")
