"""Bazel keeps its work (issue "Real upstream, part 3", item 5): the XLA step's ~/.bazelrc
gives Bazel a persistent output user root, an output base of its own (a slot held by a
file lock, so two concurrent builds never share one: Bazel's server lock) and the shared
repository cache; the fake Bazel reads those lines as Bazel does and fetches its
external repositories through them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from builder.caches.bazel import du_script, parse_du
from builder.examples import example_dir
from builder.recipes import RECIPES, BuildContext
from builder.recipes.xla import (
    BAZEL_OUTPUT_ROOTS,
    BAZEL_REPOSITORY_CACHE,
    bazel_cache_rc_lines,
)


@pytest.fixture(scope="module")
def fake_bazel():
    from tests.unit.test_examples import load

    return load(example_dir("fakexla").parent / "fake_bazel.py", "fakexla_fake_bazel")


def run_lines(tmp_path: Path, home: Path, then: str = "") -> subprocess.Popen:
    """The recipe's lines run by sh, as the build container's script runs them."""
    home.mkdir(parents=True, exist_ok=True)
    script = "\n".join(["set -eu", *bazel_cache_rc_lines(str(tmp_path / "root"), str(tmp_path / "repos")), then])
    return subprocess.Popen(["sh", "-c", script], env={**os.environ, "HOME": str(home)}, stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE, text=True)


def test_the_xla_script_gives_bazel_the_cache_volume():
    recipe = RECIPES["xla"]
    script = recipe.script(BuildContext(jobs=2, source_date_epoch=1, bazel_version="7.4.1",
                                        bazel_remote="http://cache:8080/bazel"))
    lines = script.splitlines()
    assert f"mkdir -p /bazel-cache/disk /bazel-cache/bazelisk {BAZEL_REPOSITORY_CACHE}" in lines
    rc = bazel_cache_rc_lines()
    start = lines.index(rc[0])
    assert lines[start:start + len(rc)] == rc
    assert rc[0] == f"bazel_root={BAZEL_OUTPUT_ROOTS}/uid-$(id -u)"
    # the remote cache lines come after, appended: neither overwrites the other
    remote = script.index("build --remote_cache=http://cache:8080/bazel")
    assert remote > script.index(rc[-1])
    assert script[remote:].split("\n", 2)[1] == "build --remote_upload_local_results"
    assert script[remote:].split("\n", 3)[2] == "' >> \"$HOME/.bazelrc\""
    assert script.count('> "$HOME/.bazelrc"') == script.count('>> "$HOME/.bazelrc"') == 2
    assert lines.index(rc[-1]) < lines.index("cd /src/pytorch/xla")  # before the build starts


def test_a_plain_extension_build_gets_no_output_base():
    script = RECIPES["xla"].script(BuildContext(jobs=2, source_date_epoch=1))
    assert "--output_user_root" not in script and "flock" not in script


def test_the_rc_lines_reach_bazel_as_startup_and_build_options(tmp_path, fake_bazel):
    home = tmp_path / "home"
    done = run_lines(tmp_path, home)
    out, _ = done.communicate(timeout=60)
    assert done.returncode == 0
    uid = os.getuid()
    root = tmp_path / "root" / f"uid-{uid}"
    assert out.strip() == f"builder: Bazel output base {root}/base-0, repository cache {tmp_path / 'repos'}"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    entries = [e for rc in fake_bazel.rc_files(workspace, str(home), system_rc=tmp_path / "none")
               for e in fake_bazel.read_rc(rc, workspace, optional=True)]
    startup = fake_bazel.startup_options(entries, [])
    assert startup == {"output_user_root": str(root), "output_base": f"{root}/base-0"}
    assert fake_bazel.output_base(workspace, startup) == root / "base-0"
    assert fake_bazel.settings_from_options(fake_bazel.expand_options(entries, [])).repository_cache == str(
        tmp_path / "repos")


def test_a_concurrent_build_takes_another_output_base(tmp_path):
    root = tmp_path / "root" / f"uid-{os.getuid()}"
    first = run_lines(tmp_path, tmp_path / "a", then="echo holding; read _")  # holds its slot until told
    assert first.stdout.readline().endswith(f"{root}/base-0, repository cache {tmp_path / 'repos'}\n")
    assert first.stdout.readline() == "holding\n"
    second = run_lines(tmp_path, tmp_path / "b")
    assert second.communicate(timeout=60)[0].split(",")[0].endswith(f"{root}/base-1")
    assert (tmp_path / "b" / ".bazelrc").read_text().splitlines()[1] == f"startup --output_base={root}/base-1"
    first.communicate("go\n", timeout=60)  # that build ends: its lock goes with it
    third = run_lines(tmp_path, tmp_path / "c")  # the slot is free again: the next build reuses base-0
    assert third.communicate(timeout=60)[0].split(",")[0].endswith(f"{root}/base-0")


def test_bazel_server_lock_makes_a_second_client_wait(tmp_path, fake_bazel):
    import fcntl

    base = tmp_path / "base"
    held = fake_bazel.lock_output_base(base)
    other = open(base / "lock", "a+")  # noqa: SIM115
    with pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    held.close()
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released with its holder
    other.close()


def test_external_repositories_come_from_the_output_base_then_the_repository_cache(tmp_path, fake_bazel):
    archives = {a.name: a for a in fake_bazel.load_archives(example_dir("fakexla"))}
    assert set(archives) == {"com_nlohmann_json", "xla"}
    assert archives["xla"].sha256 == ""  # as upstream's WORKSPACE declares OpenXLA
    cache = tmp_path / "repos"
    first, again, fresh = tmp_path / "base-0", tmp_path / "base-0", tmp_path / "base-1"
    assert {n: fake_bazel.fetch_archive(a, first, cache) for n, a in archives.items()} == {
        "com_nlohmann_json": "downloaded", "xla": "downloaded"}
    assert {n: fake_bazel.fetch_archive(a, again, cache) for n, a in archives.items()} == {
        "com_nlohmann_json": "up to date in the output base", "xla": "up to date in the output base"}
    # a new output base: the repository cache finds what declares a sha256, the rest is downloaded again
    assert {n: fake_bazel.fetch_archive(a, fresh, cache) for n, a in archives.items()} == {
        "com_nlohmann_json": "repository cache hit", "xla": "downloaded"}
    wrong = fake_bazel.Archive("x", ("https://example.invalid/x.tgz",), "0" * 64)
    with pytest.raises(fake_bazel.FakeBazelError, match="Checksum was [0-9a-f]{64} but wanted 0{64}"):
        fake_bazel.fetch_archive(wrong, fresh, cache)


def test_bazel_cache_sizes_parsed_from_du():
    layout = RECIPES["xla"].bazel_cache_layout()
    assert layout == {"disk cache": "/bazel-cache/disk", "repository cache": BAZEL_REPOSITORY_CACHE,
                      "output user roots": BAZEL_OUTPUT_ROOTS, "bazelisk downloads": "/bazel-cache/bazelisk"}
    text = "2048\t/bazel-cache/disk\n0\t/bazel-cache/repos\n10\t/bazel-cache/root\n"
    assert parse_du(text, layout) == {"disk cache": 2048 * 1024, "repository cache": 0,
                                      "output user roots": 10240, "bazelisk downloads": 0}
    script = du_script(layout)
    assert script.count("du -sk") == 4 and "du -sk /bazel-cache/root" in script


def test_output_roots_are_kept_out_of_the_permission_walk(tmp_path):
    from builder.caches.volumes import bazel_share_script

    recipe = RECIPES["xla"]
    script = bazel_share_script(recipe.bazel_cache_dirs(), recipe.bazel_user_dirs())
    assert f"chmod 1777 {BAZEL_OUTPUT_ROOTS}" in script
    # run it on a copy of the layout: the walk changes the shared trees, not an output base
    rooted = script.replace("/bazel-cache", str(tmp_path))
    (tmp_path / "disk").mkdir()
    (tmp_path / "disk" / "entry").write_text("x")
    (tmp_path / "disk" / "entry").chmod(0o600)
    base = tmp_path / "root" / "uid-1" / "base-0"
    base.mkdir(parents=True)
    (base / "install").write_text("x")
    (base / "install").chmod(0o555)
    subprocess.run(["sh", "-c", rooted], check=True)
    assert (tmp_path / "disk" / "entry").stat().st_mode & 0o777 == 0o666
    assert (base / "install").stat().st_mode & 0o777 == 0o555  # untouched
    assert (tmp_path / "root").stat().st_mode & 0o7777 == 0o1777
