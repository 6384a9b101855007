"""A team sharing one compiler cache: other checkout paths and uids, a Redis remote
for other machines, and a cache dir the build user cannot write."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid

import pytest

from builder.examples import write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url():
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(50):
        pong = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout
        if pong.strip() == "PONG":
            break
        time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def team(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("team")
    repo = write_example_repo("faketorch", root / "faketorch")
    volumes = {name: f"builder-test-{name}-{uuid.uuid4().hex[:8]}" for name in ("shared", "fresh")}
    yield {"root": root, "repo": repo, "volumes": volumes}
    for volume in volumes.values():
        engine.remove_volume(volume)


def build(team, member: str, *args: str, extra: str = "", env: dict[str, str] | None = None):
    data = team["root"] / member
    data.mkdir(exist_ok=True)
    cfg = write_config(data / "builder.toml", data, f'[repos]\ntorch = "file://{team["repo"]}"\n' + extra)
    return run_builder("wheels", "--torch", "main", "--no-smoke", "--json", *args, config=cfg, env=env)


def torch_stats(done) -> dict:
    assert done.returncode == 0, done.stderr
    wheel = json.loads(done.stdout)["wheels"][0]
    assert wheel["status"] == "built"
    return wheel["ccache"]


@pytest.fixture(scope="module")
def first(team, redis_url):
    """Teammate one: uid 1000, the shared volume, the Redis remote (a cold build)."""
    done = build(team, "alice", "--user", "1000:1000", "--ccache", f"volume:{team['volumes']['shared']}",
                 "--ccache-remote", redis_url)
    return torch_stats(done)


def test_second_teammate_other_path_and_uid_hits_the_shared_cache(team, first):
    assert first["misses"] > 50  # cold: the fixture has ~60 translation units
    done = build(team, "bob-in-another-dir", "--user", "1001:1000",
                 "--ccache", f"volume:{team['volumes']['shared']}")
    stats = torch_stats(done)
    calls = stats["direct_hits"] + stats["preprocessed_hits"] + stats["misses"]
    assert calls == first["misses"] + first["direct_hits"] + first["preprocessed_hits"]
    assert stats["direct_hits"] / calls >= 0.95, stats


def test_second_machine_with_empty_cache_gets_remote_hits(team, first, redis_url):
    done = build(team, "carol-on-another-machine", "--ccache", f"volume:{team['volumes']['fresh']}",
                 "--ccache-remote", redis_url)
    stats = torch_stats(done)
    calls = stats["direct_hits"] + stats["preprocessed_hits"] + stats["misses"]
    assert stats["remote_errors"] == 0
    assert stats["remote_hits"] / calls >= 0.90, stats


def test_cache_dir_not_writable_is_a_clear_error_and_read_only_mode_works(team, first, engine):
    cache_dir = team["root"] / "foreign-cache"
    source = engine.client.volumes.get(team["volumes"]["shared"]).attrs["Mountpoint"]
    shutil.copytree(source, cache_dir, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(cache_dir):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), 4242, 4242)
        os.chmod(dirpath, 0o755)
    os.lchown(cache_dir, 4242, 4242)
    denied = build(team, "dave", "--user", "1000:1000", "--ccache", f"path:{cache_dir}")
    assert denied.returncode == 1
    message = denied.stderr.strip().splitlines()[-1]
    assert message.startswith(f"error: the ccache at path:{cache_dir} is not writable by the build user 1000:1000")
    assert "ccache_read_only" in message
    index = team["root"] / "dave" / "index" / "files"
    assert not index.exists() or not list(index.glob("*.whl"))
    before = sorted(p.name for p in cache_dir.rglob("*"))
    ok = build(team, "dave", "--user", "1000:1000", "--ccache", f"path:{cache_dir}",
               env={"BUILDER_CACHE_CCACHE_READ_ONLY": "1"})
    assert ok.returncode == 0, ok.stderr
    wheel = json.loads(ok.stdout)["wheels"][0]
    assert wheel["status"] == "built" and wheel["filename"].startswith("torch-")
    assert sorted(p.name for p in cache_dir.rglob("*")) == before  # nothing written
