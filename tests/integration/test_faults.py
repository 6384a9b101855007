"""Faults, interrupts, limits, concurrency and hostile input against the real daemon:
each ends in a clear error (or a wait), no container left behind, nothing half-published."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from builder.examples import write_example_repo
from tests.conftest import run_builder, tree, wait_for_container, write_config

pytestmark = pytest.mark.docker

SECRET = "s3cr3t-planted-" + uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def setup(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("faults")
    repo = write_example_repo("faketorch", root / "faketorch", heavy=True)  # long enough to interrupt
    # The runs that are not interrupted (the concurrent pair, the rerun after a kill -9) build
    # this one: the same sources at the light weight, a cold build in seconds, not a minute.
    light = write_example_repo("faketorch", root / "faketorch-light")
    volume = f"builder-test-faults-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[repos]\ntorch = "file://{repo}"\n[cache]\nccache = "volume:{volume}"\n'
                       '[build]\nmemory_limit_gib = 3.0\ncpu_limit = 1.5\nuser = "1000:1000"\n')
    run_builder("images", config=cfg, check=True)
    yield {"root": root, "repo": repo, "light": light, "cfg": cfg, "index": root / "data" / "index"}
    engine.remove_volume(volume)


def start_build(setup, *args: str) -> subprocess.Popen:
    env = {**os.environ, "BUILDER_INDEX_PASSWORD": SECRET, "MY_API_TOKEN": SECRET}
    # SIGINT back to its default: a test run started in the background (nohup, `&`) inherits
    # SIGINT ignored, and Python then never raises KeyboardInterrupt (POSIX convention)
    return subprocess.Popen([sys.executable, "-m", "builder", "--config", str(setup["cfg"]), "wheels",
                             "--torch", "main", "--no-smoke", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def builder_containers(engine, *procs):
    return [c for proc in procs
            for c in engine.client.containers.list(all=True, filters={"label": f"builder.pid={proc.pid}"})]


def wheels_in_index(setup):
    files = setup["index"] / "files"
    return sorted(p.name for p in files.glob("*.whl")) if files.is_dir() else []


def leftovers(setup):
    work = setup["root"] / "data" / "work"
    return sorted(p.name for p in work.iterdir()) if work.is_dir() else []


def test_container_runs_unprivileged_with_limits_and_no_secrets(setup, engine):
    before = tree(setup["index"])
    proc = start_build(setup)
    try:
        container = wait_for_container(engine, proc)
        attrs = engine.api.inspect_container(container.id)
        host = attrs["HostConfig"]
        assert host["Privileged"] is False
        assert host["Memory"] == 3 * 1024 ** 3
        assert host["NanoCpus"] == int(1.5e9)
        assert attrs["Config"]["User"] == "1000:1000"
        assert not any("docker.sock" in (m.get("Source") or "") for m in attrs["Mounts"])
        assert SECRET not in json.dumps(attrs)
        container.kill()  # a build container killed (as the OOM killer would)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: building torch from") and "exit 137" in last and "see the log" in last
    assert SECRET not in out + err
    assert tree(setup["index"]) == before  # nothing published (whatever earlier tests published stays)
    assert builder_containers(engine, proc) == []
    assert leftovers(setup) == []


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_cleans_up(setup, engine, sig, code):
    before = tree(setup["index"])
    proc = start_build(setup)
    try:
        wait_for_container(engine, proc)
        time.sleep(1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "containers and temporary files removed" in err
    assert builder_containers(engine, proc) == []
    assert leftovers(setup) == []
    assert tree(setup["index"]) == before


def test_sigkilled_run_leaves_container_and_work_dir_that_the_next_run_removes(setup, engine, tmp_path):
    # Its own data dir and index: the runs after this one expect setup's index to stay empty.
    volume = f"builder-test-kill9-{uuid.uuid4().hex[:8]}"
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data",
                       f'[repos]\ntorch = "file://{setup["repo"]}"\n[cache]\nccache = "volume:{volume}"\n')
    work = tmp_path / "data" / "work"
    proc = subprocess.Popen([sys.executable, "-m", "builder", "--config", str(cfg), "wheels", "--torch", "main",
                             "--no-smoke"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_container(engine, proc)
        time.sleep(1)
        proc.send_signal(signal.SIGKILL)  # no cleanup can run; our own builder process, by its pid
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [c.id for c in builder_containers(engine, proc)]
    assert left != [] and list(work.iterdir()) != []  # what a kill -9 leaves
    # A run of another data dir (setup's; refused at planning, after its reaper ran) leaves
    # both: the container names a work dir it does not hold, which it could not remove.
    other = run_builder("wheels", "--torch", "main", "--no-smoke", config=setup["cfg"],
                        env={"BUILDER_BUILD_MIN_FREE_DISK_GIB": "1000000"})
    assert other.returncode == 1 and "error: the plan needs 1000000.0 GiB free in " in other.stderr, other.stderr
    assert "left behind" not in other.stderr
    assert [c.id for c in builder_containers(engine, proc)] == left and list(work.iterdir()) != []
    rerun = run_builder("wheels", "--torch", "main", "--torch-repo", f"file://{setup['light']}", "--no-smoke",
                        config=cfg)
    assert rerun.returncode == 0, rerun.stderr
    assert "left behind by an interrupted earlier run" in rerun.stderr and "removed its work dir" in rerun.stderr
    assert builder_containers(engine, proc) == []
    assert list(work.iterdir()) == []
    engine.remove_volume(volume)


def test_too_little_disk_is_refused_before_compiling(setup, engine):
    before = tree(setup["index"])
    done = run_builder("wheels", "--torch", "main", "--no-smoke", config=setup["cfg"],
                       env={"BUILDER_BUILD_MIN_FREE_DISK_GIB": "1000000"})
    assert done.returncode == 1
    # refused at planning time (builder/run/pipeline.py), before any stage or compile ran
    assert "error: the plan needs 1000000.0 GiB free in " in done.stderr, done.stderr
    assert "[build] min_free_disk_gib" in done.stderr and "Traceback" not in done.stderr
    assert tree(setup["index"]) == before  # nothing published


def test_two_concurrent_runs_both_succeed(setup, engine):
    """Two runs at once share the lock: one builds, the other waits and reuses. Their own
    version, so the wheel is new to the index whichever tests ran before (the interrupted
    and killed runs, in any order, leave the data dir usable)."""
    version = "2.99.0a3"
    args = ("--torch-version", version, "--torch-repo", f"file://{setup['light']}")
    first, second = start_build(setup, *args), start_build(setup, *args)
    out1, err1 = first.communicate(timeout=900)
    out2, err2 = second.communicate(timeout=900)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    lines = [re.sub(r"^\[\s*[0-9.]+s\] ", "", line) for line in (err1 + err2).splitlines()]  # timed lines
    statuses = sorted(line.split(":")[1].split()[0] for line in lines
                      if line.startswith("torch: ") and (" built " in line or " reused " in line))
    assert statuses == ["built", "reused"]
    assert "waiting for it" in err1 + err2
    torch_wheels = [w for w in wheels_in_index(setup) if w.startswith(f"torch-{version}")]
    assert len(torch_wheels) == 1  # one torch of that version, beside its runtime dependencies
    index_page = (setup["index"] / "simple" / "torch" / "index.html").read_text()
    assert torch_wheels[0] in index_page
    assert builder_containers(engine, first, second) == []


NOT_A_REF = "is not a valid git ref (letters, digits, . _ / + -)"
# (arguments, exit code, the one stderr line): each refused while parsing, before any git,
# Docker or index access (2: usage; `index show` of a path is a lookup error, 1).
HOSTILE = [
    (["wheels", "--torch", "main; rm -rf /"], 2, f"error: --torch 'main; rm -rf /' {NOT_A_REF}"),
    (["wheels", "--torch", "--upload-pack=touch /tmp/pwned"], 2,
     f"error: --torch '--upload-pack=touch /tmp/pwned' {NOT_A_REF}"),
    (["wheels", "--torch", "$(touch /tmp/pwned)"], 2, f"error: --torch '$(touch /tmp/pwned)' {NOT_A_REF}"),
    (["wheels", "--torch", "main\nid"], 2, "error: --torch contains a newline or NUL: 'main\\nid'"),
    (["wheels", "--torch", "main", "--torch-repo", "--upload-pack=touch /tmp/pwned"], 2,
     "error: --torch-repo '--upload-pack=touch /tmp/pwned' looks like a command-line option, not a URL"),
    (["wheels", "--torch", "main", "--torch-repo", "ext::sh -c touch% /tmp/pwned"], 2,
     "error: --torch-repo 'ext::sh -c touch% /tmp/pwned' contains characters not allowed in a repository URL"),
    (["wheels", "--torch", "main", "--torch-repo", "file://../../etc"], 2,
     "error: --torch-repo 'file://../../etc' must be an absolute file:///path"),
    (["wheels", "--torch", "main", "--user", "0; id"], 2,
     "error: command line: build.user '0; id' is not a valid uid[:gid]"),
    (["wheels", "--torch", "main", "--ccache", "volume:../../x"], 2,
     "error: command line: cache.ccache 'volume:../../x' is not a valid cache location (volume:NAME or path:/dir)"),
    (["wheels", "--torch", "main", "--ccache-remote", "redis://x;id"], 2,
     "error: command line: cache.ccache_remote 'redis://x;id' is not a valid redis://HOST:PORT or "
     "http://HOST/PATH (several: space separated)"),
    (["wheels", "--torch", "x" * 300], 2, "error: --torch is too long (300 > 256 characters)"),
    (["wheels", "--torch", "2.13.0; id"], 2, f"error: --torch '2.13.0; id' {NOT_A_REF}"),
    (["index", "show", "../../etc/passwd"], 1,
     "error: wheel file name '../../etc/passwd' must be a bare wheel file name, not a path; pass a file named "
     "name-version-pytag-abitag-platform.whl"),
]
