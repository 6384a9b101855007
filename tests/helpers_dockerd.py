"""A Docker engine of the test's own: its own data root, exec root, pid file and socket
under a temp dir, started and stopped by its pid, so no other engine on the machine is
touched. It starts empty (no base image, no stage): a machine that never ran builder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import pytest


class PrivateDockerd:
    """One dockerd under `root`, started and stopped by pid; restartable on the same data."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.root / "dockerd.log", "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "dockerd.pid"), "-H", self.host,
             "--bridge=none", "--iptables=false", "--ip6tables=false"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"private dockerd exited: {self.log_tail()}")
            try:
                docker.DockerClient(base_url=self.host, timeout=5).ping()
                return
            except Exception:
                if time.monotonic() > deadline:
                    pytest.fail(f"private dockerd did not answer within 60 s: {self.log_tail()}")
                time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM to our own dockerd's pid (checked against its pid file), then wait."""
        if self.proc is None or self.proc.poll() is not None:
            return
        pidfile = self.root / "dockerd.pid"
        if pidfile.is_file():
            assert int(pidfile.read_text().strip()) == self.proc.pid
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def log_tail(self) -> str:
        return (self.root / "dockerd.log").read_text(errors="replace")[-2000:]


@contextmanager
def private_engine() -> Iterator[PrivateDockerd]:
    # A short path: unix socket paths (ours and containerd's under the exec root) are limited to 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="bd-", dir="/tmp"))
    daemon = PrivateDockerd(root)
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
        unmount_under(root)
        shutil.rmtree(root)


def unmount_under(root: Path) -> None:
    """Unmount what our dockerd left mounted under its root (e.g. exec/netns/default), deepest first."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(f"{root}/")), key=len, reverse=True):
        subprocess.run(["umount", point], check=True)


def copy_images(tags: list[str], host: str) -> None:
    """``docker save | docker load`` from the shared engine into ``host`` (image IDs survive)."""
    save = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "-H", host, "load", "-q"], stdin=save.stdout, capture_output=True)
    save.stdout.close()
    assert save.wait() == 0 and load.returncode == 0, load.stderr
