"""Pairing torch_xla with its torch at plan time (issue "Real upstream, part 2", item 3):
xla's .torch_commit picks the torch, a different --torch is refused unless
--torch-unpinned, and source versions must pair. Everything here is decided before any
Docker call, so these run the real CLI with --dry-run on fixture repos."""

from __future__ import annotations

import subprocess

import pytest

from builder.examples import commit_change, write_example_repos
from tests.conftest import run_builder, write_config


@pytest.fixture
def repos(tmp_path):
    repos = write_example_repos(tmp_path / "repos")
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data",
                       f'[repos]\ntorch = "file://{repos["faketorch"]}"\nxla = "file://{repos["fakexla"]}"\n')
    return {"cfg": cfg, **repos}


def head(repo) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_xla_alone_builds_the_pinned_torch(repos):
    pinned = (repos["fakexla"] / ".torch_commit").read_text().split()[-1]
    assert pinned == head(repos["faketorch"])
    commit_change(repos["faketorch"], "csrc/ops.cpp")  # torch main moves on; the pin does not
    done = run_builder("wheels", "--xla", "main", "--dry-run", config=repos["cfg"])
    assert done.returncode == 0, done.stderr
    assert f"# torch: {pinned} = {pinned} (file://{repos['faketorch']})" in done.stdout
    assert "#   backend scikit_build_core.build; build requirements from requirements-build.txt, pyproject.toml" \
        in done.stdout
    assert "#   Bazel 7.4.1 (.bazelversion) through bazelisk 1.28.1, from http://127.0.0.1:" in done.stdout


def test_torch_other_than_the_pin_is_refused_then_accepted_with_the_override(repos):
    pinned = head(repos["faketorch"])
    moved = commit_change(repos["faketorch"], "csrc/ops.cpp")
    done = run_builder("wheels", "--torch", "main", "--xla", "main", "--dry-run", config=repos["cfg"])
    assert done.returncode != 0
    xla_sha = head(repos["fakexla"])
    assert done.stderr.strip() == (
        f"error: --torch main is {moved[:12]}, but xla main ({xla_sha[:12]}) pins torch {pinned} in .torch_commit; "
        "drop --torch to build the pinned torch, or add --torch-unpinned to build against main anyway")
    done = run_builder("wheels", "--torch", "main", "--xla", "main", "--torch-unpinned", "--dry-run",
                       config=repos["cfg"])
    assert done.returncode == 0, done.stderr
    assert f"# torch: main = {moved}" in done.stdout


def test_source_versions_that_do_not_pair_are_refused_at_plan_time(repos):
    util = repos["fakexla"] / "build_util.py"
    commit_change(repos["fakexla"], "build_util.py",
                  util.read_text().replace('"TORCH_XLA_VERSION", "2.99.0"', '"TORCH_XLA_VERSION", "2.98.0"'))
    done = run_builder("wheels", "--xla", "main", "--dry-run", config=repos["cfg"])
    assert done.returncode != 0
    line = done.stderr.strip()
    assert line.startswith("error: xla main (") and "torch_xla 2.98.0 is built for torch 2.98.*, not torch 2.99.0a0" \
        in line, line
    assert "Traceback" not in done.stderr


def test_prebuilt_torch_past_the_last_xla_release_is_refused_naming_it(repos):
    done = run_builder("wheels", "--torch", "2.10.0", "--xla", "2.9.0", "--dry-run", config=repos["cfg"])
    assert done.returncode != 0
    assert done.stderr.strip() == ("error: torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.10.0; use torch "
                                   "2.9.0 (e.g. --torch 2.9.0); torch_xla 2.9.0 is the last release (none exists "
                                   "for torch 2.10)")


def test_source_torch_with_a_prebuilt_xla_version_is_paired_at_plan_time(repos):
    """--torch REF --xla VERSION: torch's version.txt is read from the mirror before any
    build, so an unpaired torch_xla version is refused before torch compiles."""
    version = (repos["faketorch"] / "version.txt").read_text().strip()
    sha = head(repos["faketorch"])
    done = run_builder("wheels", "--torch", "main", "--xla", "2.9.0", "--dry-run", config=repos["cfg"])
    assert done.returncode != 0, done.stderr
    assert done.stderr.strip().startswith(
        f"error: torch main ({sha[:12]}, version {version}): torch_xla 2.9.0 is built for torch 2.9.*, "
        f"not torch {version}; use torch 2.9.0"), done.stderr
    assert not (repos["cfg"].parent / "data" / "index").exists()  # nothing fetched or built
