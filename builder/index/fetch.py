"""Fetch prebuilt wheels (e.g. torch by version, with its dependencies) into the local index.

Three steps, each with one job:

1. **Resolve** with pip (``pip install --dry-run --report``) for the python stage's
   interpreter and platform (``--python-version/--abi/--platform``, binary only), with the
   machine's pip configuration switched off so only the named sources answer. pip reads
   the wheels' metadata (PEP 658) rather than the wheels, so resolving costs seconds. The
   report names each chosen file's URL and the sha256 the upstream page gave for it
   (PEP 503 ``#sha256=`` fragment or PEP 691 ``hashes``).
2. **Download** what neither the local index nor the download cache holds, with a
   progress bar, checking every byte against that upstream sha256 (a mismatch deletes
   the partial file and fails). A file from a local find-links dir has no upstream page:
   pip hashes it while resolving, and the copy is checked against that.
3. **Publish** into the :class:`DirectoryIndex` (atomic adds); a wheel the index already
   holds with the same sha256 is left alone.

What builder relies on: the upstream page's hash (checked here, before anything is
published) and the index's own digest of what it stored (compared with it once more).
Cached files carry a ``.sha256`` record written after their check, trusted while their
size and mtime are unchanged, so a rerun neither downloads nor re-hashes gigabytes.

Before asking upstream at all, the requirements are resolved against the local index
alone (a file:// index, no network): when that succeeds, the fetch is a no-op. Pass
``refresh=True`` to resolve against upstream anyway (e.g. to pick up a newer numpy).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse

from builder import validate
from builder.console import Note
from builder.errors import BuildError, ValidationError
from builder.files import CHUNK, TEMP_PREFIX, TEMP_SUFFIX, atomic_write, replace_durably, sha256_file, temp_beside
from builder.index.directory import AddResult, DirectoryIndex
from builder.interpreter import Interpreter, interpreter

PARALLEL_DOWNLOADS = 4
DOWNLOAD_RETRIES = 3

FetchStatus = Literal["present", "cached", "downloaded"]
Progress = Callable[[str, int, int | None], None]  # (filename, bytes so far, total or None)


@dataclass(frozen=True)
class Sources:
    """Where wheels come from: an index URL (None: no index) and find-links dirs/URLs."""

    index_url: str | None
    find_links: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [self.index_url] if self.index_url else []
        return ", ".join(parts + [f"find-links {link}" for link in self.find_links]) or "nothing"


@dataclass(frozen=True)
class Pin:
    """One file the resolver chose: where it lives upstream and the hash its page gave."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str  # from the upstream page (or pip's hash of a local find-links file)
    requested: bool = False


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


# ----------------------------------------------------------------------------- pure parts
def pip_env() -> dict[str, str]:
    """The environment pip runs with: the machine's pip config, mirrors and find-links off
    (only the sources builder names answer); the CA settings (PIP_CERT) kept."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT", "PIP_NO_INDEX")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def resolve_command(requirements: list[str], python: Interpreter | str, sources: Sources, deps: bool,
                    report: Path) -> list[str]:
    """``pip install --dry-run --report`` for the target interpreter: resolves, installs nothing."""
    python = interpreter(python)
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--disable-pip-version-check", "--report", str(report), "--only-binary=:all:",
               "--implementation", "cp", "--python-version", python.series,
               "--abi", python.abi, "--abi", "abi3", "--abi", "none"]
    for platform in python.platforms:
        command += ["--platform", platform]
    command += ["--index-url", sources.index_url] if sources.index_url else ["--no-index"]
    for link in sources.find_links:
        command += ["--find-links", link]
    if not deps:
        command.append("--no-deps")
    return [*command, "--", *requirements]


def parse_report(report: dict[str, Any]) -> list[Pin]:
    """The files of a pip installation report (``--report``), with their upstream sha256."""
    pins = []
    for item in report.get("install", []):
        info = item.get("download_info") or {}
        url = info.get("url", "")
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
        if not filename.endswith(".whl"):
            raise BuildError(f"the resolver chose {url or item}, which is not a wheel")
        meta = item.get("metadata") or {}
        pins.append(Pin(meta.get("name", ""), meta.get("version", ""), filename, url,
                        hashes.get("sha256", ""), bool(item.get("requested"))))
    return pins


def cache_record_valid(path: Path, record: dict[str, Any]) -> bool:
    """A cached file's sha256 record holds while its size and mtime are those recorded."""
    try:
        stat = path.stat()
    except OSError:
        return False
    return record.get("size") == stat.st_size and record.get("mtime_ns") == stat.st_mtime_ns


