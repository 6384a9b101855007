"""The set-up `make test` runs (.ci/setup) against a Docker engine that is not there.

DOCKER_HOST names a private socket nothing answers on. As root with dockerd installed
the script starts a private daemon beside that socket (its own data and exec roots, pid
file), which this test then stops by that pid (never another daemon), and the shared
daemon is untouched; as another user, or without dockerd, it fails with one line naming
what is missing (each case its own test, each assertion run every time)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO


def docker_answers(host: str | None) -> bool:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    return subprocess.run(["docker", "version"], env=env, capture_output=True, timeout=60).returncode == 0


def stop_private_daemon(pidfile: Path) -> None:
    if not pidfile.is_file():
        return
    pid = int(pidfile.read_text().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)


def test_setup_starts_a_private_daemon_beside_an_unanswered_socket(engine):
    """As root with dockerd installed (what `make test` on CI is): .ci/setup starts a
    private daemon; without either, the test fails naming the fix (the non-root and
    no-dockerd answers are the two tests below)."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.fail("this test starts a private dockerd: run the suite as root with dockerd installed "
                    "(sudo make test; apt-get install docker.io)")
    assert docker_answers(None)  # the shared daemon the suite uses, checked again at the end
    root = Path(tempfile.mkdtemp(prefix="bsetup-", dir="/tmp"))  # short: unix socket paths are limited
    host = f"unix://{root}/docker.sock"
    assert not docker_answers(host)
    # VENV: the interpreter running the tests (already set up), so only the daemon step acts.
    env = {**os.environ, "DOCKER_HOST": host, "VENV": sys.prefix, "PYTHON": sys.executable}
    try:
        done = subprocess.run([str(REPO / ".ci" / "setup")], env=env, capture_output=True, text=True,
                              timeout=300, cwd=REPO)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"dockerd is up on {host}" in done.stdout
        assert docker_answers(host)
        assert (root / "dockerd.pid").is_file() and (root / "data").is_dir()
        again = subprocess.run([str(REPO / ".ci" / "dockerd-up")], env=env, capture_output=True, text=True,
                               timeout=60)
        assert (again.returncode, again.stdout) == (0, "")  # an answering daemon is left alone
    finally:
        stop_private_daemon(root / "dockerd.pid")
        shutil.rmtree(root, ignore_errors=True)
    assert not docker_answers(host)
    assert docker_answers(None)  # the shared daemon was never touched


def test_setup_as_a_user_without_root_names_the_command(tmp_path):
    """Not root, dockerd installed, nothing answering: one line naming the command that
    starts an engine, exit 1, nothing started (run as nobody, whatever user runs the suite)."""
    if not shutil.which("dockerd") or not shutil.which("setpriv") or os.geteuid() != 0:
        pytest.fail("this test runs .ci/dockerd-up as the user nobody: run the suite as root with dockerd "
                    "installed (sudo make test; apt-get install docker.io)")
    sock = Path(tempfile.mkdtemp(prefix="bnoroot-", dir="/tmp")) / "docker.sock"
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}", "HOME": str(tmp_path)}
    try:
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/bash",
                               str(REPO / ".ci" / "dockerd-up")], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.strip() == (f"error: no Docker engine answers on unix://{sock}; start one as root: "
                                       "sudo .ci/dockerd-up (or sudo systemctl start docker)")
        assert done.stdout == "" and list(sock.parent.iterdir()) == []  # nothing started, nothing written
    finally:
        shutil.rmtree(sock.parent, ignore_errors=True)


def test_setup_without_root_or_dockerd_fails_with_one_line(tmp_path):
    """No dockerd on PATH and nothing answering: one clear line, exit 1, nothing started."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "dirname", "seq", "sleep", "id", "mkdir", "tail"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bin_dir), "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    done = subprocess.run(["/bin/bash", str(REPO / ".ci" / "dockerd-up")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: no Docker engine answers and dockerd is not installed")
    assert "apt-get install docker.io" in line
