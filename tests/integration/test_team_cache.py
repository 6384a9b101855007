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
import zipfile
from pathlib import Path

import pytest

from builder.examples import commit_change, write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(ready, what: str, proc: subprocess.Popen, *logs: Path, timeout: float = 30) -> None:
    """Until ``ready()``; a server that exits or never gets ready fails the test with its logs' tails."""
    def tails() -> str:
        return " | ".join(f"{log.name}: {log.read_text(errors='replace')[-2000:]}" for log in logs if log.exists())

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited ({proc.returncode}): {tails()}")
        if ready():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} was not ready within {timeout:.0f} s: {tails()}")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("redis") / "redis.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                          text=True).stdout.strip() == "PONG", "redis-server", proc, log)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def http_cache(tmp_path_factory):
    """nginx with WebDAV: one HTTP cache for ccache (http://) and Bazel (--remote_cache)."""
    root = tmp_path_factory.mktemp("nginx")
    for sub in ("data", "tmp"):  # workers run as root: pytest's tmp dirs are private to root
        (root / sub).mkdir()
    port = free_port()
    (root / "nginx.conf").write_text(f"""
daemon off;
user root root;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {root}/access.log;
  client_body_temp_path {root}/tmp;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      root {root}/data;
      dav_methods PUT DELETE;
      create_full_put_path on;
      client_max_body_size 0;
    }}
  }}
}}
""")
    with (root / "stderr.log").open("wb") as out:
        proc = subprocess.Popen(["nginx", "-c", str(root / "nginx.conf"), "-p", str(root)],
                                stdout=out, stderr=subprocess.STDOUT)

    def answers() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        # nginx writes its own errors to error.log, what fails before that to stderr
        wait_until(answers, "nginx", proc, root / "error.log", root / "stderr.log")
        yield {"url": f"http://127.0.0.1:{port}", "data": root / "data"}
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def team(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("team")
    repo = write_example_repo("faketorch", root / "faketorch")
    xla = write_example_repo("fakexla", root / "fakexla")
    volumes = {name: f"builder-test-{name}-{uuid.uuid4().hex[:8]}" for name in ("shared", "fresh", "fresh2", "bazel")}
    yield {"root": root, "repo": repo, "xla": xla, "volumes": volumes}
    for volume in volumes.values():
        engine.remove_volume(volume)


def build(team, member: str, *args: str, extra: str = "", env: dict[str, str] | None = None):
    data = team["root"] / member
    data.mkdir(exist_ok=True)
    cfg = write_config(data / "builder.toml", data, f'[repos]\ntorch = "file://{team["repo"]}"\n' + extra)
    return run_builder("wheels", "--torch", "main", "--no-smoke", "--json", *args, config=cfg, env=env)


def torch_stats(done) -> dict:
    assert done.returncode == 0, done.stderr
    wheel = next(w for w in json.loads(done.stdout)["wheels"] if w["project"] == "torch")
    assert wheel["status"] == "built"
    return wheel["ccache"]


@pytest.fixture(scope="module")
def first(team, redis_url, http_cache):
    """Teammate one: uid 1000, the shared volume, two remotes (Redis and HTTP): a cold build."""
    done = build(team, "alice", "--user", "1000:1000", "--ccache", f"volume:{team['volumes']['shared']}",
                 "--ccache-remote", f"{redis_url} {http_cache['url']}/ccache")
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


def test_one_http_cache_backs_ccache_and_bazel(team, first, http_cache):
    """A third machine: empty local cache, ccache over HTTP, and XLA's Bazel cache on the same server.
    torch is the team's main (C++20, as pytorch's): the fixture xla compiles as C++17 and
    pins an older torch, so this team's xla is one that moved to C++20, built against main."""
    url = http_cache["url"]
    rc = team["xla"] / ".bazelrc"
    if "-std=c++20" not in rc.read_text():
        commit_change(team["xla"], ".bazelrc", rc.read_text().replace("--cxxopt=-std=c++17", "--cxxopt=-std=c++20"))
    done = build(team, "erin", "--xla", "main", "--xla-repo", f"file://{team['xla']}", "--torch-unpinned",
                 "--ccache", f"volume:{team['volumes']['fresh2']}", "--ccache-remote", f"{url}/ccache",
                 "--bazel-cache", f"volume:{team['volumes']['bazel']}", "--bazel-remote-cache", f"{url}/bazel")
    stats = torch_stats(done)
    calls = stats["direct_hits"] + stats["preprocessed_hits"] + stats["misses"]
    assert stats["remote_errors"] == 0
    assert stats["remote_hits"] / calls >= 0.90, stats
    xla = next(w for w in json.loads(done.stdout)["wheels"] if w["project"] == "torch_xla")
    assert xla["status"] == "built"
    with zipfile.ZipFile(team["root"] / "erin" / "index" / "files" / xla["filename"]) as wheel:
        options = wheel.read("torch_xla/bazel_options.txt").decode()
    assert f"--remote_cache={url}/bazel" in options and "--disk_cache=/bazel-cache/disk" in options
    assert list((http_cache["data"] / "bazel" / "ac").iterdir())
    assert list((http_cache["data"] / "bazel" / "cas").iterdir())
