"""torch_xla built the way pytorch/xla builds it (issue "Real upstream, part 2"): xla inside
a torch checkout at its .torch_commit, Bazel run through the real bazelisk at the commit's
.bazelversion (the fake Bazel release comes from the test mirror), gcc from .bazelrc, and
torch never recompiled for xla -- whether its wheel was built earlier or is a prebuilt
wheel in the index."""

from __future__ import annotations

import json
import os
import re
import uuid
import zipfile

import pytest

from builder.examples import commit_change, write_example_repos
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("xla-layout")
    repos = write_example_repos(root / "repos")
    pinned = (repos["fakexla"] / ".torch_commit").read_text().split()[-1]
    commit_change(repos["faketorch"], "csrc/ops.cpp")  # torch main moves past xla's pin
    volume = f"builder-test-xla-{uuid.uuid4().hex[:8]}"
    common = (f'[cache]\nccache = "volume:{volume}"\nbazel = "volume:{volume}-bazel"\n'
              f'[repos]\ntorch = "file://{repos["faketorch"]}"\nxla = "file://{repos["fakexla"]}"\n')
    cfg = write_config(root / "builder.toml", root / "data", common)
    prebuilt = write_config(root / "prebuilt.toml", root / "data-prebuilt", common)
    yield {"cfg": cfg, "prebuilt": prebuilt, "root": root, "pinned": pinned, "common": common, **repos}
    engine.remove_volume(volume)
    engine.remove_volume(f"{volume}-bazel")


def wheels(cfg, *args):
    done = run_builder("wheels", "--json", *args, config=cfg)
    assert done.returncode == 0, done.stderr
    return {w["recipe"]: w for w in json.loads(done.stdout)["wheels"]}, done.stderr


def torch_source(index, filename):
    manifest = json.loads((index / "files" / f"{filename}.manifest.json").read_text())
    materials = manifest["predicate"]["buildDefinition"]["resolvedDependencies"]
    return next(m for m in materials if m["name"] == "checkout:torch")["digest"]["gitCommit"]


@pytest.fixture(scope="module")
def first(env):
    return wheels(env["cfg"], "--xla", "main")


def test_xla_alone_builds_the_pinned_torch_then_xla_inside_its_checkout(env, first):
    built, stderr = first
    assert built["torch"]["status"] == "built" and built["torch"]["source_sha"] == env["pinned"]
    assert built["xla"]["status"] == "built"
    index = env["root"] / "data" / "index"
    assert torch_source(index, built["xla"]["filename"]) == env["pinned"]
    log = open(built["xla"]["log"]).read()
    # the real bazelisk fetched .bazelversion's Bazel from the mirror; setup.py called it as upstream's does
    assert re.search(r"Downloading http://127\.0\.0\.1:\d+/7\.4\.1/bazel-7\.4\.1-linux-x86_64", log), log[-2000:]
    assert "bazel build //:_XLAC.so --symlink_prefix=" in log
    with zipfile.ZipFile(index / "files" / built["xla"]["filename"]) as wheel:
        options = wheel.read("torch_xla/bazel_options.txt").decode()
        version_py = wheel.read("torch_xla/version.py").decode()
    assert "# compiler: gcc gcc (Debian 12.2.0" in options  # .bazelrc's --action_env=CC=gcc, not $CC
    assert "--disk_cache=/bazel-cache/disk" in options  # BAZEL_DISK_CACHE_PATH (pytorch/xla#9695)
    # xla saw torch at ../ (WORKSPACE's PYTORCH_LOCAL_DIR): the checkout at the pinned commit
    assert f"__torch_gitrev__ = '{env['pinned']}'" in version_py


def test_rerun_is_a_no_op(env, first):
    again, stderr = wheels(env["cfg"], "--xla", "main")
    assert again["torch"]["status"] == "reused" and again["xla"]["status"] == "reused"
    assert again["xla"]["sha256"] == first[0]["xla"]["sha256"]
    assert "building in" not in stderr


def test_only_xla_changed_rebuilds_xla_and_reuses_the_torch_built_earlier(env, first):
    # on a branch of its own: master (what --xla main resolves to) stays for the other tests
    commit_change(env["fakexla"], "torch_xla/csrc/xla_kernel_001.cpp", branch="only-xla")
    after, stderr = wheels(env["cfg"], "--xla", "only-xla")
    assert after["torch"]["status"] == "reused" and after["torch"]["sha256"] == first[0]["torch"]["sha256"]
    assert after["xla"]["status"] == "built"
    assert "torch: building" not in stderr  # no torch compile step ran


def bazel_record(step):
    """The fake Bazel's record of a build's caches, from the step's log (its INFO lines, as
    '#' lines) and the options it ran with: kept out of the wheel, whose bytes must not
    depend on what the caches held."""
    text = open(step["log"]).read()
    state = re.findall(r"^INFO: ((?:startup|output base|repository cache|external @).*)$", text, re.M)
    options = re.findall(r"^INFO: option: (.*)$", text, re.M)
    return "".join(f"# {line}\n" for line in state) + "".join(f"{line}\n" for line in options)


