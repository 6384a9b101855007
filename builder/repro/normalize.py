"""Deterministic wheels: rewrite a built wheel so equal contents give equal bytes.

A wheel is a zip, and a zip records more than its files: entry order, timestamps,
permission bits, the creating system, extra fields and the compression settings. Two
clean builds of the same commit differ in exactly those, so after the build the wheel
is rewritten with all of them fixed:

- entries sorted by name, the ``.dist-info`` directory last and ``RECORD`` the very last
  entry (the order wheel tools write and the spec recommends);
- every timestamp is SOURCE_DATE_EPOCH (UTC), clamped to 1980-01-01, the zip format's
  first representable date;
- permissions 0644, or 0755 for executables (any x bit, ELF or ``#!`` files under
  ``.data/scripts``) and shared objects (``*.so``, ``*.so.N``);
- no extra fields or comments, Unix as the creating system, deflate at a fixed level;
- ``RECORD`` rewritten from the normalized entries (``sha256=`` urlsafe base64 without
  padding, size), so it lists exactly what the zip holds. Signatures (``RECORD.jws``,
  ``RECORD.p7s``) are dropped: they signed the old RECORD.

The file contents are never changed: a difference that lives inside a file (a path or a
date compiled into a binary) must be fixed in the build, and `builder verify` names it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from builder.errors import BuildError
from builder.files import CHUNK, replace_durably, sha256_file, temp_beside

# Bumped whenever the rewrite changes the bytes it writes: part of every wheel key, so a
# changed normalizer never reuses a wheel the old one wrote.
NORMALIZER_VERSION = "1"

ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z: a zip timestamp cannot be older
COMPRESS_LEVEL = 6  # zlib's default; fixed so the bytes do not depend on a library default
FILE_MODE = 0o644
EXEC_MODE = 0o755
_S_IFREG = 0o100000
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


@dataclass(frozen=True)
class NormalizedWheel:
    path: Path
    sha256: str
    entries: int
    changed: bool  # False when the input was already normalized


def zip_date_time(source_date_epoch: int) -> tuple[int, int, int, int, int, int]:
    """The zip ``date_time`` for an epoch, in UTC, never before 1980 (zip's own epoch)."""
    moment = time.gmtime(max(int(source_date_epoch), ZIP_EPOCH))
    return (moment.tm_year, moment.tm_mon, moment.tm_mday, moment.tm_hour, moment.tm_min, moment.tm_sec)


def record_hash(data: bytes) -> str:
    """``sha256=<urlsafe base64, no padding>``, the RECORD digest form (PEP 376/427)."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def is_shared_object(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def is_executable(name: str, mode: int, data: bytes) -> bool:
    """Executable bit kept for what must run: x bits already set, shared objects, and
    scripts (ELF or ``#!``) installed to bin/ from ``.data/scripts``."""
    if mode & 0o111 or is_shared_object(name):
        return True
    parts = name.split("/")
    in_scripts = len(parts) >= 3 and parts[0].endswith(".data") and parts[1] == "scripts"
    return in_scripts and (data[:4] == b"\x7fELF" or data[:2] == b"#!")


def sort_key(name: str) -> tuple[int, int, str]:
    """Package files first, then ``.data``, then ``.dist-info`` with RECORD last."""
    top = name.split("/", 1)[0]
    if top.endswith(".dist-info"):
        return (2, 1 if name == f"{top}/RECORD" else 0, name)
    if top.endswith(".data"):
        return (1, 0, name)
    return (0, 0, name)


def _dist_info(names: list[str], wheel: Path) -> str:
    candidates = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")
                         and n.endswith("/RECORD") and n.count("/") == 1})
    if len(candidates) != 1:
        raise BuildError(f"{wheel.name}: expected one .dist-info/RECORD, found {len(candidates)}",
                         "is this file a wheel?")
    return candidates[0]


