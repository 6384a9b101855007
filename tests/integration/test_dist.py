"""Distributed compilation on sccache-dist (issue "When one machine is not enough"): a
real scheduler and two build servers on 127.0.0.1 (`builder dist up`), a fixture torch
built through them, byte-identical to a local build; faults fall back or fail cleanly; the
client token appears nowhere it could leak."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from builder.examples import write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("dist")
    repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    volume = f"builder-test-dist-{uuid.uuid4().hex[:8]}"
    common = f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "volume:{volume}"\n'
    cfg = write_config(root / "builder.toml", root / "data", common)
    local = write_config(root / "local.toml", root / "local", common)
    up = run_builder("dist", "up", "--servers", "2", config=cfg, check=True)
    cluster = json.loads((root / "data" / "dist" / "cluster.json").read_text())
    token = (root / "data" / "dist" / "client-token").read_text().strip()
    cfg.write_text(cfg.read_text() + f'[dist]\ntoken_file = "{root / "data" / "dist" / "client-token"}"\n')
    yield {"root": root, "cfg": cfg, "local": local, "cluster": cluster, "token": token, "up": up.stdout}
    run_builder("dist", "down", config=cfg)
    engine.remove_volume(volume)


def wheels(cfg, *args, env=None):
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", *args, config=cfg, env=env)
    assert done.returncode == 0, done.stderr
    [torch] = json.loads(done.stdout)["wheels"]
    return torch, done.stderr


@pytest.fixture(scope="module")
def distributed(env):
    return wheels(env["cfg"], "--dist", env["cluster"]["scheduler"])


def test_compiles_spread_over_both_servers_and_the_wheel_matches_a_local_build(env, distributed):
    torch, stderr = distributed
    assert torch["status"] == "built"
    per_server = torch["dist"]["dist_servers"]
    assert set(per_server) == set(env["cluster"]["servers"]) and all(n >= 1 for n in per_server.values())
    assert torch["dist"]["dist_compiles"] == sum(per_server.values()) >= 50
    assert "distributing compiles over 2 sccache-dist servers" in stderr
    local, _ = wheels(env["local"])
    assert local["filename"] == torch["filename"] and local["sha256"] == torch["sha256"]  # same bytes
    manifest = json.loads((env["root"] / "data" / "index" / "files" / f"{torch['filename']}.manifest.json")
                          .read_text())
    assert manifest["predicate"]["runDetails"]["ccache"]["dist_compiles"] == torch["dist"]["dist_compiles"]
    assert json.loads(open(torch["profile"]).read())["dist"]["dist_servers"] == per_server  # and the profile


def test_scheduler_down_builds_locally_with_a_note(env, distributed):
    torch, stderr = wheels(env["cfg"], "--dist", "http://127.0.0.1:9", "--torch-version", "2.99.0a7")
    assert torch["status"] == "built" and not torch["dist"]
    assert "the sccache-dist scheduler http://127.0.0.1:9 is unreachable: compiling on this machine" in stderr


def test_wrong_token_is_one_error_and_publishes_nothing(env, distributed):
    files = sorted(p.name for p in (env["root"] / "data" / "index" / "files").iterdir())
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--torch-version", "2.99.0a8", "--dist",
                       env["cluster"]["scheduler"], config=env["cfg"], env={"BUILDER_DIST_TOKEN": "not-the-token"})
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: the sccache-dist scheduler {env['cluster']['scheduler']} refused the client token "
                      "(HTTP 401); use the token of its [client_auth] section ($BUILDER_DIST_TOKEN or [dist] "
                      "token_file)"]
    assert sorted(p.name for p in (env["root"] / "data" / "index" / "files").iterdir()) == files


def test_the_token_is_in_no_log_manifest_image_or_container(env, distributed, engine):
    token = env["token"]
    for path in (env["root"] / "data").rglob("*"):
        if path.is_file() and "dist" not in path.relative_to(env["root"] / "data").parts[:1]:
            assert token.encode() not in path.read_bytes(), path
    deps = next(t for t in engine.client.images.list(name="builder/deps") if t.tags)
    for image in engine.client.images.list(name="builder/deps"):
        assert token not in json.dumps(image.attrs) and token not in json.dumps(image.history())
    assert deps is not None


def test_a_server_killed_mid_build_falls_back_and_the_build_succeeds(env, distributed, engine):
    """Last: it leaves one server. The killed server is one `builder dist up` started here."""
    cold = f"builder-test-dist-cold-{uuid.uuid4().hex[:8]}"  # sccache's cache lives there: no hits
    command = ["wheels", "--torch", "main", "--no-smoke", "--json", "--torch-version", "2.99.0a9", "--dist",
               env["cluster"]["scheduler"], "--ccache", f"volume:{cold}"]
    import sys

    build = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(env["cfg"]), *command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # killed once ninja has started compiling (the build log shows [N/M])
    seen_env = ""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not seen_env:
        for c in engine.containers_with_label("builder.step=torch"):
            seen_env = json.dumps(c.attrs.get("Config", {}))  # what `docker inspect` shows of the build
        time.sleep(0.5)
    time.sleep(3)
    from builder.caches.dist import stop_process

    stop_process(env["cluster"]["pids"]["server-0"])
    out, err = build.communicate(timeout=900)
    engine.remove_volume(cold)
    assert build.returncode == 0, err
    assert seen_env and env["token"] not in seen_env  # never in the container's env or command line
    [torch] = json.loads(out)["wheels"]
    d = torch["dist"]
    assert torch["status"] == "built"
    # every compile ran somewhere: on the surviving server, or locally after a failed distribution
    # (sccache's scheduler also routes around a dead server, so the fallback count may be 0)
    assert d["dist_compiles"] + d["local_compiles"] >= 50
    assert d["dist_servers"].get(env["cluster"]["servers"][1], 0) >= 1


def test_down_stops_every_process_up_started(env):
    """Last: `builder dist down` stops the scheduler and the servers by their recorded pids."""
    import os

    done = run_builder("dist", "down", config=env["cfg"], check=True)
    assert "stopped scheduler, server-0, server-1" in done.stdout
    for name, pid in env["cluster"]["pids"].items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        stat = open(f"/proc/{pid}/stat").read().split()[2]
        assert stat == "Z", f"{name} (pid {pid}) still runs"  # a zombie is reaped by its parent, not running
