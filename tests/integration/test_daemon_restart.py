"""The Docker daemon stops in the middle of a compile: the run fails with one clear
error; after the daemon is back, a rerun reuses every stage image and finishes.

The daemon stopped here is a private one this test starts (own data root, exec root,
pid file and socket under a temp dir) and stops by its pid: no other engine on the
machine is touched. A private engine starts empty, so the stage images the build needs
are made on the shared engine and copied over with `docker save | docker load` (image
IDs survive, so stage keys match)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker
import pytest

from builder.engine import Engine
from builder.examples import write_example_repo
from tests.conftest import run_builder, write_config
from tests.helpers_dockerd import copy_images, private_engine

pytestmark = pytest.mark.docker


@pytest.fixture()
def private_dockerd():
    with private_engine() as daemon:
        yield daemon


def test_daemon_restart_mid_build_then_rerun_resumes(tmp_path: Path, base_image, engine, private_dockerd):
    # a build to restart under: every 4th kernel heavy (1.4 s), so the rerun's cold build is 10 s, not 40
    repo = write_example_repo("faketorch", tmp_path / "faketorch", heavy=True, heavy_every=4)
    volume = f"builder-test-restart-{uuid.uuid4().hex[:8]}"
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data",
                       f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "volume:{volume}"\n')
    # Stage images come from the shared engine (built once per machine), copied into the private one.
    stages = json.loads(run_builder("images", "--json", config=cfg, check=True).stdout)
    copy_images([base_image, *[s["tag"] for s in stages]], private_dockerd.host)
    private_env = {**os.environ, "DOCKER_HOST": private_dockerd.host}
    private = Engine(docker.DockerClient(base_url=private_dockerd.host, timeout=600))

    proc = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--torch", "main",
                             "--no-smoke"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=private_env)
    try:
        deadline = time.monotonic() + 300
        while not private.client.containers.list(filters={"label": [f"builder.pid={proc.pid}",
                                                                    "builder.step=torch"]}):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the build container never started"
            time.sleep(0.2)
        time.sleep(2)
        private_dockerd.stop()
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    # The daemon's failure, not the compile's, whether the connection broke first or dockerd
    # stopped the container first (exit 143) and then no longer answered.
    assert re.fullmatch(r"error: lost the Docker daemon while running a container from builder/deps:[0-9a-f]+ "
                        r"\(.+\); check that dockerd is running, then rerun: stages already built are reused",
                        errors[0]), errors[0]
    assert "building torch from" not in err
    files = tmp_path / "data" / "index" / "files"
    assert not files.is_dir() or not list(files.glob("*.whl"))

    private_dockerd.start()
    private = Engine(docker.DockerClient(base_url=private_dockerd.host, timeout=600))
    rerun = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", config=cfg, env=private_env)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert all(s["reused"] for s in report["stages"])  # the deps layer too: built before the daemon died
    image_stages = [s for s in report["stages"] if s["name"] != "deps"]
    assert [s["image_id"] for s in image_stages] == [s["image_id"] for s in stages]
    assert report["wheels"][0]["status"] == "built"
    # Whatever the dying daemon could not remove is gone after the rerun.
    assert private.client.containers.list(all=True, filters={"label": f"builder.pid={proc.pid}"}) == []
    private.remove_volume(volume)
