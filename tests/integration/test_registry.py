"""Stage images through a real registry (Debian's docker-registry on 127.0.0.1): pushed
under content-key tags plus moving tags; a second runner with none of the images pulls
them by key instead of building, and gets the very same image IDs."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

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


@pytest.fixture()
def own_base(base_image, engine):
    """The shared base image under a tag of this run only: the stages built on it have keys
    of their own (the base stage's FROM names it), so the test may remove every image it
    made, down to that tag, while other tests keep the shared base and stages."""
    tag = f"builder/debian:registry-test-{uuid.uuid4().hex[:8]}"
    engine.client.images.get(base_image).tag(tag)
    yield tag
    engine.remove_image(tag)  # the tag only: the image stays under the shared one


def test_push_then_second_runner_pulls_instead_of_building(tmp_path, registry, own_base, base_image, engine):
    # The run's own base tag: its three stages are this test's, so it can remove them completely.
    cfg = write_config(tmp_path / "builder.toml", tmp_path)
    cfg.write_text(cfg.read_text().replace(f'image = "{base_image}"', f'image = "{own_base}"'))
    first = json.loads(run_builder("images", "--json", "--push", registry, "--tag", "nightly",
                                   config=cfg, check=True).stdout)
    keys = {r["name"]: r["key"] for r in first}
    for name, key in keys.items():
        assert {key, "nightly"} <= set(tags(registry, f"builder/{name}"))
    assert own_base.split(":")[1] in tags(registry, "builder/debian")
    shared_id = engine.image_id(base_image)

    # A runner with an empty disk: none of these tags exist locally any more.
    for result in reversed(first):
        engine.remove_image(result["tag"])
    engine.remove_image(own_base)
    assert all(engine.image_id(r["tag"]) is None for r in first)
    assert engine.image_id(own_base) is None
    assert shared_id is not None and engine.image_id(base_image) == shared_id  # the shared base is untouched

    second = run_builder("images", "--json", "--cache-from", registry, config=cfg, check=True)
    results = json.loads(second.stdout)
    assert [r["pulled"] for r in results] == [True, True, True], second.stderr
    assert [r["image_id"] for r in results] == [r["image_id"] for r in first]
    assert f"base image {own_base} pulled from {registry}" in second.stderr
    assert "building" not in second.stderr

    third = json.loads(run_builder("images", "--json", config=cfg, check=True).stdout)
    assert all(r["reused"] and not r["pulled"] for r in third)
    for result in reversed(third):  # what this test made, and nothing else
        engine.remove_image(result["tag"])
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
