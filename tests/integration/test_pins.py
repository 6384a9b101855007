"""Pairing torch_xla with its torch at plan time (issue "Real upstream, part 2", item 3):
xla's .torch_commit picks the torch, a different --torch is refused unless
--torch-unpinned, and source versions must pair. Everything here is decided before any
Docker call, so these run the real CLI with --dry-run on fixture repos."""

from __future__ import annotations

import json
import subprocess

import pytest

from builder.examples import commit_change, head_sha, write_example_repos
from tests.conftest import run_builder, write_config


@pytest.fixture
def repos(tmp_path):
    repos = write_example_repos(tmp_path / "repos")
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data",
                       f'[repos]\ntorch = "file://{repos["faketorch"]}"\nxla = "file://{repos["fakexla"]}"\n')
    return {"cfg": cfg, **repos}


def error_line(done) -> str:
    """The run's last stderr line: the error (mirror clone progress lines come before it)."""
    lines = done.stderr.strip().splitlines()
    assert [ln for ln in lines if ln.startswith("error:")] == lines[-1:], done.stderr  # one error, last
    return lines[-1]


def pinned_commit(repos) -> str:
    return (repos["fakexla"] / ".torch_commit").read_text().split()[-1]


def side_branch(repo, name: str, start: str) -> None:
    """A torch branch off ``start`` (commit_change then commits on it)."""
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", name, start], check=True)


def test_xla_main_is_the_default_branch_with_its_pinned_torch(repos):
    """pytorch/xla has no branch main: --xla main takes master, with a note; torch comes
    from .torch_commit (the C++17 commit before torch main) and the pair's versions
    differ as upstream's do (torch 2.99.0a0, torch_xla 2.98.0): accepted, with a note."""
    pinned, xla_sha = pinned_commit(repos), head_sha(repos["fakexla"])
    assert pinned != head_sha(repos["faketorch"])  # torch main is past the pin
    done = run_builder("wheels", "--xla", "main", "--dry-run", "--json", config=repos["cfg"])
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["notes"] == [
        f"repos/fakexla has no branch main; using its default branch master at {xla_sha[:7]}",
        f"xla master ({xla_sha[:12]}) pins torch {pinned[:12]} (version 2.99.0a0) and declares torch_xla 2.98.0: "
        "upstream's own pair, built as pinned (upstream's CI labels both 2.98.0: infra/ansible/config/vars.yaml "
        "package_version); each wheel keeps its repository's version"]
    wheels = {w["name"]: w for w in plan["wheels"]}
    assert (wheels["torch"]["sha"], wheels["xla"]["sha"], wheels["xla"]["ref"]) == (pinned, xla_sha, "master")
    text = run_builder("wheels", "--xla", "master", "--dry-run", config=repos["cfg"])
    assert text.returncode == 0, text.stderr
    assert f"# torch: {pinned} = {pinned} (file://{repos['faketorch']})" in text.stdout
    assert "has no branch" not in text.stdout  # master named: nothing to say about it
    assert "#   backend scikit_build_core.build; build requirements from requirements-build.txt, pyproject.toml" \
        in text.stdout
    assert "#   Bazel 7.4.1 (.bazelversion) through bazelisk 1.28.1, from http://127.0.0.1:" in text.stdout


COMMANDS_THAT_WORK = ("build torch alone (builder wheels --torch main), xla with the torch it pins "
                      "(builder wheels --xla master), or a release pair (builder wheels --torch 2.9.0 --xla 2.9.0)")


@pytest.mark.parametrize("extra", [(), ("--torch-unpinned",)], ids=["pinned", "unpinned"])
def test_torch_main_with_xla_main_is_refused_for_its_cxx_standard(repos, extra):
    """The headline command against upstream's state: torch main needs C++20, xla master
    compiles as C++17. Refused at planning (exit 2), --torch-unpinned or not, nothing made."""
    torch_sha, xla_sha = head_sha(repos["faketorch"]), head_sha(repos["fakexla"])
    done = run_builder("wheels", "--torch", "main", "--xla", "main", *extra, "--dry-run", config=repos["cfg"])
    assert done.returncode == 2, done.stderr
    assert error_line(done) == (
        f"error: torch main ({torch_sha[:12]}) needs C++20 (CMakeLists.txt, its headers), but xla master "
        f"({xla_sha[:12]}) compiles with C++17 (.bazelrc): this pair cannot be compiled, --torch-unpinned or not; "
        + COMMANDS_THAT_WORK)
    assert not (repos["cfg"].parent / "data" / "index").exists()