# ------------------------------------------------------------------------------- resolving
def resolve(requirements: list[str], python: Interpreter | str, sources: Sources, deps: bool,
            log: Path | None = None) -> list[Pin]:
    with tempfile.TemporaryDirectory(prefix="builder-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        command = resolve_command(requirements, python, sources, deps, report)
        done = subprocess.run(command, capture_output=True, text=True, env=pip_env())
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as fh:
                fh.write("$ " + " ".join(command) + "\n" + done.stdout + done.stderr)
        if done.returncode != 0:
            reason = next((ln for ln in reversed(done.stderr.splitlines()) if ln.startswith("ERROR")),
                          f"pip exit {done.returncode}")
            raise BuildError(f"resolving {' '.join(requirements)} from {sources.describe()} failed: "
                             f"{reason.removeprefix('ERROR: ')}", f"see {log}" if log else None)
        return parse_report(json.loads(report.read_text()))


def resolve_locally(index: DirectoryIndex, requirements: list[str], python: Interpreter | str, deps: bool,
                    log: Path | None = None) -> list[Pin] | None:
    """The pins when the local index alone satisfies the requirements, else None."""
    if not (index.simple_dir / "index.html").is_file():
        return None
    try:
        return resolve(requirements, python, Sources(index.simple_url()), deps, log)
    except BuildError:
        return None


# ----------------------------------------------------------------------------- downloading
def _read_record(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.with_name(path.name + ".sha256").read_text())
    except (OSError, ValueError):
        return {}


def _write_record(path: Path, sha256: str, url: str) -> None:
    stat = path.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "url": url}
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


