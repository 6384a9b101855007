"""Stage images through a real registry (Debian's docker-registry on 127.0.0.1): pushed
under content-key tags plus moving tags; a second runner with none of the images pulls
them by key instead of building, and gets the very same image IDs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import docker
import pytest
import requests

from tests.conftest import run_builder, write_config
from tests.helpers_dockerd import private_engine

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    if shutil.which("docker-registry") is None:
        pytest.fail("docker-registry is not installed "
                    "(apt-get install docker-registry; make test installs it when run as root)")
    root = tmp_path_factory.mktemp("registry")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
                      f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    log = root / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/v2/", proc, log)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def wait_until_answers(url: str, proc: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    """Until ``url`` answers 200; a server that exits or never answers fails the test with its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"docker-registry exited ({proc.returncode}): {log.read_text(errors='replace')[-2000:]}")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    pytest.fail(f"docker-registry did not answer {url} within {timeout:.0f} s: "
                f"{log.read_text(errors='replace')[-2000:]}")


def tags(registry: str, repository: str) -> list[str]:
    return requests.get(f"http://{registry}/v2/{repository}/tags/list", timeout=10).json()["tags"]


def test_push_then_second_runner_pulls_instead_of_building(tmp_path, registry, base_image, engine):
    """The shared base and stages are pushed (content-key tags plus ``nightly``); the second
    runner is an engine of this test's own that starts empty, as a new CI machine would, and
    pulls every image by key instead of building it. Nothing on the shared engine is removed
    but the registry tags the push made."""
    cfg = write_config(tmp_path / "builder.toml", tmp_path)
    first = json.loads(run_builder("images", "--json", "--push", registry, "--tag", "nightly",
                                   config=cfg, check=True).stdout)
    keys = {r["name"]: r["key"] for r in first}
    assert list(keys) == ["base", "toolchain", "python"], keys
    for name, key in keys.items():
        assert {key, "nightly"} <= set(tags(registry, f"builder/{name}"))
    assert base_image.split(":")[1] in tags(registry, "builder/debian")
    shared_id = engine.image_id(base_image)

    with private_engine() as runner:
        on_runner = {**os.environ, "DOCKER_HOST": runner.host}
        empty = docker.DockerClient(base_url=runner.host, timeout=600)
        assert empty.images.list() == []  # none of the images exist there
        second = run_builder("images", "--json", "--cache-from", registry, config=cfg, env=on_runner, check=True)
        results = json.loads(second.stdout)
        assert [r["pulled"] for r in results] == [True, True, True], second.stderr
        assert [r["image_id"] for r in results] == [r["image_id"] for r in first]
        assert f"base image {base_image} pulled from {registry}" in second.stderr
        assert "building" not in second.stderr
        assert empty.images.get(base_image).id == shared_id

        third = json.loads(run_builder("images", "--json", config=cfg, env=on_runner, check=True).stdout)
        assert all(r["reused"] and not r["pulled"] for r in third)
        assert [r["image_id"] for r in third] == [r["image_id"] for r in first]
        empty.close()
    assert engine.image_id(base_image) == shared_id and all(engine.image_id(r["tag"]) for r in first)
    pushed_tags(engine, registry, remove=True)
    assert pushed_tags(engine, registry) == []


def pushed_tags(engine, registry: str, remove: bool = False) -> list[str]:
    """The local tags `docker push` left (REGISTRY/builder/...): this test's registry, a free port of its own."""
    found = [tag for image in engine.client.images.list() for tag in image.tags if tag.startswith(f"{registry}/")]
    for tag in found if remove else []:
        engine.remove_image(tag)
    return found


def test_push_to_a_dead_registry_is_a_clear_error(tmp_path, base_image):
    cfg = write_config(tmp_path / "builder.toml", tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = run_builder("images", "--push", f"127.0.0.1:{port}", config=cfg)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: docker push 127.0.0.1:{port}/")