def test_a_second_build_reuses_bazels_output_base_and_fetches_nothing(env, first):
    """The output base and the repository cache live on the Bazel cache volume: a build
    after a one-file change finds the external repositories in the output base (nothing
    downloaded, the analysis and action cache of the last build there), and `builder
    cache stats` shows the trees."""
    uid = os.getuid()
    base = f"/bazel-cache/root/uid-{uid}/base-0"
    cold = bazel_record(first[0]["xla"])
    assert f"# startup: --output_user_root=/bazel-cache/root/uid-{uid}\n" in cold
    assert f"# startup: --output_base={base}\n" in cold
    assert f"# output base: {base} (new)\n" in cold
    assert "# repository cache: /bazel-cache/repos\n" in cold and "--repository_cache=/bazel-cache/repos" in cold
    assert "# external @com_nlohmann_json: downloaded\n# external @xla: downloaded\n" in cold
    commit_change(env["fakexla"], "torch_xla/csrc/xla_kernel_004.cpp", branch="second-build")
    after, _ = wheels(env["cfg"], "--xla", "second-build")
    assert after["xla"]["status"] == "built"
    warm = bazel_record(after["xla"])
    assert re.search(rf"^# output base: {base} \(reused after \d+ builds\)$", warm, re.M), warm
    assert ("# external @com_nlohmann_json: up to date in the output base\n"
            "# external @xla: up to date in the output base\n") in warm
    assert "downloaded" not in warm
    done = run_builder("cache", "stats", "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr
    sizes = json.loads(done.stdout)["bazel"]["sizes_bytes"]
    assert set(sizes) == {"disk cache", "repository cache", "output user roots", "bazelisk downloads"}
    assert all(sizes[name] > 0 for name in sizes), sizes


@pytest.fixture(scope="module")
def prebuilt(env, first):
    """The torch wheel built first, imported into a second data dir's index: a prebuilt torch."""
    torch_wheel = env["root"] / "data" / "index" / "files" / first[0]["torch"]["filename"]
    run_builder("index", "add", str(torch_wheel), config=env["prebuilt"], check=True)  # with its dependencies
    return first[0]["torch"]["version"]


def test_prebuilt_torch_wheel_in_the_index_is_not_recompiled(env, prebuilt):
    built, stderr = wheels(env["prebuilt"], "--torch", prebuilt, "--xla", "main")
    assert built["torch"]["status"] == "prebuilt"
    assert built["xla"]["status"] == "built"
    assert "torch: building" not in stderr
    # the torch checkout came from the wheel's own torch/version.py git_version
    assert torch_source(env["root"] / "data-prebuilt" / "index", built["xla"]["filename"]) == env["pinned"]


def test_bazel_that_cannot_be_downloaded_is_one_clear_line(env, prebuilt):
    dead = "http://127.0.0.1:9"  # nothing listens on the discard port
    # something to build (the mirror is unkeyed), on a branch of its own
    sha = commit_change(env["fakexla"], "torch_xla/csrc/xla_kernel_003.cpp", branch="dead-mirror")
    cfg = env["root"] / "dead-mirror.toml"
    cfg.write_text(env["prebuilt"].read_text().replace("[bazel]\nbase_url", f'[bazel]\nbase_url = "{dead}"\n#'))
    done = run_builder("wheels", "--torch", prebuilt, "--xla", "dead-mirror", config=cfg)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"error: building torch_xla from {sha[:12]} failed: bazelisk could not download Bazel 7.4.1 (the commit's "
        f".bazelversion) from {dead}/7.4.1/bazel-7.4.1-linux-x86_64; check that the mirror [bazel] base_url = "
        f"'{dead}' serves 7.4.1/bazel-7.4.1-linux-x86_64; see the log "), last


def test_any_uid_builds_xla(env, prebuilt):
    """A uid with no passwd entry: Bazel needs a user name ($USER, set by builder) and
    write access to the Bazel cache volume."""
    commit_change(env["fakexla"], "torch_xla/csrc/xla_kernel_002.cpp", branch="any-uid")
    cfg = env["root"] / "uid.toml"
    cfg.write_text(env["prebuilt"].read_text() + '[build]\nuser = "4242:4242"\n')
    built, _ = wheels(cfg, "--torch", prebuilt, "--xla", "any-uid")
    assert built["xla"]["status"] == "built"  # the fake Bazel, like Bazel, fails without a user name
    # its own output user root (uid-4242), a new output base, and the shared repository
    # cache: what declares a sha256 is found there; OpenXLA, declared without one as upstream
    # declares it, is downloaded again
    record = bazel_record(built["xla"])
    assert "# output base: /bazel-cache/root/uid-4242/base-0 (new)\n" in record
    assert "# external @com_nlohmann_json: repository cache hit\n# external @xla: downloaded\n" in record
