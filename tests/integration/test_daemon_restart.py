"""The Docker daemon stops in the middle of a compile: the run fails with one clear
error; after the daemon is back, a rerun reuses every stage image and finishes.

The daemon stopped here is a private one this test starts (own socket, data root, exec
root and pid file, through .ci/dockerd-up with DOCKER_HOST) and stops by its pid: no
other Docker engine on the machine is touched. The stage images are copied into it from
the shared engine (docker save | docker load keeps their IDs, so builder's keys match)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from builder.examples import write_example_repo
from tests.conftest import REPO, run_builder, write_config

pytestmark = pytest.mark.docker


def start_private(root: Path) -> dict[str, str]:
    env = {**os.environ, "DOCKER_HOST": f"unix://{root}/docker.sock"}
    subprocess.run(["bash", str(REPO / ".ci" / "dockerd-up")], env=env, check=True, capture_output=True, timeout=120)
    return env


def stop_private(root: Path) -> None:
    """SIGTERM to the pid in the private daemon's own pid file, then wait for it to go."""
    pidfile = root / "dockerd.pid"
    if not pidfile.is_file():
        return
    pid = int(pidfile.read_text().strip())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def private(tmp_path, base_image, engine):
    root = Path(tempfile.mkdtemp(prefix="bdr-", dir="/tmp"))  # short: unix socket paths are limited
    repo = write_example_repo("faketorch", tmp_path / "faketorch")
    volume = f"builder-test-restart-{uuid.uuid4().hex[:8]}"
    extra = f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "volume:{volume}"\n'
    shared_cfg = write_config(tmp_path / "shared.toml", tmp_path / "shared-data", extra)
    # the stage images this build uses, made (or found) on the shared engine
    planned = json.loads(run_builder("wheels", "--torch", "main", "--no-smoke", "--json", config=shared_cfg,
                                     check=True).stdout)
    tags = [s["tag"] for s in planned["stages"]]
    env = start_private(root)
    try:
        save = subprocess.Popen(["docker", "save", base_image, *tags], stdout=subprocess.PIPE)
        subprocess.run(["docker", "load", "-q"], stdin=save.stdout, env=env, check=True, capture_output=True,
                       timeout=600)
        save.wait(timeout=60)
        cfg = write_config(tmp_path / "builder.toml", tmp_path / "data", extra)
        loaded = [subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip() for tag in tags]
        yield {"root": root, "env": env, "cfg": cfg, "loaded": loaded, "tmp": tmp_path}
    finally:
        subprocess.run(["docker", "volume", "rm", "-f", volume], env=env, capture_output=True)
        stop_private(root)
        engine.remove_volume(volume)
        shutil.rmtree(root, ignore_errors=True)


def test_daemon_restart_mid_build_then_rerun_resumes(private, engine):
    env, cfg = private["env"], private["cfg"]
    from builder.engine import Engine

    os.environ["DOCKER_HOST"], saved = env["DOCKER_HOST"], os.environ.get("DOCKER_HOST")
    try:
        mine = Engine()  # a client of the private daemon
    finally:
        os.environ.pop("DOCKER_HOST") if saved is None else os.environ.__setitem__("DOCKER_HOST", saved)
    proc = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--torch", "main",
                             "--no-smoke"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while not mine.client.containers.list(filters={"label": [f"builder.pid={proc.pid}", "builder.step=torch"]}):
            assert time.monotonic() < deadline, "the build container never started"
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.2)
        time.sleep(2)
        stop_private(private["root"])  # the daemon this test started, by its pid file
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    start_private(private["root"])
    assert proc.returncode == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert "Docker daemon" in errors[0] or "building torch from" in errors[0], errors[0]
    files = private["tmp"] / "data" / "index" / "files"
    assert not files.is_dir() or not list(files.glob("*.whl"))

    rerun = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", config=cfg, env=env)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert all(s["reused"] for s in report["stages"])  # the deps layer too: loaded before the daemon died
    assert [s["image_id"] for s in report["stages"]] == private["loaded"], report["stages"]  # none rebuilt
    assert report["wheels"][0]["status"] == "built"
    # Whatever the dying daemon could not remove is gone after the rerun.
    assert mine.client.containers.list(all=True, filters={"label": f"builder.pid={proc.pid}"}) == []
    assert engine.client.ping()  # the shared engine was never touched
