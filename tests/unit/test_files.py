"""builder.files: the one sha256-of-a-file helper and the one atomic write."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

import pytest

from builder import files
from builder.files import atomic_copy, atomic_write, copy_to_temp, file_digests, sha256_file


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(files.TEMP_PREFIX))


# --------------------------------------------------------------------------- hashing
@pytest.mark.parametrize("size", [0, 1, files.CHUNK - 1, files.CHUNK, 3 * files.CHUNK + 7])
def test_sha256_file_equals_hashlib_over_the_bytes(tmp_path, size):
    data = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert sha256_file(str(path), chunk=7) == hashlib.sha256(data).hexdigest()  # any chunk size, str path


def test_file_digests_reads_once_for_several_algorithms(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(b"wheel bytes")
    assert file_digests(path, ("sha256", "md5")) == {"sha256": hashlib.sha256(b"wheel bytes").hexdigest(),
                                                     "md5": hashlib.md5(b"wheel bytes").hexdigest()}


def test_sha256_of_a_missing_file_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        sha256_file(tmp_path / "absent")


# ------------------------------------------------------------------ atomic writing
def test_atomic_write_writes_text_and_bytes(tmp_path):
    path = tmp_path / "record.json"
    atomic_write(path, "{\"ü\": 1}\n")
    assert path.read_text(encoding="utf-8") == "{\"ü\": 1}\n"
    atomic_write(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert leftovers(tmp_path) == []


def test_a_failed_rename_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    atomic_write(path, "old")

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, "new " * 1000)
    assert path.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    atomic_write(path, "old")

    def crash(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="Input/output"):
        atomic_write(path, "new")
    assert path.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_interrupted_write_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, "new")
    assert not path.exists() and leftovers(tmp_path) == []


def test_the_file_and_its_directory_are_fsynced(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def counting(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting)
    atomic_write(tmp_path / "a", "data")
    assert synced == ["file", "dir"]
    synced.clear()
    src = tmp_path / "src"
    src.write_bytes(b"x" * 10)
    atomic_copy(src, tmp_path / "copy")
    assert synced == ["file", "dir"]


def test_concurrent_writers_use_unique_temp_names_and_one_wins_whole(tmp_path, monkeypatch):
    path = tmp_path / "shared.json"
    names: list[str] = []
    real_mkstemp = files.tempfile.mkstemp

    def recording(*args, **kwargs):
        fd, name = real_mkstemp(*args, **kwargs)
        names.append(name)
        return fd, name

    monkeypatch.setattr(files.tempfile, "mkstemp", recording)
    writers = 16
    payloads = [(f"writer {i} " * 20_000).encode() for i in range(writers)]
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        start.wait()
        try:
            for _ in range(5):
                atomic_write(path, payloads[i])
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(names) == writers * 5 and len(set(names)) == len(names)  # never a shared fixed .tmp name
    assert all(Path(n).parent == tmp_path and Path(n).name.startswith(".tmp-shared.json.") for n in names)
    assert path.read_bytes() in payloads  # one writer's bytes, whole
    assert leftovers(tmp_path) == []


def test_mode_is_applied_else_kept_from_the_file_replaced(tmp_path):
    path = tmp_path / "secret.conf"
    atomic_write(path, "token", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    atomic_write(path, "token 2")  # keeps 0600 (mkstemp's 0600 would otherwise be a surprise elsewhere)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    os.chmod(path, 0o640)
    atomic_write(path, "token 3")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "page.html", "<html>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "page.html").stat().st_mode) == 0o644


def test_atomic_copy_returns_the_digest_and_replaces(tmp_path):
    src, dst = tmp_path / "src.whl", tmp_path / "out" / "dst.whl"
    dst.parent.mkdir()
    dst.write_bytes(b"old")
    src.write_bytes(b"new bytes" * 1000)
    assert atomic_copy(src, dst, mode=0o644) == hashlib.sha256(b"new bytes" * 1000).hexdigest()
    assert dst.read_bytes() == b"new bytes" * 1000 and leftovers(dst.parent) == []


def test_copy_to_temp_of_a_missing_source_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        copy_to_temp(tmp_path / "absent", tmp_path / "dst")
    assert leftovers(tmp_path) == []
