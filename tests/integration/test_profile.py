"""Build profiles on the fixture pipeline (issue "See where build time goes"): every
translation unit with its time and cache result, misses explained, a diff between builds,
a Chrome trace of the run, and a plain summary on a non-terminal (80 columns)."""

from __future__ import annotations

import json
import uuid

import pytest

from builder.examples import commit_change, write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("profile")
    repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    volume = f"builder-test-profile-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[cache]\nccache = "volume:{volume}"\n[repos]\ntorch = "file://{repo}"\n')
    yield {"cfg": cfg, "repo": repo, "data": root / "data"}
    engine.remove_volume(volume)


def build(env, ref: str = "main"):
    done = run_builder("wheels", "--torch", ref, "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [torch] = report["wheels"]
    assert torch["status"] == "built" and torch["profile"], torch
    return torch, json.loads(open(torch["profile"]).read()), report


@pytest.fixture(scope="module")
def cold(env):
    return build(env)


def test_cold_build_profiles_every_unit_as_a_miss(env, cold):
    torch, profile, _ = cold
    units = profile["units"]
    # every compile of the build is a unit (ccache's count also has CMake's configure-time probes)
    assert 50 <= len(units) <= torch["ccache"]["misses"]
    assert all(u["result"] == "miss" and u["end_ms"] >= u["start_ms"] for u in units)
    assert all(u["output"].endswith(u["source"] + ".o") for u in units)  # ccache's record of each found
    assert all(u["why"] for u in units)
    assert profile["peak_memory_bytes"] > 10 * 1024 ** 2  # the container's cgroup peak, recorded


def test_trace_covers_stages_steps_and_units_without_overlap(env, cold):
    _, profile, report = cold
    trace = json.loads(open(report["trace"]).read())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {"stage", "step", "miss"} <= {e["cat"] for e in events}
    assert sum(1 for e in events if e["cat"] == "miss") == len(profile["units"])
    tracks = {}
    for e in events:
        if e["cat"] not in ("stage", "step"):
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_one_file_change_is_the_only_miss_and_the_diff_names_it(env, cold):
    commit_change(env["repo"], "csrc/kernels/kernel_003.cpp", branch="one-file")  # main stays for the others
    torch, profile, _ = build(env, "one-file")
    misses = [u["source"] for u in profile["units"] if u["result"] == "miss"]
    assert misses == ["csrc/kernels/kernel_003.cpp"], misses
    assert all(u["result"] in ("direct hit", "preprocessed hit") for u in profile["units"]
               if u["result"] != "miss")
    done = run_builder("profile", torch["filename"], "--diff", cold[0]["filename"], config=env["cfg"],
                       env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    diff = done.stdout.split("\nagainst ", 1)[1].splitlines()  # a row does not fit 80 columns with its reason
    assert diff[1:5] == ["missed", "    why", "csrc/kernels/kernel_003.cpp",
                         "    an input changed (the same command: the source or a header it includes)"], diff
    assert len(diff) == 5 or diff[5].startswith("before"), diff  # the only one missed


def test_a_flag_every_unit_sees_misses_everywhere_and_says_why(env, cold):
    cmake = (env["repo"] / "CMakeLists.txt").read_text()
    flag = "project(faketorch C CXX)\nadd_compile_options(-fwrapv)\n"  # a code-generation flag: no hit
    commit_change(env["repo"], "CMakeLists.txt", cmake.replace("project(faketorch C CXX)\n", flag), branch="fwrapv")
    _, profile, _ = build(env, "fwrapv")
    assert profile["units"] and all(u["result"] == "miss" for u in profile["units"])
    assert all("compile command changed" in u["why"] for u in profile["units"])
    done = run_builder("profile", "torch", "--json", config=env["cfg"])
    assert json.loads(done.stdout)["totals"]["miss"] == len(profile["units"])


def test_non_terminal_summary_never_splits_a_wheel_name(env, cold):
    done = run_builder("wheels", "--torch", "main", config=env["cfg"], env={"COLUMNS": "80"})  # stderr: a pipe
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("torch "))
    name = lines[row + 1].removeprefix("    ")  # the wheel whole, on the line under its row
    assert name.startswith("torch-") and name.endswith("-cp311-cp311-manylinux_2_24_x86_64.whl"), lines[row + 1]
    assert "trace: " in done.stderr
