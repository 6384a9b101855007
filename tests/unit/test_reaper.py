"""Which scratch dirs a later run takes for left behind (builder.run.reaper)."""

from __future__ import annotations

import os
import socket
import subprocess

from builder.run.reaper import OWNER_FILE, left_behind, make_scratch_dir, reap_scratch, verify_root


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def owned(path, host: str, pid: int | str):
    path.mkdir(parents=True)
    (path / OWNER_FILE).write_text(f"{host} {pid}\n")
    return path


def test_a_scratch_dir_names_this_host_and_process(tmp_path):
    path = make_scratch_dir(tmp_path / "verify")
    assert path.parent == tmp_path / "verify" and path.name.startswith("rebuild-")
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
