"""Which scratch dirs a later run takes for left behind (builder.run.reaper)."""

from __future__ import annotations

import os
import socket
import subprocess

from builder.run.reaper import OWNER_FILE, left_behind, make_scratch_dir, reap_scratch, verify_root
from tests.conftest import dead_pid


def owned(path, host: str, pid: int | str):
    path.mkdir(parents=True)
    (path / OWNER_FILE).write_text(f"{host} {pid}\n")
    return path


def test_a_scratch_dir_names_this_host_and_process(tmp_path):
    path = make_scratch_dir(tmp_path / "data" / "verify")  # neither exists yet
    assert path.parent == tmp_path / "data" / "verify" and path.name.startswith("rebuild-")
    assert (path / OWNER_FILE).read_text() == f"{socket.gethostname()} {os.getpid()}\n"
    assert not left_behind(path)  # we are alive


def test_only_a_dead_process_of_this_host_left_its_dir_behind(tmp_path):
    gone = dead_pid()
    assert left_behind(owned(tmp_path / "a", "here", gone), host="here")
    assert not left_behind(owned(tmp_path / "b", "elsewhere", gone), host="here")  # cannot tell: kept
    assert not left_behind(owned(tmp_path / "c", "here", os.getpid()), host="here")
    assert not left_behind(owned(tmp_path / "d", "here", "12x"), host="here")
    assert not left_behind(owned(tmp_path / "e", "here", f"{gone} extra"), host="here")
    (tmp_path / "f").mkdir()
    assert not left_behind(tmp_path / "f", host="here")  # no owner file
    assert left_behind(owned(tmp_path / "g", socket.gethostname(), gone))  # the default host: this one


def test_reap_scratch_removes_the_dead_runs_dirs_only(tmp_path):
    root = verify_root(tmp_path)
    assert root == tmp_path / "verify"
    assert reap_scratch(root) == []  # no verify dir yet
    gone = dead_pid()
    dead = owned(root / "rebuild-1", socket.gethostname(), gone)
    (dead / "src").mkdir()
    live = make_scratch_dir(root)
    foreign = owned(root / "rebuild-2", "elsewhere", gone)
    kept = owned(root / "rebuilt", socket.gethostname(), gone)  # not a scratch dir's name
    assert reap_scratch(root) == [dead]
    assert not dead.exists() and live.is_dir() and foreign.is_dir() and kept.is_dir()


def test_a_dir_that_cannot_be_removed_is_left_and_not_an_error(tmp_path):
    root = verify_root(tmp_path)
    stuck = owned(root / "rebuild-stuck", socket.gethostname(), dead_pid())
    pinned = stuck / "pinned"
    pinned.write_text("x")
    # root may remove anything but an immutable file; another user, nothing in a read-only dir
    lock, unlock = ((["chattr", "+i", str(pinned)], ["chattr", "-i", str(pinned)]) if os.geteuid() == 0
                    else (["chmod", "0500", str(stuck)], ["chmod", "0700", str(stuck)]))
    subprocess.run(lock, check=True)
    try:
        assert reap_scratch(root) == []
        assert pinned.is_file()
    finally:
        subprocess.run(unlock, check=True)
