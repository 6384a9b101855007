"""Check a wheel's contents before the index publishes it.

pip refuses (or, worse, an older installer honours) archive entries that escape the
install directory: absolute names, ``..`` segments, symlinks. A wheel whose RECORD
hashes do not match its files is also refused at install time. Checking here, on the
user's own file and before anything is copied, keeps the index from ever serving a
wheel pip would reject, and lets the error name the file and entry the user can fix.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import stat
import zipfile
from pathlib import Path

from builder.errors import PackageIndexError
from builder.files import CHUNK
from builder.index.wheelmeta import WheelName, normalize_name, unreadable_wheel

# PEP 427: RECORD hashes use sha256 or stronger; md5/sha1 are refused.
_RECORD_ALGORITHMS = {"sha256", "sha384", "sha512"}
_UNHASHED = ("RECORD", "RECORD.jws", "RECORD.p7s")


def entry_name_problem(name: str) -> str | None:
    """Why an archive entry name is unsafe, or None: relative, normalized, no `..`."""
    if not name:
        return "an empty entry name"
    if "\x00" in name or "\\" in name:
        return "a NUL byte or backslash in the entry name"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "a '..' segment"
    if any(p in ("", ".") for p in parts):
        return "a non-normalized path"
    return None


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16)


def _dist_prefix(top: str) -> tuple[str, str] | None:
    """('name', 'dist-info'|'data') for a top-level `<name>-<version>.dist-info|.data` dir."""
    for suffix in (".dist-info", ".data"):
        if top.endswith(suffix):
            stem = top[: -len(suffix)]
            return (stem.rsplit("-", 1)[0] if "-" in stem else stem), suffix[1:]
    return None


def check_wheel_contents(path: Path, wheel: WheelName, shown: Path | str | None = None) -> None:
    """Raise PackageIndexError naming ``shown`` (the user's file) and the offending entry."""
    label = shown or path
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            own_dist_info = None
            for info in infos:
                problem = entry_name_problem(info.filename)
                if problem is None and _is_symlink(info):
                    problem = "a symlink entry"
                top = info.filename.split("/", 1)[0]
                dist = _dist_prefix(top) if "/" in info.filename else None
                if problem is None and dist is not None and normalize_name(dist[0]) != wheel.normalized:
                    problem = f"a {dist[1]} directory of another project"
                if problem is None and dist is None and top.endswith((".dist-info", ".data")):
                    problem = "a file posing as a .dist-info/.data directory"
                if problem:
                    raise PackageIndexError(f"{label}: refusing entry {info.filename!r}: {problem}",
                                            "the wheel would not install safely; rebuild it")
                if dist and dist[1] == "dist-info" and info.filename == f"{top}/RECORD":
                    own_dist_info = top
            if own_dist_info is None:
                raise PackageIndexError(f"{label}: no .dist-info/RECORD entry", "a wheel must list its files in RECORD")
            _check_record(zf, own_dist_info, label)
            mismatch = tag_mismatch(zf, own_dist_info, wheel)
            if mismatch:
                raise PackageIndexError(f"{label}: {mismatch}", TAG_MISMATCH_HINT)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError) as exc:
        raise unreadable_wheel(exc, label) from None


TAG_MISMATCH_HINT = ("pip picks a wheel by its file name, installers and auditwheel read WHEEL: "
                     "rebuild it, or retag both with `auditwheel addtag` / `python -m wheel tags`")


def wheel_file_tags(zf: zipfile.ZipFile, dist_info: str) -> list[str]:
    """The ``Tag:`` lines of ``<dist_info>/WHEEL`` (PEP 427), in order; none if it is absent."""
    try:
        raw = zf.read(f"{dist_info}/WHEEL").decode("utf-8", errors="replace")
    except KeyError:
        return []
    return [v.strip() for k, _, v in (line.partition(":") for line in raw.splitlines()) if k.strip() == "Tag"]


def filename_tags(wheel: WheelName) -> list[str]:
    """The tags a file name's compressed tag set expands to (``cp311-cp311-a.b`` -> two)."""
    return [f"{p}-{a}-{q}" for p in wheel.python_tag.split(".") for a in wheel.abi_tag.split(".")
            for q in wheel.platform_tag.split(".")]


def tag_mismatch(zf: zipfile.ZipFile, dist_info: str, wheel: WheelName) -> str | None:
    """Why the file name's tags and the WHEEL file's Tag lines disagree (naming both), or None.

    pip chooses a wheel by its file name; a wheel retagged by renaming alone (or a WHEEL
    edited alone) says one platform to pip and another to anything that reads the
    metadata (auditwheel, installers, an index that re-derives names)."""
    named = filename_tags(wheel)
    recorded = wheel_file_tags(zf, dist_info)
    if not recorded or sorted(set(named)) == sorted(set(recorded)):
        return None  # no Tag lines (a very old bdist_wheel): nothing to disagree with; pip reads the name
    return f"file name tags {', '.join(named)} but its {dist_info}/WHEEL says {', '.join(recorded)}"


def _check_record(zf: zipfile.ZipFile, dist_info: str, label: Path | str) -> None:
    raw = zf.read(f"{dist_info}/RECORD").decode("utf-8", errors="replace")
    recorded: dict[str, str] = {}
    for row in csv.reader(io.StringIO(raw)):
        if not row or not row[0]:
            continue
        recorded[row[0]] = row[1] if len(row) > 1 else ""
    for info in zf.infolist():
        name = info.filename
        if name.endswith("/"):
            continue
        if name in (f"{dist_info}/{u}" for u in _UNHASHED):
            continue
        spec = recorded.get(name)
        if not spec:
            raise PackageIndexError(f"{label}: entry {name!r} has no hash in {dist_info}/RECORD",
                                    "the wheel would not install with pip; rebuild it")
        algorithm, _, expected = spec.partition("=")
        if algorithm not in _RECORD_ALGORITHMS:
            raise PackageIndexError(f"{label}: entry {name!r} is recorded with hash {algorithm!r}",
                                    "RECORD must use sha256 or stronger")
        digest = hashlib.new(algorithm)
        with zf.open(info) as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
        actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
        if actual != expected.rstrip("="):
            raise PackageIndexError(f"{label}: entry {name!r} does not match its RECORD hash",
                                    "the wheel was modified after it was built; rebuild it")
