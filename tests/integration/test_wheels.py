"""`builder wheels` end to end on fixture repos shaped like pytorch and pytorch/xla,
against the real Docker daemon, real git, real ccache and the real directory index."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from builder.engine import ContainerSpec
from builder.examples import commit_change, head_sha, write_example_repo
from builder.repro import audit
from tests.conftest import against_layer, leftover_containers, run_builder, write_config

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("wheels")
    torch_repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    xla_repo = write_example_repo("fakexla", root / "repos" / "fakexla")
    # torch main needs C++20 and xla compiles as C++17 (as upstream): torch work that xla
    # builds against happens on a branch off the pinned (C++17) commit
    subprocess.run(["git", "-C", str(torch_repo), "checkout", "-q", "-b", "dev",
                    (xla_repo / ".torch_commit").read_text().split()[-1]], check=True)
    volume = f"builder-test-ccache-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[cache]\nccache = "volume:{volume}"\nbazel = "volume:{volume}-bazel"\n'
                       f'[repos]\ntorch = "file://{torch_repo}"\nxla = "file://{xla_repo}"\n')
    yield {"cfg": cfg, "torch": torch_repo, "xla": xla_repo, "index": root / "data" / "index", "root": root}
    engine.remove_volume(volume)
    engine.remove_volume(f"{volume}-bazel")


DEV = ("--torch", "dev", "--torch-unpinned")  # xla against the torch dev branch, past the pin


def wheels(env, *args):
    """--xla main: the fixture xla's default branch (master), with the torch it pins."""
    done = run_builder("wheels", "--xla", "main", "--json", *args, config=env["cfg"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return {w["recipe"]: w for w in report["wheels"]}, report


def index_files(env):
    files = env["index"] / "files"
    return sorted(p.name for p in files.glob("*.whl")) if files.is_dir() else []


@pytest.fixture(scope="module")
def cold(env):
    """The first run (every test uses it, so it runs first in any order), with the index
    as that run left it: later tests publish more."""
    built, report = wheels(env)
    report["index_files"] = index_files(env)
    return built, report


def test_cold_build_publishes_two_wheels(env, cold, engine):
    built, report = cold
    assert built["torch"]["status"] == "built" and built["xla"]["status"] == "built"
    assert report["smoke"] == "passed"
    # The two wheels and torch's runtime dependencies (its Requires-Dist), so the index alone installs it.
    names = sorted(name.split("-", 1)[0].lower() for name in report["index_files"])
    assert names == ["filelock", "fsspec", "torch", "torch_xla", "typing_extensions"], names
    assert {built["torch"]["filename"], built["xla"]["filename"]} <= set(report["index_files"])
    pinned = (env["xla"] / ".torch_commit").read_text().split()[-1]
    assert built["torch"]["filename"].startswith(f"torch-2.99.0a0+git{pinned[:7]}")
    assert built["xla"]["filename"].startswith("torch_xla-2.98.0+git")  # upstream's mismatch, kept
    assert built["torch"]["source_sha"] == pinned
    # auditwheel in the build container retagged both (builder.repro.audit): the fixture torch
    # needs GLIBCXX_3.4.21 (GCC 5's libstdc++), which manylinux_2_17 lacks and 2_24 has
    assert built["torch"]["filename"].endswith("-cp311-cp311-manylinux_2_24_x86_64.whl")
    assert built["torch"]["platform"]["limited_by"] == ["CXXABI_1.3.9 (libstdc++.so.6)",
                                                        "GLIBCXX_3.4.21 (libstdc++.so.6)"]
    assert built["torch"]["platform"]["vendored"] == []
    # fakexla's light kernels need nothing newer than manylinux_2_5 (manylinux1, auditwheel's legacy alias)
    assert audit.platform_tag(built["xla"]["filename"]) == "manylinux1_x86_64.manylinux_2_5_x86_64", built["xla"]
    assert built["xla"]["platform"]["limited_by"] == []
    assert built["xla"]["platform"]["vendored"] == []  # torch's libraries are the torch wheel's, not vendored
    notes = report["plan"]["notes"]
    assert notes[0].endswith("fakexla has no branch main; using its default branch master at "
                             f"{built['xla']['source_sha'][:7]}") and "upstream's own pair" in notes[1]
    assert leftover_containers(engine, env) == []


def test_wheels_install_from_the_index_in_a_fresh_container(env, cold, engine):
    """pip in a clean python-stage container, no network, only the index: xla calls into torch."""
    from builder.engine import ContainerSpec, Mount

    built, report = cold
    python_tag = next(s["tag"] for s in report["stages"] if s["name"] == "python")
    # The cold run's two (other tests publish newer ones, in any order)
    script = ("PIP_CONFIG_FILE=/dev/null pip install -q --no-cache-dir --index-url file:///index/simple/ "
              f"torch=={built['torch']['version']} torch_xla=={built['xla']['version']} && cd /tmp && "
              "python -c 'import torch_xla, torch; print(torch_xla.add_via_torch(20, 22), torch.__file__)'")
    result = engine.run(ContainerSpec(image=python_tag, command=["sh", "-c", script], network="none",
                                      mounts=[Mount(str(env["index"]), "/index", read_only=True)]))
    assert result.exit_code == 0, result.output
    assert "42.0 /opt/venv/lib/python3.11/site-packages/torch/__init__.py" in result.output


def test_noop_rerun_compiles_nothing(env, cold):
    # torch at xla's pin, which no test moves; the first run brings the index up to date with
    # the xla repo when other tests changed it first (a no-op right after cold).
    before, _ = wheels(env)
    built, report = wheels(env)
    assert built["torch"]["status"] == "reused" and built["xla"]["status"] == "reused"
    assert all(s["reused"] for s in report["stages"])
    assert report["smoke"] == "reused"
    assert {n: w["sha256"] for n, w in built.items()} == {n: w["sha256"] for n, w in before.items()}


def test_one_file_change_rebuilds_torch_with_ccache_and_xla_against_it(env, cold, engine):
    sha = commit_change(env["torch"], "csrc/kernels/kernel_000.cpp")
    # torch dev has moved past xla's .torch_commit: building against it is an explicit choice.
    built, _ = wheels(env, *DEV)
    torch_wheel, xla_wheel = built["torch"], built["xla"]
    assert torch_wheel["status"] == "built" and torch_wheel["source_sha"] == sha
    stats = torch_wheel["ccache"]
    calls = stats["direct_hits"] + stats["preprocessed_hits"] + stats["misses"]
    assert stats["misses"] >= 1  # the changed file really recompiled
    assert (stats["direct_hits"] + stats["preprocessed_hits"]) / (calls - 1) >= 0.9, stats
    assert xla_wheel["status"] == "built"  # its torch changed
    # It built against the new torch from the index: its build container started from the layer
    # with that wheel installed (made here, or by another module that built the same torch bytes:
    # the layer is keyed by them, so which one made it is not this test's), and that layer's
    # torch is the new version. Its key is recorded with the wheel (identical bytes keep the
    # first manifest and note the new key as equivalent).
    layer = against_layer(Path(xla_wheel["log"]).read_text())
    assert layer and layer[1] == [torch_wheel["filename"]]
    probe = engine.run(ContainerSpec(image=layer[0], network="none", command=[
        "python", "-c", "import importlib.metadata as m; print(m.version('torch'))"]))
    assert (probe.exit_code, probe.output.strip()) == (0, torch_wheel["version"])
    manifest = json.loads((env["index"] / "files" / f"{xla_wheel['filename']}.manifest.json").read_text())
    assert xla_wheel["key"] in [manifest["build_key"], *manifest.get("equivalent_build_keys", [])]


def test_only_xla_changes_torch_is_not_rebuilt(env, cold):
    before, _ = wheels(env, *DEV)
    commit_change(env["xla"], "torch_xla/csrc/xla_kernel_000.cpp")
    after, _ = wheels(env, *DEV)
    assert after["torch"]["status"] == "reused"
    assert after["torch"]["sha256"] == before["torch"]["sha256"]
    assert after["xla"]["status"] == "built"


def plan(env, *args):
    done = run_builder("wheels", "--xla", "main", "--dry-run", "--json", *args, config=env["cfg"])
    assert done.returncode == 0, done.stderr
    return {w["name"]: w for w in json.loads(done.stdout)["wheels"]}


def test_dry_run_plan_lists_keys_and_the_run_builds_exactly_that(env, cold):
    before, _ = wheels(env, *DEV)
    planned = plan(env, *DEV)  # nothing changed: every wheel reused, with its key
    assert {n: (w["status"], w["key"]) for n, w in planned.items()} == {
        n: ("reuse", w["key"]) for n, w in before.items()}
    commit_change(env["xla"], "torch_xla/csrc/xla_kernel_001.cpp")
    planned = plan(env, *DEV)
    assert planned["torch"]["status"] == "reuse" and planned["torch"]["key"] == before["torch"]["key"]
    assert planned["xla"]["status"] == "build" and planned["xla"]["key"] not in (None, before["xla"]["key"])
    assert planned["xla"]["sha"] != before["xla"]["source_sha"]
    after, report = wheels(env, *DEV)
    assert {n: w["status"] for n, w in after.items()} == {"torch": "reused", "xla": "built"}
    assert after["xla"]["key"] == planned["xla"]["key"]  # the plan's key is the build's key
    assert report["plan_deviations"] == []


def test_truncated_published_wheel_is_found_then_rebuilt_and_replaced(env, cold):
    current, _ = wheels(env, *DEV)  # torch dev has moved past xla's pin by now
    published = env["index"] / "files" / current["xla"]["filename"]
    data = published.read_bytes()
    published.write_bytes(data[: len(data) // 2])
    check = run_builder("index", "check", "--dir", str(env["index"]), config=env["cfg"])
    assert check.returncode == 1
    errors = [line for line in check.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"corrupt {published.name}" in errors[0], check.stderr
    done = run_builder("wheels", "--xla", "main", *DEV, "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr
    assert f"the published {published.name} was corrupt" in done.stderr
    rebuilt = {w["recipe"]: w for w in json.loads(done.stdout)["wheels"]}
    assert rebuilt["xla"]["status"] == "built" and rebuilt["xla"]["filename"] == published.name
    # replaced by the rebuild, which (same source, same deps) has the very bytes first published
    assert rebuilt["xla"]["sha256"] == current["xla"]["sha256"] and published.read_bytes() == data
    after = run_builder("index", "check", "--dir", str(env["index"]), config=env["cfg"])
    assert after.returncode == 0, after.stderr


def test_bad_ref_fails_before_building(env, cold, engine):
    files = index_files(env)
    done = run_builder("wheels", "--torch", "mian", config=env["cfg"])
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: ref 'mian' not found in file://{env['torch']}; " \
                                  "did you mean main? name an existing branch, tag or a 40-hex SHA"
    assert index_files(env) == files


def test_bad_repo_url(env, cold):
    done = run_builder("wheels", "--torch", "main", "--torch-repo", f"file://{env['root']}/nope", config=env["cfg"])
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"error: cannot reach repository file://{env['root']}/nope")


def test_compile_error_publishes_nothing_and_leaves_no_container(env, cold, engine):
    files = index_files(env)
    broken = head_sha(env["torch"])
    commit_change(env["torch"], "csrc/kernels/kernel_001.cpp", "this is not C++;\n")
    try:
        done = run_builder("wheels", "--torch", "dev", config=env["cfg"])
    finally:  # the tests after this one build the repo: never leave it broken
        subprocess.run(["git", "-C", str(env["torch"]), "reset", "-q", "--hard", broken], check=True)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: building torch from") and "see the log" in last
    log = last.split("see the log ")[1]
    assert os.path.isfile(log) and "error" in open(log).read()
    assert index_files(env) == files
    assert leftover_containers(engine, env) == []
