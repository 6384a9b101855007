"""The Docker daemon stops in the middle of a compile: the run fails with one clear
error; after the daemon is back, a rerun reuses every stage image and finishes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from builder.examples import write_example_repo
from tests.conftest import REPO, run_builder, write_config

pytestmark = pytest.mark.docker


def dockerd_pids() -> list[int]:
    done = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def test_daemon_restart_mid_build_then_rerun_resumes(tmp_path: Path, base_image, engine):
    if not dockerd_pids():
        pytest.fail("this test restarts a local dockerd, and none runs here")
    repo = write_example_repo("faketorch", tmp_path / "faketorch")
    volume = f"builder-test-restart-{uuid.uuid4().hex[:8]}"
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data",
                       f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "volume:{volume}"\n')
    stages = json.loads(run_builder("images", "--json", config=cfg, check=True).stdout)
    proc = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--torch", "main",
                             "--no-smoke"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not engine.client.containers.list(filters={"label": [f"builder.pid={proc.pid}",
                                                                   "builder.step=torch"]}):
            assert time.monotonic() < deadline, "the build container never started"
            time.sleep(0.2)
        time.sleep(2)
        subprocess.run(["pkill", "-TERM", "-x", "dockerd"], check=True)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        for _ in range(60):
            if not dockerd_pids():
                break
            time.sleep(1)
        subprocess.run(["bash", str(REPO / ".ci" / "dockerd-up")], check=True)
    assert proc.returncode == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert "Docker daemon" in errors[0] or "building torch from" in errors[0], errors[0]
    assert not (tmp_path / "data" / "index" / "files").is_dir() or \
        not list((tmp_path / "data" / "index" / "files").glob("*.whl"))

    rerun = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", config=cfg)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert all(s["reused"] for s in report["stages"])  # the deps layer too: built before the daemon died
    image_stages = [s for s in report["stages"] if s["name"] != "deps"]
    assert [s["image_id"] for s in image_stages] == [s["image_id"] for s in stages]
    assert report["wheels"][0]["status"] == "built"
    # Whatever the dying daemon could not remove is gone after the rerun.
    assert engine.client.containers.list(all=True, filters={"label": f"builder.pid={proc.pid}"}) == []
    engine.remove_volume(volume)
