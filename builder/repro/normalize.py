"""Deterministic wheels: rewrite a built wheel so equal contents give equal bytes.

A wheel is a zip, and a zip records more than its files: entry order, timestamps,
permission bits, the creating system, extra fields and the compression settings. Two
clean builds of the same commit differ in exactly those, so after the build the wheel
is rewritten with all of them fixed:

- entries sorted by name, the ``.dist-info`` directory last and ``RECORD`` the very last
  entry (the order wheel tools write and the spec recommends);
- every timestamp is SOURCE_DATE_EPOCH (UTC) to the even second below (zip's resolution),
  clamped to 1980-01-01, the zip format's first representable date;
- permissions 0644, or 0755 for executables (any x bit, ELF or ``#!`` files under
  ``.data/scripts``) and shared objects (``*.so``, ``*.so.N``);
- no extra fields or comments, Unix as the creating system, deflate at a fixed level;
- ``RECORD`` rewritten from the normalized entries (``sha256=`` urlsafe base64 without
  padding, size), so it lists exactly what the zip holds. Signatures (``RECORD.jws``,
  ``RECORD.p7s``) are dropped: they signed the old RECORD.

The file contents are never changed: a difference that lives inside a file (a path or a
date compiled into a binary) must be fixed in the build, and `builder verify` names it.

Where it runs: in the build container, after the audit (builder.recipes.base inlines this
file's source, so it is part of the wheel key), with the python stage's Python and the base
image's zlib, both pinned and listed in the lock (python3.11, zlib1g). The compressed bytes
are what that zlib's deflate writes, and deflate output differs between zlib builds (zlib
against zlib-ng, as Fedora's python links); re-zipping on the host would make the bytes
depend on the host. The host only checks the result (:func:`layout_problems`, from the
central directory, no decompression) and records the container's Python and zlib
(``normalize.json``) in the manifest. Standard library only: it runs as ``python -``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import platform
import sys
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

# Bumped whenever the rewrite changes the bytes it writes: part of every wheel key, so a
# changed normalizer never reuses a wheel the old one wrote. 2: run in the build container.
NORMALIZER_VERSION = "2"
NORMALIZE_FILE = "normalize.json"  # in OUT: each wheel's sha256, the container's Python and zlib
ERROR_FILE = "normalize-error.txt"  # in OUT: "<message>\n<hint>" of a wheel that cannot be normalised
FAILED_EXIT = 3  # the audit's refusal code too: the host reads whichever error file is there
CHUNK = 1 << 20  # 1 MiB: a torch wheel is GiBs, never read whole into memory

ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z: a zip timestamp cannot be older
COMPRESS_LEVEL = 6  # zlib's default; fixed so the bytes do not depend on a library default
FILE_MODE = 0o644
EXEC_MODE = 0o755
_S_IFREG = 0o100000
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


class NormalizeError(ValueError):
    def __init__(self, message: str, hint: str = "is this file a wheel?") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class NormalizedWheel:
    path: Path
    sha256: str
    entries: int
    changed: bool  # False when the input was already normalized


def zip_date_time(source_date_epoch: int) -> tuple[int, int, int, int, int, int]:
    """The zip ``date_time`` for an epoch, in UTC, never before 1980 (zip's own epoch), to
    the even second below: a zip entry stores seconds / 2, so an odd second is written as
    the one before and read back so (an sdist's newest member may have an odd mtime)."""
    moment = time.gmtime(max(int(source_date_epoch), ZIP_EPOCH))
    return (moment.tm_year, moment.tm_mon, moment.tm_mday, moment.tm_hour, moment.tm_min, moment.tm_sec & ~1)


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
    return _script_candidate(name) and (data[:4] == b"\x7fELF" or data[:2] == b"#!")


def _script_candidate(name: str) -> bool:
    """Under ``<name>.data/scripts/``: installed to bin/, executable when ELF or ``#!``."""
    parts = name.split("/")
    return len(parts) >= 3 and parts[0].endswith(".data") and parts[1] == "scripts"


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
        raise NormalizeError(f"{wheel.name}: expected one .dist-info/RECORD, found {len(candidates)}")
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
                raise NormalizeError(f"{wheel.name}: duplicate zip entries {', '.join(duplicated)}",
                                     "the build wrote a file twice into the wheel; fix its packaging")
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
        raise NormalizeError(f"{wheel.name}: not a readable zip ({exc})") from None
    return len(rows) + 1


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def normalize_wheel(wheel: Path | str, source_date_epoch: int) -> NormalizedWheel:
    """Rewrite ``wheel`` in place (temp file beside it + rename: no reader sees half a file)."""
    path = Path(wheel)
    fd, name = tempfile.mkstemp(prefix=f".tmp-{path.name}.", suffix=".part", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            entries = write_normalized(path, out, source_date_epoch)
            out.flush()
            os.fsync(out.fileno())
        digest, before = sha256_file(tmp), sha256_file(path)
        if digest != before:
            tmp.chmod(0o644)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return NormalizedWheel(path, digest, entries, digest != before)


def layout_problems(wheel: Path | str, source_date_epoch: int) -> list[str]:
    """What keeps ``wheel`` from being in normal form, read from its central directory
    (the host's check of the container's rewrite; the deflate bytes are the container's
    zlib's and are not re-made here): [] when sound."""
    path = Path(wheel)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            problems = [f"{n}: a directory entry" for n in names if n.endswith("/")]
            if names != sorted(names, key=sort_key):
                problems.append("entries are not in normal order")
            record = f"{_dist_info(names, path)}/RECORD"
            if names[-1:] != [record]:
                problems.append(f"{record} is not the last entry")
            date_time = zip_date_time(source_date_epoch)
            for info in infos:
                name = info.filename
                magic = zf.open(info).read(4) if _script_candidate(name) else b""
                must_run = is_executable(name, 0, magic) and name != record
                modes = [(_S_IFREG | m) << 16 for m in ((EXEC_MODE,) if must_run else (FILE_MODE, EXEC_MODE))]
                fields = {"date_time": (info.date_time, date_time),
                          "compression": (info.compress_type, zipfile.ZIP_DEFLATED),
                          "system": (info.create_system, 3), "extra": (info.extra, b""),
                          "comment": (info.comment, b"")}
                problems.extend(f"{name}: {field} {have!r}, normal form {want!r}"
                                for field, (have, want) in fields.items() if have != want)
                if info.external_attr not in modes:
                    problems.append(f"{name}: mode {oct(info.external_attr >> 16)}, normal form "
                                    + " or ".join(oct(m >> 16) for m in modes))
            problems.extend(f"{n}: a signature of the old RECORD" for n in names if n.endswith(_SIGNATURES))
            if zf.comment:
                problems.append("the archive has a comment")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        return [f"not a readable zip ({exc})"]
    except NormalizeError as exc:
        return [str(exc)]
    return problems


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


def runtime() -> dict[str, str]:
    """The Python and zlib the rewrite ran with (recorded in the wheel's manifest)."""
    return {"python": platform.python_version(), "zlib": zlib.ZLIB_RUNTIME_VERSION}


def main(argv: list[str]) -> int:
    """``python - DIST OUT SOURCE_DATE_EPOCH``: normalise every wheel in DIST in place and
    write OUT/normalize.json, or OUT/normalize-error.txt and exit 3."""
    dist, out, epoch = Path(argv[0]), Path(argv[1]), int(argv[2])
    record: dict[str, Any] = {"version": NORMALIZER_VERSION, **runtime(), "wheels": {}}
    try:
        for wheel in sorted(dist.glob("*.whl")):
            done = normalize_wheel(wheel, epoch)
            record["wheels"][wheel.name] = {"sha256": done.sha256, "entries": done.entries}
    except NormalizeError as exc:
        (out / ERROR_FILE).write_text(f"{exc}\n{exc.hint}\n")
        print(f"error: {exc}", file=sys.stderr)
        return FAILED_EXIT
    (out / NORMALIZE_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"normalised with Python {record['python']}, zlib {record['zlib']}: "
          + ", ".join(f"{n} {w['sha256'][:12]}" for n, w in record["wheels"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
