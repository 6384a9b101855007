"""Stage images through a real registry (Debian's docker-registry on 127.0.0.1): pushed
under content-key tags plus moving tags; a second runner with none of the images pulls
them by key instead of building, and gets the very same image IDs."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest
import requests

from tests.conftest import run_builder, write_config

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
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            if requests.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200:
                break
        except requests.ConnectionError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def tags(registry: str, repository: str) -> list[str]:
    return requests.get(f"http://{registry}/v2/{repository}/tags/list", timeout=10).json()["tags"]


def test_push_then_second_runner_pulls_instead_of_building(tmp_path, registry, base_image, engine):
    # A python stage of its own, so this test can remove it completely.
    cfg = write_config(tmp_path / "builder.toml", tmp_path,
                       '[python]\nrequirements = ["setuptools==80.9.0", "wheel==0.45.1", "packaging==24.1"]\n')
    first = json.loads(run_builder("images", "--json", "--push", registry, "--tag", "nightly",
                                   config=cfg, check=True).stdout)
    keys = {r["name"]: r["key"] for r in first}
    for name, key in keys.items():
        assert {key, "nightly"} <= set(tags(registry, f"builder/{name}"))
    assert "bookworm-minbase" in tags(registry, "builder/debian")

    # A runner with an empty disk: none of these tags exist locally any more.
    for result in reversed(first):
        engine.remove_image(result["tag"])
    engine.remove_image(base_image)
    assert all(engine.image_id(r["tag"]) is None for r in first)
    assert engine.image_id(base_image) is None

    second = run_builder("images", "--json", "--cache-from", registry, config=cfg, check=True)
    results = json.loads(second.stdout)
    assert [r["pulled"] for r in results] == [True, True, True], second.stderr
    assert [r["image_id"] for r in results] == [r["image_id"] for r in first]
    assert f"base image {base_image} pulled from {registry}" in second.stderr
    assert "building" not in second.stderr

    third = json.loads(run_builder("images", "--json", config=cfg, check=True).stdout)
    assert all(r["reused"] and not r["pulled"] for r in third)


def test_push_to_a_dead_registry_is_a_clear_error(tmp_path, base_image):
    cfg = write_config(tmp_path / "builder.toml", tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = run_builder("images", "--push", f"127.0.0.1:{port}", config=cfg)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: docker push 127.0.0.1:{port}/")
