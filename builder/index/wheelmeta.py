"""What a wheel says about itself: name, version, tags, core metadata, digests.

The index and the upload client both need the same few facts about a wheel, and both
must refuse a file that only *looks* like one (a renamed tarball, a truncated copy, a
name whose METADATA disagrees with its file name). Everything here reads; nothing writes.
A bad file becomes a :class:`PackageIndexError` naming the file, never a zipfile traceback.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_version, parse_wheel_filename

from builder import validate
from builder.errors import PackageIndexError, ValidationError
from builder.files import file_digests

# METADATA is a few KiB; a huge one means a hostile or broken file, not a long README.
MAX_METADATA_BYTES = 16 * 1024 * 1024
_NORMALIZE = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503: runs of ``-``, ``_`` and ``.`` become one ``-``, lower case (Foo_Bar -> foo-bar)."""
    return _NORMALIZE.sub("-", name).lower()


@dataclass(frozen=True)
class WheelName:
    """The facts encoded in a wheel's file name (PEP 427)."""

    filename: str
    name: str  # as spelled in the file name (Foo_Bar)
    normalized: str  # PEP 503 (foo-bar)
    version: str  # as spelled in the file name
    build: str | None
    python_tag: str  # py3, cp311.cp312 ... (the upload API's ``pyversion``)
    abi_tag: str
    platform_tag: str


@dataclass(frozen=True)
class CoreMetadata:
    """The fields of ``.dist-info/METADATA`` that an index page or an upload needs."""

    name: str
    version: str
    metadata_version: str
    requires_python: str | None
    requires_dist: tuple[str, ...] = ()  # what the index must also hold to install it (builder.index.deps)


@dataclass(frozen=True)
class WheelInfo:
    """Everything the index and the upload client know about one wheel file."""

    path: Path
    filename: str
    name: str  # METADATA's Name, the display name
    normalized: str
    version: str  # METADATA's Version
    build: str | None
    python_tag: str
    abi_tag: str
    platform_tag: str
    metadata_version: str
    requires_python: str | None
    sha256: str
    size: int


def parse_filename(filename: str) -> WheelName:
    """Split and check a wheel file name; a path (``../x.whl``) or a non-wheel is refused."""
    try:
        validate.wheel_filename(filename, "wheel file name")
    except ValidationError as exc:
        raise PackageIndexError(exc.message, "pass a file named name-version-pytag-abitag-platform.whl") from None
    try:
        parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise PackageIndexError(f"{filename!r} is not a valid wheel file name: {exc}") from None
    stem = filename[: -len(".whl")]
    parts = stem.split("-")
    if len(parts) == 6:
        name, version, build, py, abi, plat = parts
    else:
        name, version, py, abi, plat = parts
        build = None
    return WheelName(filename, name, normalize_name(name), version, build, py, abi, plat)


def requirement_of(filename: str) -> str:
    """``torch==2.9.0`` for ``torch-2.9.0-cp311-...whl``: exactly the wheel in the index."""
    wheel = parse_filename(filename)
    return f"{wheel.name}=={wheel.version}"


def read_metadata(path: Path, wheel: WheelName) -> CoreMetadata:
    """Read METADATA from the wheel's ``.dist-info`` and check it agrees with the file name.

    A wheel whose METADATA names another project would be listed under one name and
    installed as another; refusing it here keeps the index honest.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            member = _metadata_member(zf, wheel, path)
            info = zf.getinfo(member)
            if info.file_size > MAX_METADATA_BYTES:
                raise PackageIndexError(f"{path}: {member} is {info.file_size} bytes, too large for METADATA")
            raw = zf.read(member)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError) as exc:
        raise unreadable_wheel(exc, path, "the wheel's METADATA") from None

    headers = HeaderParser().parsestr(raw.decode("utf-8", errors="replace"))
    name = (headers.get("Name") or "").strip()
    version = (headers.get("Version") or "").strip()
    metadata_version = (headers.get("Metadata-Version") or "").strip()
    requires_python = (headers.get("Requires-Python") or "").strip() or None
    if not name or not version or not metadata_version:
        missing = [f for f, v in (("Name", name), ("Version", version),
                                  ("Metadata-Version", metadata_version)) if not v]
        raise PackageIndexError(f"{path}: METADATA lacks {', '.join(missing)}")
    if normalize_name(name) != wheel.normalized:
        raise PackageIndexError(f"{path}: METADATA names project {name!r} but the file name says {wheel.name!r}")
    if canonicalize_version(version) != canonicalize_version(wheel.version.replace("_", "-")):
        raise PackageIndexError(f"{path}: METADATA says version {version!r} but the file name says {wheel.version!r}")
    requires_dist = tuple(v.strip() for v in headers.get_all("Requires-Dist") or [])
    return CoreMetadata(name, version, metadata_version, requires_python, requires_dist)


def unreadable_wheel(exc: BaseException, label: Path | str, what: str = "the wheel") -> PackageIndexError:
    """One error for a wheel whose zip cannot be read (not a zip, an unsupported feature,
    an I/O error), naming the user's file ``label`` and ``what`` was being read."""
    if isinstance(exc, zipfile.BadZipFile):
        return PackageIndexError(f"{label} is not a wheel: not a valid zip file ({exc})",
                                 "the file may be truncated or corrupt; rebuild or re-download it")
    if isinstance(exc, OSError):
        return PackageIndexError(f"{label}: cannot read the file ({exc.strerror or exc})")
    return PackageIndexError(f"{label}: cannot read {what} ({exc})")


def _metadata_member(zf: zipfile.ZipFile, wheel: WheelName, path: Path) -> str:
    candidates = [
        n for n in zf.namelist()
        if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
    ]
    # Prefer the .dist-info that matches the file name; a wheel may vendor others
    # only in sub-directories, which the count("/") filter already ignores.
    matching = [n for n in candidates if normalize_name(n.split("-", 1)[0]) == wheel.normalized]
    chosen = matching or candidates
    if len(chosen) != 1:
        what = "no" if not chosen else f"{len(chosen)}"
        raise PackageIndexError(f"{path} is not a wheel: {what} top-level *.dist-info/METADATA found")
    return chosen[0]


def read_digests(path: Path, algorithms: tuple[str, ...] = ("sha256",)) -> dict[str, str]:
    """Hex digests of a wheel file (one read, builder.files), a read error as the index's error."""
    try:
        return file_digests(path, algorithms)
    except OSError as exc:
        raise unreadable_wheel(exc, path) from None


def inspect_wheel(path: Path, sha256: str | None = None, filename: str | None = None) -> WheelInfo:
    """Parse a wheel file: file name, METADATA and (unless given) its sha256.

    ``filename`` lets the index inspect a temporary copy under the name it will publish.
    """
    path = Path(path)
    wheel = parse_filename(filename or path.name)
    if not path.is_file():
        raise PackageIndexError(f"{path}: no such file")
    meta = read_metadata(path, wheel)
    digest = sha256 or read_digests(path)["sha256"]
    return WheelInfo(
        path=path,
        filename=wheel.filename,
        name=meta.name,
        normalized=wheel.normalized,
        version=meta.version,
        build=wheel.build,
        python_tag=wheel.python_tag,
        abi_tag=wheel.abi_tag,
        platform_tag=wheel.platform_tag,
        metadata_version=meta.metadata_version,
        requires_python=meta.requires_python,
        sha256=digest,
        size=path.stat().st_size,
    )
