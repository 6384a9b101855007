"""Mirrors of branches and tags only (issue "Real upstream, part 3", item 4), with real git
on file:// fixture repos: fakexla carries a few hundred refs/pull/N/head (as pytorch/xla
carries 7,148); a mirror takes none of them, an old `git clone --mirror` is migrated on
its next use, a commit that is on no branch is fetched by itself, and a remote that hangs
is ended by the stall timeout instead of a wall clock."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from builder.config import load_config
from builder.errors import ConfigError, FetchStalled
from builder.examples import PULL_REQUESTS, write_example_repo
from builder.run.progress import Reporter
from builder.source.gitprogress import FetchStatus, fetch_options, fetch_options_now, parse_progress
from builder.source.mirror import HEADS_AND_TAGS, KEPT_COMMITS, checkout, migrate_mirror, mirror_path, update_mirror


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, capture_output=True,
                          text=True, check=True).stdout.strip()


def refs(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)").split()


@pytest.fixture(scope="module")
def xla(tmp_path_factory) -> Path:
    return write_example_repo("fakexla", tmp_path_factory.mktemp("repos") / "fakexla", torch_commit="0" * 40)


def test_the_fixture_has_pull_request_refs_on_no_branch(xla):
    pulls = [r for r in refs(xla) if r.startswith("refs/pull/")]
    assert len(pulls) == PULL_REQUESTS == 300
    assert git(xla, "branch", "--contains", "refs/pull/17/head") == ""  # on no branch, like a PR's head


def test_a_new_mirror_holds_branches_and_tags_only(xla, tmp_path):
    seen: list[tuple[str, FetchStatus | None]] = []
    with fetch_options(progress=lambda label, status: seen.append((label, status))):
        mirror = update_mirror(tmp_path, f"file://{xla}")
    assert refs(mirror) == sorted(r for r in refs(xla) if r.startswith(("refs/heads/", "refs/tags/")))
    assert not [r for r in refs(mirror) if r.startswith("refs/pull/")]
    assert git(mirror, "config", "--get-all", "remote.origin.fetch").split() == list(HEADS_AND_TAGS)
    assert git(mirror, "symbolic-ref", "HEAD") == git(xla, "symbolic-ref", "HEAD")
    # the objects only a pull request reaches were not transferred
    pr = git(xla, "rev-parse", "refs/pull/17/head")
    assert subprocess.run(["git", "cat-file", "-e", pr], cwd=mirror).returncode != 0
    # git's --progress reached the display, and the end of the clone was signalled
    assert any(s is not None and s.phase == "Counting objects" and s.total for _, s in seen)
    assert seen[-1] == ("fakexla", None)
    assert not list(tmp_path.glob("*.partial-*"))


def test_a_commit_on_no_branch_is_fetched_by_itself_and_kept(xla, tmp_path):
    url = f"file://{xla}"
    update_mirror(tmp_path, url)
    pr = git(xla, "rev-parse", "refs/pull/42/head")
    mirror = update_mirror(tmp_path, url, pr)
    assert git(mirror, "cat-file", "-t", pr) == "commit"
    extra = [r for r in refs(mirror) if not r.startswith(("refs/heads/", "refs/tags/"))]
    assert extra == [f"{KEPT_COMMITS}{pr}"]  # exactly that SHA; no refs/pull/*
    tree = checkout(mirror, url, pr, tmp_path / "work", submodules=False)
    assert (tree.path / "pull-requests" / "42.txt").is_file()


def test_an_old_full_mirror_is_migrated_on_its_next_use(xla, tmp_path):
    url = f"file://{xla}"
    old = mirror_path(tmp_path, url)
    git(tmp_path, "clone", "--mirror", "--quiet", url, str(old))  # what builder did before
    assert len([r for r in refs(old) if r.startswith("refs/pull/")]) == 300
    pr = git(xla, "rev-parse", "refs/pull/5/head")
    head = git(xla, "rev-parse", "HEAD")
    assert update_mirror(tmp_path, url, head) == old  # has the commit: no fetch, but migrated
    assert not [r for r in refs(old) if not r.startswith(("refs/heads/", "refs/tags/"))]
    assert git(old, "config", "--get-all", "remote.origin.fetch").split() == list(HEADS_AND_TAGS)
    assert subprocess.run(["git", "config", "remote.origin.mirror"], cwd=old).returncode == 1  # unset
    assert subprocess.run(["git", "cat-file", "-e", pr], cwd=old).returncode != 0  # repacked without it
    assert migrate_mirror(old) == 0  # once
    # the next fetch follows the new refspecs: a new branch arrives, still no pull request
    git(xla, "branch", "r2.99", head)
    try:
        update_mirror(tmp_path, url)
        assert "refs/heads/r2.99" in refs(old) and not [r for r in refs(old) if r.startswith("refs/pull/")]
    finally:
        git(xla, "branch", "-D", "r2.99")


def hanging_remote(tmp_path: Path) -> tuple[Path, Path]:
    """An ssh command that connects and then says nothing (a dead link): its pid goes to a file."""
    pid_file = tmp_path / "remote.pid"
    script = tmp_path / "hang"
    script.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    script.chmod(0o755)
    return script, pid_file


def assert_ended(pid_file: Path) -> None:
    pid = int(pid_file.read_text())
    for _ in range(100):  # SIGTERM was sent before the error was raised; wait for the reaper
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        subprocess.run(["sleep", "0.1"])
    pytest.fail(f"the hanging remote (pid {pid}) still runs")


def test_a_clone_that_stalls_is_ended_with_one_error(tmp_path, monkeypatch):
    script, pid_file = hanging_remote(tmp_path)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(script))
    mirrors = tmp_path / "mirrors"
    with fetch_options(stall_timeout=1), pytest.raises(FetchStalled) as caught:
        update_mirror(mirrors, "ssh://git.invalid/pytorch/xla.git")
    assert caught.value.message == "cloning ssh://git.invalid/pytorch/xla.git stalled: git printed nothing for 1 s"
    assert "[git] stall_timeout" in caught.value.hint and caught.value.exit_code == 1
    assert_ended(pid_file)
    assert list(mirrors.iterdir()) == []  # no half mirror left behind


def test_a_fetch_that_stalls_is_ended_too(xla, tmp_path):
    url = f"file://{xla}"
    mirror = update_mirror(tmp_path, url)
    script, pid_file = hanging_remote(tmp_path)
    git(mirror, "config", "remote.origin.uploadpack", str(script))  # the remote now hangs
    with fetch_options(stall_timeout=1), pytest.raises(FetchStalled, match=r"^fetching file://.* stalled"):
        update_mirror(tmp_path, url, "f" * 40)  # a commit it lacks: a fetch
    assert_ended(pid_file)


def test_git_progress_lines_parsed():
    assert parse_progress("Receiving objects:  45% (1234/2742), 12.34 MiB | 3.21 MiB/s") == FetchStatus(
        "Receiving objects", 1234, 2742, "12.34 MiB", "3.21 MiB/s")
    assert parse_progress("remote: Counting objects: 100% (10/10), done.        ") == FetchStatus(
        "Counting objects", 10, 10)
    assert parse_progress("remote: Enumerating objects: 278957, done.") == FetchStatus("Enumerating objects", 278957)
    assert parse_progress("Resolving deltas:  40% (2/5)") == FetchStatus("Resolving deltas", 2, 5)
    assert parse_progress("fatal: unable to access 'x'") is None
    assert parse_progress("remote: Total 41 (delta 0), reused 0 (delta 0), pack-reused 0") is None
    assert FetchStatus("Receiving objects", 1234, 2742, "12.34 MiB", "3.21 MiB/s").describe() == (
        "Receiving objects 45% (1234/2742), 12.34 MiB | 3.21 MiB/s")


def test_fetch_progress_off_a_terminal_is_a_timed_line_per_phase_and_tenth():
    buffer = io.StringIO()
    reporter = Reporter(Console(file=buffer, force_terminal=False, width=200), {})
    reporter.fetch("xla.git", FetchStatus("Enumerating objects", 1000))
    for done in range(1, 1001):
        reporter.fetch("xla.git", FetchStatus("Receiving objects", done, 1000, f"{done / 100:.2f} MiB", "1.00 MiB/s"))
    reporter.fetch("xla.git", None)
    reporter.close()
    lines = [line.split("] ", 1)[1] for line in buffer.getvalue().splitlines()]
    assert lines[0] == "xla.git: Enumerating objects 1000"
    assert lines[1] == "xla.git: Receiving objects 0% (1/1000), 0.01 MiB | 1.00 MiB/s"
    assert lines[-1] == "xla.git: Receiving objects 100% (1000/1000), 10.00 MiB | 1.00 MiB/s"
    assert len(lines) == 12  # the phase start, then each tenth


def test_stall_timeout_is_a_checked_setting(tmp_path):
    assert load_config(None, {}).git.stall_timeout == 600.0
    assert load_config(None, {"BUILDER_GIT_STALL_TIMEOUT": "90"}).git.stall_timeout == 90.0
    with pytest.raises(ConfigError, match=r"git.stall_timeout must be between 1 and 86400, got 0"):
        load_config(None, {"BUILDER_GIT_STALL_TIMEOUT": "0"})
    path = tmp_path / "builder.toml"
    path.write_text("[git]\nstall_timeout = \"soon\"\n")
    with pytest.raises(ConfigError, match=r"builder.toml:2: git.stall_timeout must be a number"):
        load_config(path, {})


def test_the_cli_applies_the_configured_stall_timeout(tmp_path, monkeypatch):
    from builder.cli import common

    monkeypatch.setitem(common._state, "config_path", None)
    monkeypatch.setenv("BUILDER_GIT_STALL_TIMEOUT", "75")
    monkeypatch.chdir(tmp_path)
    with fetch_options():  # the setting lasts for the command; restored after this test
        common.get_config()
        assert fetch_options_now().stall_timeout == 75.0
    assert os.environ["BUILDER_GIT_STALL_TIMEOUT"] == "75"
