"""Sources from a package index: a project's sdist at one version, found in a PEP 503 /
PEP 691 simple index, checked against the index's sha256, kept in a download cache keyed
by that hash, and unpacked safely into a fixed path (as a git source is checked out).

An sdist is what PyPI offers for many torch extensions (torch-scatter, torch-spline-conv)
whose wheels are built per torch version: ``--pkg NAME=VERSION`` builds the released
source without a git mirror. Its SOURCE_DATE_EPOCH is its newest member's mtime (the
time the sdist was made), so two builds of the same sdist stamp the same times.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import posixpath
import re
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse
from urllib.request import url2pathname

import requests
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from builder.errors import BuildError, ConfigError
from builder.files import replace_durably, sha256_file, temp_beside
from builder.source.buildreqs import (
    BAZEL_VERSION_FILE,
    PYPROJECT,
    REQUIREMENTS_FILE,
    BuildRequirements,
    build_requirements,
)
from builder.source.mirror import SourceTree
from builder.store import DownloadStore

HTTP_TIMEOUT = 60
MAX_SDIST_BYTES = 1 << 30  # an sdist larger than 1 GiB is not a source archive
MAX_UNPACKED_BYTES = 8 << 30  # members' total size: a decompression bomb stops here
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_ANCHOR = re.compile(r"<a\s[^>]*?href=\"([^\"]+)\"[^>]*>([^<]*)</a>", re.IGNORECASE)
SDIST_SUFFIXES = (".tar.gz", ".zip")


@dataclass(frozen=True)
class Sdist:
    project: str  # as asked (the index's name for it is the same, normalized)
    version: str
    url: str  # where it was found (without the hash fragment)
    sha256: str  # the index's hash, checked on download
    path: Path  # the verified file in the download cache


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str


def _get(url: str, accept: str = _ACCEPT) -> tuple[bytes, str]:
    """(body, content type) of ``url``; a file:// URL reads the file (or its index.html)."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = Path(url2pathname(parsed.path))
        if path.is_dir():
            path = path / "index.html"
        try:
            return path.read_bytes(), "text/html"
        except FileNotFoundError:
            raise LookupError(url) from None
    try:
        response = requests.get(url, headers={"Accept": accept}, timeout=HTTP_TIMEOUT)
    except requests.RequestException as exc:
        raise BuildError(f"cannot reach the package index at {url}: {type(exc).__name__}") from None
    if response.status_code == 404:
        raise LookupError(url)
    if response.status_code != 200:
        raise BuildError(f"the package index answered {response.status_code} for {url}")
    return response.content, response.headers.get("Content-Type", "")


