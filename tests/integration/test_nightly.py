"""`builder nightly` on the fixture repos: dated dev versions, nothing rebuilt when
nothing moved, a newer dev version after a new commit, which `pip install --pre` picks."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from builder.examples import commit_change, head_sha, write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("nightly")
    torch_repo = write_example_repo("faketorch", root / "faketorch")
    xla_repo = write_example_repo("fakexla", root / "fakexla")
    volume = f"builder-test-nightly-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[repos]\ntorch = "file://{torch_repo}"\nxla = "file://{xla_repo}"\n'
                       f'[cache]\nccache = "volume:{volume}"\n')
    yield {"root": root, "cfg": cfg, "torch": torch_repo, "index": root / "data" / "index"}
    engine.remove_volume(volume)


def nightly(env, name: str):
    report_dir = env["root"] / "reports" / name
    done = run_builder("nightly", "--keep", "5", "--report-dir", str(report_dir), config=env["cfg"])
    report = json.loads((report_dir / "report.json").read_text())
    return done, report


def today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%d")


def test_nightly_twice_then_after_a_commit(env, tmp_path):
    first, report = nightly(env, "first")
    assert first.returncode == 0, first.stderr
    assert report["status"] == "built"
    assert report["versions"]["torch"] == report["version"] == f"2.99.0.dev{today()}"
    wheels = {w["project"]: w for w in report["wheels"]}
    assert wheels["torch"]["filename"].startswith(f"torch-2.99.0.dev{today()}-")
    assert list(wheels) == ["torch"]  # the default set: torch_xla is frozen upstream (nightly = False)
    assert all(w["status"] == "built" for w in wheels.values())
    assert report["smoke"] == "passed"
    assert {s["name"] for s in report["stages"]} == {"base", "toolchain", "python", "deps"}
    trace = json.loads(open(report["trace"]).read())  # the run's Chrome trace, linked and kept with the report
    assert report["trace"] == str(env["root"] / "reports" / "first" / "trace.json")
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} >= {"stage", "step", "miss"}

    second, again = nightly(env, "second")
    assert second.returncode == 3, second.stderr
    assert again["status"] == "nothing-new"
    assert "nothing new since the last nightly" in second.stderr
    assert "building" not in second.stderr

    commit_change(env["torch"], "csrc/kernels/kernel_002.cpp")
    third, newer = nightly(env, "third")
    assert third.returncode == 0, third.stderr
    assert newer["versions"]["torch"] == f"2.99.0.dev{today()}01"

    # pip, with only builder's index (the machine's pip config switched off), picks the newest.
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    pip_env["PIP_CONFIG_FILE"] = os.devnull
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--pre", "--no-deps", "--no-cache-dir",
                           "--index-url", f"file://{env['index']}/simple/", "-d", str(tmp_path), "torch"],
                          capture_output=True, text=True, env=pip_env)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.glob("torch-*.whl")] == [
        next(w["filename"] for w in newer["wheels"] if w["project"] == "torch")]


def test_failure_prints_the_log_tail_and_exits_1(env):
    good = head_sha(env["torch"])
    commit_change(env["torch"], "csrc/kernels/kernel_003.cpp", "this is not C++;\n")
    try:
        done, report = nightly(env, "broken")
    finally:  # the nightly builds main: never leave it broken for a test after this one
        subprocess.run(["git", "-C", str(env["torch"]), "reset", "-q", "--hard", good], check=True)
    assert done.returncode == 1
    assert report["status"] == "failed"
    assert "---- last 50 lines of " in done.stderr and "kernel_003.cpp" in done.stderr
    assert report["failed_log"].endswith(".log")
    # The failing step's log is copied into the report dir (the CI workflow uploads that dir).
    copied = env["root"] / "reports" / "broken" / Path(report["failed_log"]).name
    assert copied.is_file() and "kernel_003.cpp" in copied.read_text(errors="replace")