def record_text(rows: list[tuple[str, str, int]], record_name: str) -> bytes:
    """RECORD for ``rows`` (name, ``sha256=...``, size) in order, RECORD itself last, unhashed."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for name, digest, size in rows:
        writer.writerow([name, digest, str(size)])
    writer.writerow([record_name, "", ""])
    return buffer.getvalue().encode("utf-8")


def _info(name: str, date_time: tuple[int, int, int, int, int, int], mode: int, size: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=date_time)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix, so external_attr carries the mode
    info.create_version = 20
    info.extract_version = 20
    info.external_attr = (_S_IFREG | mode) << 16
    info.file_size = size  # known up front: zipfile then decides on zip64 the same way every time
    info._compresslevel = COMPRESS_LEVEL  # what ZipFile.open(info, "w") compresses with
    return info


def _copy_entry(src: zipfile.ZipFile, name: str, dst: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """Stream one entry (never a whole multi-GiB library in memory); its RECORD digest."""
    digest = hashlib.sha256()
    with src.open(name) as fin, dst.open(info, "w") as fout:
        while chunk := fin.read(CHUNK):
            digest.update(chunk)
            fout.write(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def write_normalized(wheel: Path, dest: Path | BinaryIO, source_date_epoch: int) -> int:
    """Write the normalized form of ``wheel`` to ``dest`` (a path or a binary file); returns
    the number of entries."""
    try:
        with zipfile.ZipFile(wheel) as src:
            infos = [i for i in src.infolist() if not i.is_dir()]
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                duplicated = sorted({n for n in names if names.count(n) > 1})
                raise BuildError(f"{wheel.name}: duplicate zip entries {', '.join(duplicated)}")
            dist_info = _dist_info(names, wheel)
            record_name = f"{dist_info}/RECORD"
            skip = {record_name, *(f"{dist_info}/{s}" for s in _SIGNATURES)}
            by_name = {i.filename: i for i in infos if i.filename not in skip}
            ordered = sorted(by_name, key=sort_key)
            date_time = zip_date_time(source_date_epoch)
            rows: list[tuple[str, str, int]] = []
            with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as dst:
                for name in ordered:
                    source = by_name[name]
                    with src.open(source) as head:
                        magic = head.read(4)
                    mode = EXEC_MODE if is_executable(name, (source.external_attr >> 16) & 0o7777, magic) \
                        else FILE_MODE
                    rows.append((name, _copy_entry(src, name, dst, _info(name, date_time, mode, source.file_size)),
                                 source.file_size))
                record = record_text(rows, record_name)
                dst.writestr(_info(record_name, date_time, FILE_MODE, len(record)), record)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BuildError(f"{wheel.name}: not a readable zip ({exc})") from None
    return len(rows) + 1


def normalize_wheel(wheel: Path | str, source_date_epoch: int) -> NormalizedWheel:
    """Rewrite ``wheel`` in place (temp file beside it + rename: no reader sees half a file)."""
    path = Path(wheel)
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as out:
            entries = write_normalized(path, out, source_date_epoch)
            out.flush()
            os.fsync(out.fileno())
        digest, before = sha256_file(tmp), sha256_file(path)
        if digest != before:
            tmp.chmod(0o644)
            replace_durably(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return NormalizedWheel(path, digest, entries, digest != before)


def check_record(wheel: Path | str) -> list[str]:
    """Problems with a wheel's RECORD (missing, extra or mismatching entries); [] when sound."""
    path = Path(wheel)
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        record_name = f"{_dist_info(names, path)}/RECORD"
        rows = list(csv.reader(io.StringIO(zf.read(record_name).decode("utf-8"))))
        problems = []
        listed = {}
        for row in rows:
            if len(row) != 3:
                problems.append(f"malformed RECORD row {row!r}")
                continue
            listed[row[0]] = (row[1], row[2])
        for name in names:
            if name == record_name or name.endswith(_SIGNATURES):
                continue
            if name not in listed:
                problems.append(f"{name}: not in RECORD")
                continue
            data = zf.read(name)
            digest, size = listed.pop(name)
            if digest != record_hash(data) or size != str(len(data)):
                problems.append(f"{name}: RECORD says {digest},{size}, the file is {record_hash(data)},{len(data)}")
        listed.pop(record_name, None)
        problems.extend(f"{name}: in RECORD, not in the wheel" for name in sorted(listed))
    return problems