def project_files(index_url: str, project: str) -> list[IndexFile]:
    """The files a simple index lists for ``project`` (PEP 691 JSON or PEP 503 HTML)."""
    page = urljoin(index_url.rstrip("/") + "/", canonicalize_name(project) + "/")
    try:
        body, kind = _get(page)
    except LookupError:
        raise ConfigError(f"the package index {index_url} has no project {project!r}",
                          "check [packages] sdist (the project's name on the index)") from None
    files: list[IndexFile] = []
    if "json" in kind:
        try:
            data = json.loads(body)
            entries = [(f["filename"], urljoin(page, f["url"]), (f.get("hashes") or {}).get("sha256", ""))
                       for f in data["files"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise BuildError(f"the package index page {page} is not valid PEP 691 JSON: {exc}") from None
    else:
        text = body.decode("utf-8", errors="replace")
        entries = []
        for href, label in _ANCHOR.findall(text):
            href = href.replace("&amp;", "&")
            url, fragment = urldefrag(urljoin(page, href))
            digest = fragment.partition("sha256=")[2] if fragment.startswith("sha256=") else ""
            entries.append((label.strip() or posixpath.basename(urlparse(url).path), url, digest))
    for filename, url, digest in entries:
        files.append(IndexFile(filename, urldefrag(url)[0], digest.lower()))
    return files


def find_sdist(files: list[IndexFile], project: str, version: str) -> IndexFile | None:
    """The sdist of ``project`` at ``version`` among an index page's files (PEP 625 names
    and the older ``Name-1.0.tar.gz`` alike; versions compared as PEP 440 versions)."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise ConfigError(f"{version!r} is not a version (an sdist package is built at a PEP 440 version)") from None
    for file in files:
        if not file.filename.endswith(SDIST_SUFFIXES):
            continue
        try:
            name, found = parse_sdist_filename(file.filename)
        except (InvalidSdistFilename, InvalidVersion):
            continue
        if name == canonicalize_name(project) and found == wanted:
            return file
    return None


def resolve_sdist(project: str, version: str, index_url: str, store: DownloadStore) -> Sdist:
    """Find ``project``'s sdist at ``version`` in the simple index at ``index_url`` and make
    sure the verified file is in ``store`` (downloaded once: an entry whose hash
    matches is reused)."""
    files = project_files(index_url, project)
    found = find_sdist(files, project, version)
    if found is None:
        versions = sorted({v for f in files if f.filename.endswith(SDIST_SUFFIXES) for v in [_version_of(f.filename)]
                           if v}, key=Version)
        raise ConfigError(f"{project} {version} has no sdist on {index_url}",
                          f"sdists there: {', '.join(versions[-8:])}" if versions else "it lists no sdist at all")
    if not _SHA256.match(found.sha256):
        raise BuildError(f"the package index gives no sha256 for {found.filename} ({found.url})",
                         "builder only builds sources it can check; use an index that publishes hashes")
    path = store.path(found.sha256, found.filename)
    if not (path.is_file() and sha256_file(path) == found.sha256):
        _download(found, path, store)
    return Sdist(project, version, found.url, found.sha256, path)


def fetch_sdist(url: str, sha256: str, store: DownloadStore) -> Sdist:
    """The sdist a build recorded (its URL and sha256: a manifest's source), from the cache
    or downloaded again and checked; project and version come from its file name."""
    filename = posixpath.basename(urlparse(url).path)
    try:
        name, version = parse_sdist_filename(filename)
    except (InvalidSdistFilename, InvalidVersion):
        raise BuildError(f"{url} does not name an sdist (name-version.tar.gz)") from None
    if not _SHA256.match(sha256):
        raise BuildError(f"{sha256!r} is not a sha256 (the recorded hash of {filename})")
    path = store.path(sha256, filename)
    if not (path.is_file() and sha256_file(path) == sha256):
        _download(IndexFile(filename, url, sha256), path, store)
    return Sdist(str(name), str(version), url, sha256, path)


def _version_of(filename: str) -> str:
    try:
        return str(parse_sdist_filename(filename)[1])
    except (InvalidSdistFilename, InvalidVersion):
        return ""


def _download(file: IndexFile, path: Path, store: DownloadStore) -> None:
    """Download to a unique temp name beside ``path`` (builder.files), check size and
    hash, then rename it durably into place: a reader never sees half an sdist."""
    store.make_dir(path.parent)
    digest = hashlib.sha256()  # hashed while it streams in, so the file is read once
    size = 0
    handle, tmp = temp_beside(path)
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in _chunks(file.url):
                size += len(chunk)
                if size > MAX_SDIST_BYTES:
                    raise BuildError(f"{file.filename} is larger than {MAX_SDIST_BYTES >> 20} MiB: not downloaded")
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != file.sha256:
            raise BuildError(f"{file.filename} from {file.url} has sha256 {digest.hexdigest()}, "
                             f"the index says {file.sha256}", "the download or the index is corrupt; not used")
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from a teammate sharing the cache
        replace_durably(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _chunks(url: str):  # noqa: ANN202 - an iterator of bytes
    if urlparse(url).scheme == "file":
        yield _get(url)[0]
        return
    try:
        with requests.get(url, stream=True, timeout=HTTP_TIMEOUT) as response:
            if response.status_code != 200:
                raise BuildError(f"download of {url} answered {response.status_code}")
            yield from response.iter_content(1 << 20)
    except requests.RequestException as exc:
        raise BuildError(f"download of {url} failed: {type(exc).__name__}") from None


# --- unpacking -------------------------------------------------------------------------

def _member_problem(name: str, link: str | None, hard: bool, kind_ok: bool) -> str | None:
    """Why an archive member may not be extracted (None: it may)."""
    if not kind_ok:
        return "is a device, FIFO or other special file"
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "has an absolute path"
    if ".." in re.split(r"[/\\]", name):
        return "has a '..' path component"
    if link is not None:
        if link.startswith("/"):
            return f"links to the absolute path {link!r}"
        base = "" if hard else posixpath.dirname(name)
        if posixpath.normpath(posixpath.join(base, link)).split("/")[0] == "..":
            return f"links to {link!r}, outside the archive"
    return None


def _check_tar(archive: tarfile.TarFile, where: str) -> None:
    total = 0
    for member in archive.getmembers():
        link = member.linkname if (member.issym() or member.islnk()) else None
        problem = _member_problem(member.name, link, member.islnk(),
                                  member.isfile() or member.isdir() or member.issym() or member.islnk())
        if problem:
            raise BuildError(f"{where}: member {member.name!r} {problem}", "refusing to unpack this sdist")
        total += max(member.size, 0)
        if total > MAX_UNPACKED_BYTES:
            raise BuildError(f"{where}: unpacks to more than {MAX_UNPACKED_BYTES >> 30} GiB", "refusing to unpack it")


def _check_zip(archive: zipfile.ZipFile, where: str) -> None:
    total = 0
    for info in archive.infolist():
        problem = _member_problem(info.filename, None, False, True)
        if problem:
            raise BuildError(f"{where}: member {info.filename!r} {problem}", "refusing to unpack this sdist")
        total += info.file_size
        if total > MAX_UNPACKED_BYTES:
            raise BuildError(f"{where}: unpacks to more than {MAX_UNPACKED_BYTES >> 30} GiB", "refusing to unpack it")


def _extract_without_filter(archive: tarfile.TarFile, dest: Path, where: str) -> None:
    """What the data filter does, for a Python without it (tarfile's filters came in
    3.11.4; Debian bookworm's python3 is 3.11.2): each member's parent, resolved against
    what is already on disk, must stay inside ``dest``; setuid, setgid and sticky bits are
    dropped and files are made owner-writable."""
    root = dest.resolve()
    for member in archive.getmembers():
        parent = (dest / member.name).parent.resolve()
        if parent != root and root not in parent.parents:
            raise BuildError(f"{where}: member {member.name!r} lands outside the tree through a link",
                             "refusing to unpack this sdist")
        member.mode = (member.mode & 0o777) | (0o600 if member.isfile() else 0o700)
        member.uid = member.gid = 0
        member.uname = member.gname = ""
        archive.extract(member, dest, set_attrs=not member.issym())


def unpack_sdist(sdist: Sdist, dest: Path) -> Path:
    """Unpack into ``dest`` (emptied first), refusing absolute paths, ``..``, links that
    leave the tree and special files; returns the project root inside (the archive's one
    top-level directory, else ``dest``)."""
    where = sdist.path.name
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    try:
        if sdist.path.name.endswith(".zip"):
            with zipfile.ZipFile(sdist.path) as archive:
                _check_zip(archive, where)
                archive.extractall(dest)
        else:
            with tarfile.open(sdist.path) as archive:
                _check_tar(archive, where)
                # the data filter checks again while extracting, against what is already on
                # disk (a link through an earlier link), and drops setuid and device bits
                if hasattr(tarfile, "data_filter"):
                    archive.extractall(dest, filter="data")
                else:
                    _extract_without_filter(archive, dest, where)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise BuildError(f"{where}: cannot unpack: {exc}", "refusing to unpack this sdist") from None
    entries = [p for p in dest.iterdir()]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest


def sdist_time(sdist: Sdist) -> int:
    """SOURCE_DATE_EPOCH of a build of this sdist: its newest member's mtime."""
    if sdist.path.name.endswith(".zip"):
        with zipfile.ZipFile(sdist.path) as archive:
            # zip times carry no zone: read as UTC, so the result is the same on every machine
            times = [calendar.timegm((*info.date_time, 0, 0, 0)) for info in archive.infolist()]
    else:
        with tarfile.open(sdist.path) as archive:
            times = [int(member.mtime) for member in archive.getmembers()]
    if not times:
        raise BuildError(f"{sdist.path.name} is an empty archive")
    return max(times)


def sdist_build_requirements(sdist: Sdist) -> BuildRequirements:
    """The sdist's build requirements, read from the archive without unpacking it (planning
    touches no work tree), by the parser that reads a commit's (builder.source.buildreqs)."""
    files = _root_files(sdist)
    return build_requirements(files.get, f"{sdist.project}-{sdist.version}")


def _root_files(sdist: Sdist) -> dict[str, str]:
    """The regular files at the project root of the archive (its one top-level directory),
    as text, by name: where pyproject.toml and requirements-build.txt live."""
    out: dict[str, str] = {}
    if sdist.path.name.endswith(".zip"):
        with zipfile.ZipFile(sdist.path) as archive:
            names = [i.filename for i in archive.infolist() if not i.is_dir()]
            read = lambda name: archive.read(name)  # noqa: E731
            out = _pick_root(names, read)
    else:
        with tarfile.open(sdist.path) as archive:
            members = {m.name: m for m in archive.getmembers() if m.isfile()}
            out = _pick_root(list(members), lambda name: archive.extractfile(members[name]).read())  # type: ignore[union-attr]
    return out


def _pick_root(names: list[str], read) -> dict[str, str]:  # noqa: ANN001 - name -> bytes
    tops = {n.split("/", 1)[0] for n in names}
    prefix = f"{tops.pop()}/" if len(tops) == 1 and all("/" in n for n in names) else ""
    wanted = (REQUIREMENTS_FILE, PYPROJECT, BAZEL_VERSION_FILE, "WORKSPACE")
    return {name: read(prefix + name)[:1 << 20].decode("utf-8", errors="replace")
            for name in wanted if prefix + name in names}


def checkout_sdist(sdist: Sdist, dest: Path) -> SourceTree:
    """The sdist as a build's source tree, like a commit's checkout (builder.source.mirror):
    unpacked into ``dest`` (emptied first; a fixed path, as ccache's base_dir wants), the
    archive's sha256 where a commit has its SHA, its newest member's time as the commit time."""
    return SourceTree(path=unpack_sdist(sdist, dest), url=sdist.url, sha=sdist.sha256,
                      commit_time=sdist_time(sdist))
