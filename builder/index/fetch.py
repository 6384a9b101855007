"""Fetch prebuilt wheels (e.g. torch by version, with its dependencies) into the local index.

Three steps, each with one job and its own module:

1. **Resolve** with pip (builder.index.resolve): which files, from which URLs, with the
   sha256 the upstream page gave for each.
2. **Download** what neither the local index nor the download cache holds
   (builder.index.download), checking every byte against that upstream sha256.
3. **Publish** into the :class:`DirectoryIndex` (atomic adds); a wheel the index already
   holds with the same sha256 is left alone.

What builder relies on: the upstream page's hash (checked before anything is published)
and the index's own digest of what it stored (compared with it once more).

Before asking upstream at all, the requirements are resolved against the local index
alone (a file:// index, no network): when that succeeds, the fetch is a no-op. Pass
``refresh=True`` to resolve against upstream anyway (e.g. to pick up a newer numpy).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from builder.console import Note
from builder.errors import BuildError
from builder.index.directory import AddResult, DirectoryIndex
from builder.index.download import Progress, cached, download, remove_stale_parts
from builder.index.resolve import (
    Pin,
    Sources,
    read_resolution,
    resolution_path,
    resolve,
    resolve_locally,
    write_resolution,
)
from builder.interpreter import Interpreter
from builder.store import DownloadStore

PARALLEL_DOWNLOADS = 4

FetchStatus = Literal["present", "cached", "downloaded"]


@dataclass(frozen=True)
class Fetched:
    pin: Pin
    status: FetchStatus
    bytes: int = 0  # bytes downloaded (0 unless status == downloaded)
    added: AddResult | None = None


@dataclass
class FetchResult:
    requirements: list[str]
    items: list[Fetched] = field(default_factory=list)
    offline: bool = False  # upstream not asked (recorded resolution, or the local index alone)
    seconds: float = 0.0

    @property
    def added(self) -> list[AddResult]:
        return [i.added for i in self.items if i.added is not None]

    @property
    def downloaded_bytes(self) -> int:
        return sum(i.bytes for i in self.items)

    def count(self, status: FetchStatus) -> int:
        return sum(1 for i in self.items if i.status == status)

    def summary(self) -> str:
        how = (f"{self.count('downloaded')} downloaded ({self.downloaded_bytes / 1e6:.0f} MB), "
               f"{self.count('cached')} from the download cache, {self.count('present')} already in the index")
        asked = "upstream not asked" if self.offline else "resolved upstream"
        return f"{len(self.items)} wheel(s): {how} ({asked}), {self.seconds:.1f} s"

    def as_dict(self) -> dict[str, Any]:
        return {"requirements": self.requirements, "offline": self.offline, "seconds": round(self.seconds, 3),
                "downloaded_bytes": self.downloaded_bytes,
                "wheels": [{"name": i.pin.name, "version": i.pin.version, "filename": i.pin.filename,
                            "sha256": i.pin.sha256, "url": i.pin.url, "status": i.status,
                            "index": i.added.status if i.added else "unchanged"} for i in self.items]}


def fetch(requirements: list[str], index: DirectoryIndex, cache_dir: Path, python: Interpreter | str,
          index_url: str | None, find_links: list[str], deps: bool = True, log: Path | None = None,
          refresh: bool = False, progress: Progress | None = None, note: Note | None = None) -> FetchResult:
    """Make ``requirements`` installable from ``index`` for the target interpreter.

    Resolution, cheapest first (``refresh`` skips to the last): the recorded upstream
    resolution of this exact request (``<cache>/resolved/``), the local index alone,
    upstream (recorded for next time)."""
    started = time.monotonic()
    result = FetchResult(list(requirements))
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
    sources = Sources(index_url, tuple(find_links))
    recorded = resolution_path(cache_dir, requirements, python, sources, deps)
    in_index = {e.filename: e.sha256 for e in index.entries()}
    pins = None if refresh else read_resolution(recorded)
    if pins is None and not refresh:
        local = resolve_locally(index, requirements, python, deps, log)
        if local is not None:
            result.offline = True
            result.items = [Fetched(p, "present") for p in local]
            result.seconds = time.monotonic() - started
            return result
    if pins is None:
        pins = resolve(requirements, python, sources, deps, log)
        DownloadStore(cache_dir).make_dir(recorded.parent)  # shared like the files (builder.store)
        write_resolution(recorded, requirements, pins)
    else:
        result.offline = True
    store = DownloadStore(cache_dir)
    store.make_dir(cache_dir)
    remove_stale_parts(store)
    plan: list[tuple[Pin, FetchStatus]] = []
    paths: dict[str, Path] = {}
    for pin in pins:
        if pin.filename in in_index and (not pin.sha256 or in_index[pin.filename] == pin.sha256):
            plan.append((pin, "present"))
        elif (found := cached(pin, store)) is not None:
            plan.append((pin, "cached"))
            paths[pin.filename] = found
        else:
            plan.append((pin, "downloaded"))
    missing = [pin for pin, status in plan if status == "downloaded"]
    sizes: dict[str, int] = {}
    if missing:
        if note:
            note(f"downloading {len(missing)} wheel(s) from {sources.describe()} into {cache_dir} ...")
        import requests

        with requests.Session() as session, ThreadPoolExecutor(PARALLEL_DOWNLOADS) as pool:
            futures = {pin.filename: pool.submit(download, pin, store, progress, session) for pin in missing}
            for name, future in futures.items():
                done = future.result()
                sizes[name], paths[name] = done.size, done.path
    for pin, status in plan:
        added = None
        if status != "present":
            added = index.add(paths[pin.filename], {"prebuilt": {"url": pin.url, "upstream_sha256": pin.sha256,
                                                  "fetched": time.time()}})
            if pin.sha256 and added.sha256 != pin.sha256:  # pragma: no cover - the cache changed under us
                raise BuildError(f"{pin.filename}: the index stored sha256 {added.sha256}, upstream says {pin.sha256}")
        result.items.append(Fetched(pin, status, sizes.get(pin.filename, 0), added))
    result.seconds = time.monotonic() - started
    return result
