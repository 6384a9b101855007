"""Prebuilt wheels: a version of a project found in the local index, else fetched into
it (with its dependencies) from the configured index and find-links."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from builder.config import Config
from builder.console import Note
from builder.errors import PackageIndexError
from builder.index.directory import DirectoryIndex
from builder.index.download import completion_notes, default_cache_dir
from builder.index.fetch import fetch
from builder.index.pages import Entry
from builder.interpreter import Interpreter


def find_prebuilt(index: DirectoryIndex, project: str, version: str) -> Entry | None:
    """The wheel of ``project`` whose version is ``version`` (a local ``+cpu`` label allowed)."""
    wanted = Version(version)
    matches = []
    for entry in index.entries():
        if entry.normalized != project.replace("_", "-").lower() and entry.name != project:
            continue
        try:
            have = Version(entry.version)
        except InvalidVersion:
            continue
        if have == wanted or (not wanted.local and have.public == wanted.public):
            matches.append(entry)
    return max(matches, key=lambda e: e.filename) if matches else None


def ensure_prebuilt(cfg: Config, index: DirectoryIndex, project: str, version: str, note: Note,
                    own_projects: frozenset[str] | None = None) -> Entry:
    """``project==version`` in the index: already there, or fetched with its dependencies.
    ``own_projects`` (what builder builds) given: the wheel is fetched alone, then its
    dependencies but those (builder.index.deps), which must come from the index itself."""
    entry = find_prebuilt(index, project, version)
    if entry is None:
        note(f"{project} {version}: not in the local index, fetching it with its dependencies ...")
        cache = default_cache_dir(cfg.prebuilt.download_cache)
        fetched = fetch([f"{project}=={version}"], index, cache, Interpreter.of(cfg), cfg.prebuilt.index_url,
                        cfg.prebuilt.find_links, deps=own_projects is None, log=cfg.logs_dir / f"fetch-{project}.log",
                        progress=completion_notes(note), note=note)
        note(f"{project} {version}: {fetched.summary()}")
        entry = find_prebuilt(index, project, version)
        if entry is not None and own_projects is not None:
            from builder.index.deps import fetch_dependencies

            note(f"{project}: {fetch_dependencies(cfg, index, [entry.filename], note, own_projects=own_projects)}")
    if entry is None:
        raise PackageIndexError(f"no {project} {version} wheel for this interpreter in the index",
                                "import one with `builder index add FILE` or set [prebuilt] find_links")
    return entry
