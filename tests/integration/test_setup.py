"""The set-up `make test` runs (.ci/setup) against a Docker engine that is not there.

DOCKER_HOST names a private socket nothing answers on. As root with dockerd installed
the script starts a private daemon beside that socket (its own data and exec roots, pid
file), which this test then stops by that pid (never another daemon); otherwise the
script fails with one line naming what is missing. Either way the shared daemon is
untouched, which the test checks."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def test_setup_starts_a_private_daemon_or_names_what_is_missing():
    shared_was_up = docker_answers(None) if "DOCKER_HOST" not in os.environ else None
    root = Path(tempfile.mkdtemp(prefix="bsetup-", dir="/tmp"))  # short: unix socket paths are limited
    host = f"unix://{root}/docker.sock"
    assert not docker_answers(host)
    # VENV: the interpreter running the tests (already set up), so only the daemon step acts.
    env = {**os.environ, "DOCKER_HOST": host, "VENV": sys.prefix, "PYTHON": sys.executable}
    try:
        done = subprocess.run([str(REPO / ".ci" / "setup")], env=env, capture_output=True, text=True,
                              timeout=300, cwd=REPO)
        if os.geteuid() == 0 and shutil.which("dockerd"):
            assert done.returncode == 0, done.stdout + done.stderr
            assert f"dockerd is up on {host}" in done.stdout
            assert docker_answers(host)
            assert (root / "dockerd.pid").is_file() and (root / "data").is_dir()
            again = subprocess.run([str(REPO / ".ci" / "dockerd-up")], env=env, capture_output=True, text=True,
                                   timeout=60)
            assert again.returncode == 0 and "started" not in again.stdout  # an answering daemon is left alone
        else:
            assert done.returncode == 1
            [line] = done.stderr.strip().splitlines()
            assert line.startswith("error: ") and ("dockerd" in line or "Docker engine" in line
                                                   or "missing Debian packages" in line), line
    finally:
        stop_private_daemon(root / "dockerd.pid")
        shutil.rmtree(root, ignore_errors=True)
    assert not docker_answers(host)
    if shared_was_up:
        assert docker_answers(None)  # the shared daemon was never touched


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
