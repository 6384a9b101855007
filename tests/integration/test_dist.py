"""Distributed compilation on sccache-dist (issue "When one machine is not enough"): a
real scheduler and two build servers on 127.0.0.1 (`builder dist up`), a fixture torch
built through them, byte-identical to a local build; faults fall back or fail cleanly; the
client token appears nowhere it could leak."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from builder.caches.dist import stop_process
from builder.examples import write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


def start_cluster(root, common: str, servers: int = 2) -> dict:
    """`builder dist up` in its own data dir: a config using it, the cluster it recorded, the token."""
    cfg = write_config(root / "builder.toml", root / "data", common)
    up = run_builder("dist", "up", "--servers", str(servers), config=cfg, check=True)
    cluster = json.loads((root / "data" / "dist" / "cluster.json").read_text())
    token = (root / "data" / "dist" / "client-token").read_text().strip()
    cfg.write_text(cfg.read_text() + f'[dist]\ntoken_file = "{root / "data" / "dist" / "client-token"}"\n')
    return {"cfg": cfg, "cluster": cluster, "token": token, "up": up.stdout, "dist": root / "data" / "dist"}


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    """One cluster for the module; the tests that kill or stop servers start their own, so
    any order works."""
    root = tmp_path_factory.mktemp("dist")
    repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    # The same sources at the heavy weight, for the one test that must catch a compile in flight
    # (every 4th kernel at 1.4 s: 14 compiles that can be caught, the 40 others at 0.03 s)
    heavy = write_example_repo("faketorch", root / "repos" / "faketorch-heavy", heavy=True, heavy_every=4)
    volume = f"builder-test-dist-{uuid.uuid4().hex[:8]}"
    common = f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "volume:{volume}"\n'
    local = write_config(root / "local.toml", root / "local", common)
    cluster = start_cluster(root, common)
    yield {"root": root, "common": common, "local": local, "heavy": heavy, **cluster}
    run_builder("dist", "down", config=cluster["cfg"])
    engine.remove_volume(volume)


def wheels(cfg, *args, env=None):
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--json", *args, config=cfg, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [torch] = report["wheels"]
    return torch, done.stderr, report


@pytest.fixture(scope="module")
def distributed(env):
    """A cold build on the module's cluster (sccache's cache is in the fresh volume)."""
    return wheels(env["cfg"], "--dist", env["cluster"]["scheduler"])


def test_compiles_spread_over_both_servers_and_the_wheel_matches_a_local_build(env, distributed):
    torch, stderr, _ = distributed
    assert torch["status"] == "built"
    per_server = torch["dist"]["dist_servers"]
    assert set(per_server) == set(env["cluster"]["servers"]) and all(n >= 1 for n in per_server.values())
    assert torch["dist"]["dist_compiles"] == sum(per_server.values()) >= 50
    assert "distributing compiles over 2 sccache-dist servers" in stderr
    local, _, _ = wheels(env["local"])
    assert local["filename"] == torch["filename"] and local["sha256"] == torch["sha256"]  # same bytes
    manifest = json.loads((env["root"] / "data" / "index" / "files" / f"{torch['filename']}.manifest.json")
                          .read_text())
    assert manifest["predicate"]["runDetails"]["ccache"]["dist_compiles"] == torch["dist"]["dist_compiles"]
    assert json.loads(open(torch["profile"]).read())["dist"]["dist_servers"] == per_server  # and the profile


def test_scheduler_down_builds_locally_with_a_note(env, distributed):
    torch, stderr, _ = wheels(env["cfg"], "--dist", "http://127.0.0.1:9", "--torch-version", "2.99.0a7")
    assert torch["status"] == "built" and not torch["dist"]
    assert "the sccache-dist scheduler http://127.0.0.1:9 is unreachable: compiling on this machine" in stderr


def test_wrong_token_is_one_error_and_publishes_nothing(env, distributed):
    files = sorted(p.name for p in (env["root"] / "data" / "index" / "files").iterdir())
    done = run_builder("wheels", "--torch", "main", "--no-smoke", "--torch-version", "2.99.0a8", "--dist",
                       env["cluster"]["scheduler"], config=env["cfg"], env={"BUILDER_DIST_TOKEN": "not-the-token"})
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: the sccache-dist scheduler {env['cluster']['scheduler']} refused the client token "
                      "(HTTP 401); use the token of its [client_auth] section ($BUILDER_DIST_TOKEN or [dist] "
                      "token_file)"]
    assert sorted(p.name for p in (env["root"] / "data" / "index" / "files").iterdir()) == files


def test_the_token_is_in_no_log_manifest_image_or_container(env, distributed, engine):
    token = env["token"]
    checked = []
    for path in (env["root"] / "data").rglob("*"):
        if path.is_file() and "dist" not in path.relative_to(env["root"] / "data").parts[:1]:
            assert token.encode() not in path.read_bytes(), path
            checked.append(path.name)
    torch, _, report = distributed
    assert torch["filename"] in checked and f"{torch['filename']}.manifest.json" in checked
    assert any(name.endswith(".log") for name in checked)
    # The images of the distributed run (its deps layer has sccache in it), by the IDs it reported
    ids = {s["name"]: s["image_id"] for s in report["stages"]}
    assert set(ids) == {"base", "toolchain", "python", "deps"}
    for name, image_id in ids.items():
        image = engine.client.images.get(image_id)
        assert token not in json.dumps(image.attrs) and token not in json.dumps(image.history()), name


def test_a_server_killed_mid_compile_the_build_still_gives_the_right_bytes(env, distributed, engine, tmp_path):
    """A cluster of its own (the module's keeps both servers). Server 0 is killed while a
    compile runs on it (its build dir holds a job): every compile then ends somewhere (the
    failed distribution compiled locally, the rest on the survivor) and the wheel is
    byte-identical to a local build of the same version, so no wrong object got in."""
    own = start_cluster(tmp_path, env["common"])
    cold = f"builder-test-dist-cold-{uuid.uuid4().hex[:8]}"  # sccache's cache lives there: no hits
    version = "2.99.0a9"
    heavy = ("--torch-repo", f"file://{env['heavy']}")  # compiles long enough to be caught on server 0
    command = ["wheels", "--torch", "main", "--no-smoke", "--json", "--torch-version", version, *heavy, "--dist",
               own["cluster"]["scheduler"], "--ccache", f"volume:{cold}"]
    jobs = own["dist"] / "server-0" / "build" / "builds"  # sccache-dist's overlay builder: one dir a job
    build = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(own["cfg"]), *command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen_env, in_flight = "", []
        deadline = time.monotonic() + 600
        while not in_flight and build.poll() is None and time.monotonic() < deadline:
            for c in engine.containers_with_label("builder.step=torch"):
                if c.labels.get("builder.pid") != str(build.pid):
                    continue  # another build on this daemon (the suite's other worker)
                seen_env = seen_env or json.dumps(c.attrs.get("Config", {}))  # what `docker inspect` shows
            in_flight = sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []
            time.sleep(0.02)
        assert in_flight, f"no compile ever ran on server 0 (build exit {build.poll()})"
        stop_process(own["cluster"]["pids"]["server-0"])
        out, err = build.communicate(timeout=900)
    finally:
        if build.poll() is None:
            build.kill()
            build.wait(timeout=60)
            for c in engine.containers_with_label(f"builder.pid={build.pid}"):  # a killed run's container
                c.remove(force=True)
        run_builder("dist", "down", config=own["cfg"])
        engine.remove_volume(cold)
    assert build.returncode == 0, err
    assert seen_env and own["token"] not in seen_env  # never in the container's env or command line
    [torch] = json.loads(out)["wheels"]
    assert torch["status"] == "built"
    d, reference = torch["dist"], distributed[0]["dist"]
    # every compile ran exactly once to completion: as many as the cold build on the healthy cluster,
    # each failed distribution (the one in flight, and any sent to the dead server before the
    # scheduler noticed) compiled locally
    assert d["dist_compiles"] + d["local_compiles"] == reference["dist_compiles"] + reference["local_compiles"]
    assert d["local_compiles"] - reference["local_compiles"] == d["dist_failed"]
    assert d["dist_servers"].get(own["cluster"]["servers"][1], 0) >= 1
    local, _, _ = wheels(env["local"], "--torch-version", version, *heavy)
    assert (torch["filename"], torch["sha256"]) == (local["filename"], local["sha256"])


def test_down_stops_every_process_up_started(env, tmp_path):
    """`builder dist down` stops the scheduler and the servers by their recorded pids (a
    cluster of its own: the module's keeps running for the other tests)."""
    import os

    own = start_cluster(tmp_path, env["common"])
    done = run_builder("dist", "down", config=own["cfg"], check=True)
    assert "stopped scheduler, server-0, server-1" in done.stdout
    for name, pid in own["cluster"]["pids"].items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        stat = open(f"/proc/{pid}/stat").read().split()[2]
        assert stat == "Z", f"{name} (pid {pid}) still runs"  # a zombie is reaped by its parent, not running
    assert not (own["dist"] / "cluster.json").exists()
