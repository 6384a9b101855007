"""Files hashed in one pass, and files written whole or not at all.

Why one place: a reader may open any file builder writes at any moment (pip reading a
file:// index, a second builder sharing the data dir, `builder cache stats`), and a
crash or Ctrl-C may come at any moment too. Every record, page and wheel is therefore
written to a temporary file beside its final name (a unique name from mkstemp: two
writers never share one), flushed, fsync'ed and renamed over the final name, and the
directory is fsync'ed so the rename itself survives a power cut. A reader sees the old
file or the new one, never half of one; a failed write leaves the old file alone.

Temporary files are named ``.tmp-<name>.<random>.part``: the leading dot keeps them out
of pypiserver's listings and ``*.whl`` globs, the suffix makes a leftover easy to spot.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

CHUNK = 1 << 20  # 1 MiB: a torch wheel is GiBs, never read whole into memory
TEMP_PREFIX = ".tmp-"
TEMP_SUFFIX = ".part"


# ------------------------------------------------------------------------- hashing
def file_digests(path: Path | str, algorithms: tuple[str, ...] = ("sha256",), chunk: int = CHUNK) -> dict[str, str]:
    """Hex digests of a whole file in one read (e.g. sha256 and md5 for an upload)."""
    hashers = {a: hashlib.new(a) for a in algorithms}
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            for h in hashers.values():
                h.update(block)
    return {a: h.hexdigest() for a, h in hashers.items()}


def sha256_file(path: Path | str, chunk: int = CHUNK) -> str:
    """The hex sha256 of a whole file, read in ``chunk``-byte pieces."""
    return file_digests(path, ("sha256",), chunk)["sha256"]


# ------------------------------------------------------------------ atomic writing
def temp_beside(path: Path | str) -> tuple[int, Path]:
    """A new, uniquely named temporary file in ``path``'s directory (made if missing: a
    first write into a fresh data dir): (open fd, its path)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    return fd, Path(name)


def fsync_dir(directory: Path | str) -> None:
    """Make a rename durable: without it a crash can forget the new directory entry.
    Some filesystems refuse fsync on a directory; the rename is then as durable as it gets."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_durably(tmp: Path | str, path: Path | str) -> None:
    """Rename a complete, fsync'ed ``tmp`` over ``path`` and fsync the directory."""
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def _default_mode(path: Path) -> int:
    """What a plain ``open(path, "w")`` would leave: the existing file's bits, or 0666 minus the umask."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(path.stat().st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    # Read, not set-and-restore: os.umask() would change it for every thread for a moment.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def atomic_write(path: Path | str, data: bytes | str, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) in one step.

    ``mode``: the new file's permission bits (default: those of the file it replaces, or
    what the umask gives a new file). On any error the temporary file is removed and the
    old ``path``, if any, is left as it was."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _default_mode(path) if mode is None else mode)
        replace_durably(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def copy_to_temp(src: Path | str, dst: Path | str, mode: int | None = None) -> tuple[Path, str]:
    """Copy ``src`` into a new temporary file beside ``dst``, fsync'ed, hashing it on the
    way: (temporary path, hex sha256). The caller renames it (:func:`replace_durably`)
    once it has decided to, and removes it otherwise; on error nothing is left behind."""
    dst = Path(dst)
    fd, tmp = temp_beside(dst)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            while block := inp.read(CHUNK):
                digest.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _default_mode(dst) if mode is None else mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, digest.hexdigest()


def atomic_copy(src: Path | str, dst: Path | str, mode: int | None = None) -> str:
    """Replace ``dst`` with a copy of ``src`` in one step; the hex sha256 of the bytes copied."""
    tmp, digest = copy_to_temp(src, dst, mode)
    try:
        replace_durably(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest


__all__ = ["CHUNK", "atomic_copy", "atomic_write", "copy_to_temp", "file_digests", "fsync_dir", "replace_durably",
           "sha256_file", "temp_beside"]


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts): how a temp dir or
    work dir named after its writer's pid is known to be left behind."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_gone(pid: str) -> bool:
    """Whether a pid recorded as text (a label, an owner file) names a process that no
    longer exists; text that is not a pid is not known to be gone."""
    return pid.isdigit() and not pid_alive(int(pid))