def test_unknown_cxx_standard_on_one_side_goes_on_with_a_warning(repos):
    rc = repos["fakexla"] / ".bazelrc"
    commit_change(repos["fakexla"], ".bazelrc", rc.read_text().replace("build --cxxopt=-std=c++17\n", ""))
    done = run_builder("wheels", "--xla", "master", "--dry-run", "--json", config=repos["cfg"])
    assert done.returncode == 0, done.stderr
    assert (f"C++ standard not stated by xla master ({head_sha(repos['fakexla'])[:12]}) (CMakeLists.txt, "
            "torch/csrc/api/include/torch/all.h / .bazelrc): the pair is not checked; a mismatch would fail at "
            "compile time") in json.loads(done.stdout)["notes"]


def test_torch_other_than_the_pin_is_refused_then_accepted_with_the_override(repos):
    pinned = pinned_commit(repos)
    side_branch(repos["faketorch"], "dev", pinned)
    moved = commit_change(repos["faketorch"], "csrc/ops.cpp")  # a C++17 torch past the pin
    xla_sha = head_sha(repos["fakexla"])
    done = run_builder("wheels", "--torch", "dev", "--xla", "master", "--dry-run", config=repos["cfg"])
    assert done.returncode == 2
    assert error_line(done) == (
        f"error: --torch dev is {moved[:12]}, but xla master ({xla_sha[:12]}) pins torch {pinned} in .torch_commit; "
        "drop --torch to build the pinned torch, or add --torch-unpinned to build against dev anyway")
    done = run_builder("wheels", "--torch", "dev", "--xla", "master", "--torch-unpinned", "--dry-run",
                       config=repos["cfg"])
    assert done.returncode == 0, done.stderr
    assert f"# torch: dev = {moved}" in done.stdout


def test_unpinned_torch_of_another_series_than_the_pin_is_refused(repos):
    pinned = pinned_commit(repos)
    side_branch(repos["faketorch"], "next", pinned)
    bumped = commit_change(repos["faketorch"], "version.txt", "2.100.0a0\n")
    done = run_builder("wheels", "--torch", "next", "--xla", "master", "--torch-unpinned", "--dry-run",
                       config=repos["cfg"])
    assert done.returncode == 2
    assert error_line(done) == (
        f"error: xla master ({head_sha(repos['fakexla'])[:12]}) with torch next ({bumped[:12]}): "
        "torch 2.100.0a0 is not "
        f"of the 2.99 series xla builds against (its .torch_commit names {pinned[:12]}, version 2.99.0a0); use a "
        "torch 2.99 commit, or drop --torch to build the pinned one")
    assert "Traceback" not in done.stderr


def test_prebuilt_torch_past_the_last_xla_release_is_refused_naming_it(repos):
    done = run_builder("wheels", "--torch", "2.10.0", "--xla", "2.9.0", "--dry-run", config=repos["cfg"])
    assert done.returncode != 0
    assert error_line(done) == ("error: torch_xla 2.9.0 is built for torch 2.9.*, not torch 2.10.0; use torch "
                                   "2.9.0 (e.g. --torch 2.9.0); torch_xla 2.9.0 is the last release (none exists "
                                   "for torch 2.10)")


def test_source_torch_with_a_prebuilt_xla_version_is_paired_at_plan_time(repos):
    """--torch REF --xla VERSION: torch's version.txt is read from the mirror before any
    build, so an unpaired torch_xla version is refused before torch compiles."""
    version = (repos["faketorch"] / "version.txt").read_text().strip()
    sha = head_sha(repos["faketorch"])
    done = run_builder("wheels", "--torch", "main", "--xla", "2.9.0", "--dry-run", config=repos["cfg"])
    assert done.returncode != 0, done.stderr
    assert error_line(done).startswith(
        f"error: torch main ({sha[:12]}, version {version}): torch_xla 2.9.0 is built for torch 2.9.*, "
        f"not torch {version}; use torch 2.9.0"), done.stderr
    assert not (repos["cfg"].parent / "data" / "index").exists()  # nothing fetched or built