def download(pin: Pin, cache_dir: Path, progress: Progress | None = None, session: Any = None) -> int:
    """Download ``pin`` into ``cache_dir``, checking it against the upstream sha256 while
    streaming; the file appears under its name only once complete and verified."""
    dest = cache_dir / pin.filename
    last_error = ""
    for attempt in range(DOWNLOAD_RETRIES):
        digest = hashlib.sha256()
        size = 0
        fd, part = temp_beside(dest)
        try:
            with os.fdopen(fd, "wb") as out:
                if pin.url.startswith("file://"):
                    source = Path(unquote(urlparse(pin.url).path))
                    total = source.stat().st_size
                    with source.open("rb") as fh:
                        while chunk := fh.read(CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            size += len(chunk)
                            if progress:
                                progress(pin.filename, size, total)
                else:
                    import requests

                    http = session or requests
                    with http.get(pin.url, stream=True, timeout=60, verify=ca_bundle()) as response:
                        response.raise_for_status()
                        length = response.headers.get("Content-Length")
                        total = int(length) if length and length.isdigit() else None
                        for chunk in response.iter_content(CHUNK):
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
        try:
            os.chmod(part, 0o644)
            replace_durably(part, dest)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        _write_record(dest, digest.hexdigest(), pin.url)
        return size
    raise BuildError(f"downloading {pin.filename} from {pin.url} failed after {DOWNLOAD_RETRIES} attempts: "
                     f"{last_error[:300]}")


# --------------------------------------------------------------------------------- the lot
def resolution_path(cache_dir: Path, requirements: list[str], python: Interpreter | str, sources: Sources,
              deps: bool) -> Path:
    """Where the last upstream resolution of exactly this request is recorded."""
    python = interpreter(python)
    key = json.dumps([sorted(requirements), python.series, python.platforms, sources.describe(), deps])
    return cache_dir / "resolved" / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def read_resolution(path: Path) -> list[Pin] | None:
    try:
        data = json.loads(path.read_text())
        return [Pin(**pin) for pin in data["pins"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_resolution(path: Path, requirements: list[str], pins: list[Pin]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"requirements": requirements, "resolved": time.time(),
                                   "pins": [asdict(p) for p in pins]}, indent=1))


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
        write_resolution(recorded, requirements, pins)
    else:
        result.offline = True
    cache_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_parts(cache_dir)
    plan: list[tuple[Pin, FetchStatus]] = []
    for pin in pins:
        if pin.filename in in_index and (not pin.sha256 or in_index[pin.filename] == pin.sha256):
            plan.append((pin, "present"))
        elif pin.sha256 and cached_sha256(cache_dir / pin.filename) == pin.sha256:
            plan.append((pin, "cached"))
        else:
            plan.append((pin, "downloaded"))
    missing = [pin for pin, status in plan if status == "downloaded"]
    sizes: dict[str, int] = {}
    if missing:
        if note:
            note(f"downloading {len(missing)} wheel(s) from {sources.describe()} into {cache_dir} ...")
        import requests

        with requests.Session() as session, ThreadPoolExecutor(PARALLEL_DOWNLOADS) as pool:
            futures = {pin.filename: pool.submit(download, pin, cache_dir, progress, session) for pin in missing}
            for name, future in futures.items():
                sizes[name] = future.result()
    for pin, status in plan:
        added = None
        if status != "present":
            path = cache_dir / pin.filename
            added = index.add(path, {"prebuilt": {"url": pin.url, "upstream_sha256": pin.sha256,
                                                  "fetched": time.time()}})
            if pin.sha256 and added.sha256 != pin.sha256:  # pragma: no cover - the cache changed under us
                raise BuildError(f"{pin.filename}: the index stored sha256 {added.sha256}, upstream says {pin.sha256}")
        result.items.append(Fetched(pin, status, sizes.get(pin.filename, 0), added))
    result.seconds = time.monotonic() - started
    return result


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


def default_cache_dir(data_dir: str | Path, configured: str = "") -> Path:
    """``[prebuilt] download_cache``, else ``<data_dir>/downloads``."""
    return Path(configured).expanduser() if configured else Path(data_dir).expanduser() / "downloads"


def sources_for(source: str | None, index_url: str, find_links: list[str]) -> Sources:
    """``--from``: an http(s) index URL, a file:// or local PEP 503 index (has index.html),
    or a plain directory of wheels (find-links, no index)."""
    if not source:
        return Sources(index_url, tuple(find_links))
    if source.startswith(("http://", "https://")):
        return Sources(validate.http_url(source, "--from"), tuple(find_links))
    path = Path(unquote(urlparse(source).path)) if source.startswith("file://") else Path(source)
    if not path.is_dir():
        raise ValidationError(f"--from {source}: not a URL or an existing directory")
    if (path / "index.html").is_file():
        return Sources(path.absolute().as_uri() + "/", tuple(find_links))
    return Sources(None, (str(path.absolute()), *find_links))


def remove_stale_parts(cache_dir: Path, older_than_s: float = 24 * 3600) -> None:
    """Partial downloads left by a killed run (a finished one renames or deletes its own)."""
    now = time.time()
    for part in cache_dir.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
        try:
            if now - part.stat().st_mtime > older_than_s:
                part.unlink()
        except OSError:
            pass


__all__ = ["Fetched", "FetchResult", "Pin", "Sources", "cached_sha256", "completion_notes", "default_cache_dir",
           "fetch", "parse_report", "resolve_command", "sources_for"]
