"""Downloading resolved wheels into the user's download cache (builder.store), each
checked against its upstream sha256.

Every byte is hashed while it streams in (a mismatch deletes the partial file and
fails); the file appears at its content path (``sha256/<hex>/<filename>``) only once
complete and checked (a temporary file renamed by builder.files). A file from a local
find-links dir has no upstream page: pip hashes it while resolving, and the copy is
checked against that.

Cached files carry a ``.sha256`` record written after their check, trusted while their
size and mtime are unchanged, so a rerun neither downloads nor re-hashes gigabytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from builder.console import Note
from builder.errors import BuildError
from builder.files import CHUNK, TEMP_PREFIX, TEMP_SUFFIX, atomic_write, replace_durably, sha256_file, temp_beside
from builder.index.resolve import Pin
from builder.store import DownloadStore, download_cache

DOWNLOAD_RETRIES = 3

Progress = Callable[[str, int, int | None], None]  # (filename, bytes so far, total or None)


# ------------------------------------------------------------------------- the cache's records
def cache_record_valid(path: Path, record: dict[str, Any]) -> bool:
    """A cached file's sha256 record holds while its size and mtime are those recorded."""
    try:
        stat = path.stat()
    except OSError:
        return False
    return record.get("size") == stat.st_size and record.get("mtime_ns") == stat.st_mtime_ns


def _read_record(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.with_name(path.name + ".sha256").read_text())
    except (OSError, ValueError):
        return {}


def _write_record(path: Path, sha256: str, url: str) -> None:
    stat = path.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "url": url}
    # The record only saves re-hashing: in a teammate's directory this uid may not write
    # (a cache shared across groups); the file is then hashed again next time.
    with contextlib.suppress(PermissionError):
        atomic_write(path.with_name(path.name + ".sha256"), json.dumps(record))


def cached_sha256(path: Path) -> str | None:
    """The sha256 of a file in the download cache (from its record when still valid)."""
    if not path.is_file():
        return None
    record = _read_record(path)
    if record and cache_record_valid(path, record):
        return str(record["sha256"])
    digest = sha256_file(path)
    _write_record(path, digest, record.get("url", ""))
    return digest


def ca_bundle() -> str | bool:
    """The CA bundle pip itself would use here (PIP_CERT), else requests' default."""
    return os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or True


@contextlib.contextmanager
def _source(pin: Pin, session: Any) -> Iterator[tuple[Iterator[bytes], int | None]]:
    """The bytes of ``pin`` in chunks, and their total when known: a file:// URL (a local
    find-links dir) is read directly, anything else through requests."""
    if pin.url.startswith("file://"):
        source = Path(unquote(urlparse(pin.url).path))
        with source.open("rb") as fh:
            yield iter(lambda: fh.read(CHUNK), b""), source.stat().st_size
        return
    import requests

    with (session or requests).get(pin.url, stream=True, timeout=60, verify=ca_bundle()) as response:
        response.raise_for_status()
        length = response.headers.get("Content-Length")
        yield response.iter_content(CHUNK), int(length) if length and length.isdigit() else None


@dataclass(frozen=True)
class Downloaded:
    path: Path  # the checked file at its content path
    size: int


def cached(pin: Pin, store: DownloadStore) -> Path | None:
    """The checked file for ``pin`` in the cache, if there (a pin without a sha256 has no
    content path: it is always downloaded). A file of the old flat layout
    (``<cache>/<filename>``) whose hash matches is moved to its content path."""
    if not pin.sha256:
        return None
    path = store.path(pin.sha256, pin.filename)
    if cached_sha256(path) == pin.sha256:
        return path
    flat = store.root / pin.filename
    if cached_sha256(flat) != pin.sha256:
        return None
    try:
        store.make_dir(path.parent)
        replace_durably(flat, path)
    except OSError:  # not ours to move (a teammate's old cache): read it where it is
        return flat
    flat.with_name(flat.name + ".sha256").unlink(missing_ok=True)
    _write_record(path, pin.sha256, pin.url)
    return path


def download(pin: Pin, store: DownloadStore, progress: Progress | None = None, session: Any = None) -> Downloaded:
    """Download ``pin`` into ``store``, checking it against the upstream sha256 while
    streaming; the file appears at its content path only once complete and verified."""
    last_error = ""
    for attempt in range(DOWNLOAD_RETRIES):
        digest = hashlib.sha256()
        size = 0
        fd, part = temp_beside(store.make_dir(store.parts) / pin.filename)
        try:
            with os.fdopen(fd, "wb") as out, _source(pin, session) as (chunks, total):
                for chunk in chunks:
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                    if progress:
                        progress(pin.filename, size, total)
                out.flush()
                os.fsync(out.fileno())
        except Exception as exc:  # network errors: retry, then one clear error
            part.unlink(missing_ok=True)
            last_error = f"{type(exc).__name__}: {exc}"
            time.sleep(1 + attempt * 2)
            continue
        if pin.sha256 and digest.hexdigest() != pin.sha256:
            part.unlink(missing_ok=True)
            raise BuildError(f"{pin.filename} from {pin.url} has sha256 {digest.hexdigest()}, "
                             f"but the upstream page says {pin.sha256}; the file was discarded",
                             "a proxy or mirror altered it, or the page is stale: retry, or use another --from")
        dest = store.path(digest.hexdigest(), pin.filename)
        try:
            os.chmod(part, 0o644)
            store.make_dir(dest.parent)
            replace_durably(part, dest)  # a concurrent run's identical copy is simply replaced
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        _write_record(dest, digest.hexdigest(), pin.url)
        return Downloaded(dest, size)
    raise BuildError(f"downloading {pin.filename} from {pin.url} failed after {DOWNLOAD_RETRIES} attempts: "
                     f"{last_error[:300]}")


def default_cache_dir(configured: str = "") -> Path:
    """``[prebuilt] download_cache``, else the user's cache (builder.store)."""
    return download_cache(configured)


def remove_stale_parts(store: DownloadStore, older_than_s: float = 24 * 3600) -> None:
    """Partial downloads left by a killed run (a finished one renames or deletes its own);
    a day old, so a concurrent run's download in progress is never taken."""
    now = time.time()
    for part in [*store.parts.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"), *store.root.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}")]:
        try:
            if now - part.stat().st_mtime > older_than_s:
                part.unlink()
        except OSError:
            pass


def completion_notes(note: Note) -> Progress:
    """A progress callback that notes each file once it is complete (for logs and non-terminals)."""
    mutex = threading.Lock()
    finished: set[str] = set()

    def update(filename: str, done: int, total: int | None) -> None:
        if total is not None and done >= total:
            with mutex:
                if filename in finished:
                    return
                finished.add(filename)
            note(f"downloaded {filename} ({done / 1e6:.1f} MB)")

    return update
