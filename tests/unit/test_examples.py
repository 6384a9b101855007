"""The fixture repos (builder/examples): deterministic git repos, submodules, env logic.

Nothing here compiles; building the fixtures is for the integration tests.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder import examples
from builder.examples import (
    EXAMPLES,
    ExampleError,
    commit_change,
    example_dir,
    write_example_repo,
    write_example_repos,
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build_util():
    return load(example_dir("fakexla") / "build_util.py", "fakexla_build_util")


@pytest.fixture(scope="module")
def fake_bazel():
    return load(example_dir("fakexla").parent / "fake_bazel.py", "fakexla_fake_bazel")


# ------------------------------------------------------------------ repos


@pytest.mark.parametrize("name", EXAMPLES)
def test_same_sha_wherever_written(tmp_path: Path, name: str) -> None:
    a = write_example_repo(name, tmp_path / "a" / name)
    b = write_example_repo(name, tmp_path / "deeper" / "b" / name)
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    tag = examples.TAGS[name]
    # faketorch's main is one commit past its tag (the C++20 requirement); the others end at it
    tip = "HEAD~1" if name == "faketorch" else "HEAD"
    assert git(a, "rev-parse", f"{tag}^{{commit}}") == git(a, "rev-parse", tip)
    assert git(a, "cat-file", "-t", tag) == "tag"  # annotated, like upstream release tags
    assert git(a, "status", "--porcelain") == ""
    assert (
        git(a, "log", "-1", "--format=%an <%ae> %at")
        == f"{examples.GIT_NAME} <{examples.GIT_EMAIL}> 1704067200"
    )


def test_default_branches_are_upstreams(tmp_path: Path) -> None:
    """pytorch/xla's default branch is master and it has no main; pytorch's is main."""
    xla = write_example_repo("fakexla", tmp_path / "fakexla")
    torch = write_example_repo("faketorch", tmp_path / "faketorch")
    assert git(xla, "symbolic-ref", "--short", "HEAD") == "master"
    assert git(xla, "branch", "--list", "main") == ""
    assert git(torch, "symbolic-ref", "--short", "HEAD") == "main"


def test_torch_main_needs_cxx20_and_xla_pins_the_cxx17_commit(tmp_path: Path) -> None:
    repos = examples.write_example_repos(tmp_path / "repos")
    torch, xla = repos["faketorch"], repos["fakexla"]
    pinned = (xla / ".torch_commit").read_text().splitlines()[-1]
    assert pinned == git(torch, "rev-parse", "v2.99.0^{commit}") == git(torch, "rev-parse", "main~1")
    assert "set(CMAKE_CXX_STANDARD 20)" in (torch / "CMakeLists.txt").read_text()
    assert "set(CMAKE_CXX_STANDARD 17)" in git(torch, "show", f"{pinned}:CMakeLists.txt")
    assert "__cplusplus < 202002L" in (torch / "include/faketorch/macros.h").read_text()
    assert "-std=c++17" in (xla / ".bazelrc").read_text()
    assert "package_version: 2.98.0" in (xla / "infra/ansible/config/vars.yaml").read_text()
    assert git(torch, "show", f"{pinned}:version.txt") == "2.99.0a0"


def test_branch_name(tmp_path: Path) -> None:
    repo = write_example_repo("fakexla", tmp_path / "fakexla", branch="release")
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "release"


def test_faketorch_submodule(tmp_path: Path) -> None:
    repo = write_example_repo("faketorch", tmp_path / "src" / "faketorch")
    assert (tmp_path / "src" / "fakefmt" / ".git").is_dir()
    gitmodules = (repo / ".gitmodules").read_text()
    assert "path = third_party/fakefmt" in gitmodules
    assert "url = ../fakefmt" in gitmodules
    mode, sha, *_ = git(repo, "ls-files", "-s", "third_party/fakefmt").split()
    assert mode == "160000"
    assert sha == git(tmp_path / "src" / "fakefmt", "rev-parse", "HEAD")
    assert (repo / "third_party" / "fakefmt" / "include" / "fakefmt" / "format.h").is_file()

    # A clone resolves ../fakefmt against its origin, as builder's fetch will.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert not (clone / "third_party" / "fakefmt" / "include").exists()
    git(clone, "submodule", "update", "--init", "--recursive")
    assert (clone / "third_party" / "fakefmt" / "include" / "fakefmt" / "format.h").is_file()


def test_faketorch_build_uses_the_submodule_header() -> None:
    cmake = (example_dir("faketorch") / "CMakeLists.txt").read_text()
    assert "third_party/fakefmt/include" in cmake
    assert "#include <fakefmt/format.h>" in (example_dir("faketorch") / "csrc" / "ops.cpp").read_text()
    assert not (example_dir("faketorch") / "third_party").exists()  # only ever a submodule


def test_absolute_submodule_url(tmp_path: Path) -> None:
    fmt = write_example_repo("faketorch", tmp_path / "one" / "faketorch").parent / "fakefmt"
    url = fmt.as_uri()
    repo = write_example_repo(
        "faketorch", tmp_path / "two" / "faketorch", submodule_urls={"third_party/fakefmt": url}
    )
    assert f"url = {url}" in (repo / ".gitmodules").read_text()


def test_dotfiles_are_renamed(tmp_path: Path) -> None:
    repos = write_example_repos(tmp_path)
    assert set(repos) == set(EXAMPLES)
    assert (repos["fakexla"] / ".bazelrc").is_file()
    for repo in repos.values():
        assert (repo / ".gitignore").is_file()
        assert not list(repo.rglob("dot-*"))


def test_no_dotfiles_in_package_data() -> None:
    # setuptools' package-data globs skip names starting with '.', so fixtures
    # spell them dot-NAME and write_example_repo renames them.
    root = Path(examples.__file__).parent
    assert [p for p in root.rglob(".*") if "__pycache__" not in p.parts] == []


def test_refuses_non_empty_dest(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("")
    with pytest.raises(ExampleError, match="not empty"):
        write_example_repo("fakexla", tmp_path / "x")
    with pytest.raises(ExampleError, match="unknown example"):
        example_dir("nope")


def test_commit_change(tmp_path: Path) -> None:
    repo = write_example_repo("faketorch", tmp_path / "a" / "faketorch")
    first = git(repo, "rev-parse", "HEAD")
    second = commit_change(repo, "csrc/kernels/kernel_000.cpp")
    assert second != first
    assert git(repo, "rev-parse", "HEAD~1") == first
    assert git(repo, "diff", "--name-only", first, second) == "csrc/kernels/kernel_000.cpp"
    assert (repo / "csrc/kernels/kernel_000.cpp").read_text().endswith(
        f'extern "C" int builder_changed_{first[:12]}(void) {{ return 1; }}\n')
    third = commit_change(repo, "csrc/kernels/kernel_000.cpp")
    assert third not in (first, second)  # the same default change twice still changes the file
    fourth = commit_change(repo, "version.txt", "2.99.1a0\n", message="Bump version")
    assert (repo / "version.txt").read_text() == "2.99.1a0\n"
    assert git(repo, "log", "-1", "--format=%s") == "Bump version"
    assert git(repo, "status", "--porcelain") == ""

    other = write_example_repo("faketorch", tmp_path / "b" / "faketorch")
    assert commit_change(other, "csrc/kernels/kernel_000.cpp") == second  # deterministic
    assert fourth != second
    with pytest.raises(ExampleError):
        commit_change(repo, "no/such/file.cpp")


def test_commit_change_on_a_branch_leaves_the_checked_out_branch(tmp_path: Path) -> None:
    repo = write_example_repo("faketorch", tmp_path / "faketorch")
    main = git(repo, "rev-parse", "HEAD")
    text = (repo / "csrc/kernels/kernel_000.cpp").read_text()
    one = commit_change(repo, "csrc/kernels/kernel_000.cpp", branch="side")
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main" and git(repo, "rev-parse", "HEAD") == main
    assert (repo / "csrc/kernels/kernel_000.cpp").read_text() == text  # the work tree is main's again
    assert git(repo, "rev-parse", "side") == one and git(repo, "rev-parse", "side~1") == main
    two = commit_change(repo, "version.txt", "2.99.1a0\n", branch="side")  # onto the existing branch
    assert git(repo, "rev-parse", "side~1") == one and git(repo, "rev-parse", "side") == two
    assert git(repo, "rev-parse", "main") == main and git(repo, "status", "--porcelain") == ""


def test_examples_are_modest_in_size() -> None:
    for name in (*EXAMPLES, "fakefmt"):
        size = sum(p.stat().st_size for p in example_dir(name).rglob("*") if p.is_file())
        assert size < 1_000_000, name
    kernels = list((example_dir("faketorch") / "csrc" / "kernels").glob("kernel_[0-9]*.cpp"))
    assert 50 <= len(kernels) <= 70


def test_generated_sources_are_committed(tmp_path: Path) -> None:
    # Regenerate into a copy and compare: the committed files are the generator's output.
    gen = load(Path(examples.__file__).parent / "generate_sources.py", "fixture_generate_sources")
    for name in ("faketorch", "fakexla"):
        shutil.copytree(example_dir(name), tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    written = gen.generate(tmp_path)
    for path in written:
        rel = path.relative_to(tmp_path)
        assert path.read_text() == (Path(examples.__file__).parent / rel).read_text(), rel


# ------------------------------------------------------------------ fakexla's Bazel options


def test_bazel_options_default(build_util) -> None:
    assert build_util.bazel_options_from_env({}) == ["--remote_default_exec_properties=cache-silo-key=dev"]


def test_bazel_options_everything(build_util) -> None:
    env = {
        "DEBUG": "1",
        "TPUVM_MODE": "yes",
        "BAZEL_REMOTE_CACHE": "ON",
        "SILO_NAME": "cache-silo-ci",
        "BAZEL_JOBS": "4",
        "BAZEL_VERBOSE": "true",
        "XLA_CUDA": "Y",  # removed upstream (pytorch/xla#9582): no effect
        "XLA_CPU_USE_ACL": "1",
        "BAZEL_DISK_CACHE_PATH": "/bazel-cache/disk",
    }
    assert build_util.bazel_options_from_env(env) == [
        "--config=dbg",
        "--config=tpu",
        "--config=remote_cache",
        "--remote_default_exec_properties=cache-silo-key=cache-silo-ci",
        "--jobs=4",
        "-s",
        "--config=acl",
        "--disk_cache=/bazel-cache/disk",
    ]


def test_bazel_options_false_flags_and_empty_silo(build_util) -> None:
    env = {"DEBUG": "0", "BAZEL_REMOTE_CACHE": "off", "SILO_NAME": "", "BAZEL_JOBS": "", "XLA_CUDA": "no"}
    assert build_util.bazel_options_from_env(env) == []


def test_bazel_options_gcloud_key_file(build_util) -> None:
    sizes = {"/keys/real.json": 2048, "/keys/empty.json": 1}
    with_key = build_util.bazel_options_from_env(
        {"GCLOUD_SERVICE_KEY_FILE": "/keys/real.json", "SILO_NAME": ""}, getsize=sizes.__getitem__
    )
    assert with_key == ["--google_credentials=/keys/real.json", "--config=remote_cache"]
    # A (near-)empty key file means no credentials, and BAZEL_REMOTE_CACHE is then not consulted.
    empty = build_util.bazel_options_from_env(
        {"GCLOUD_SERVICE_KEY_FILE": "/keys/empty.json", "BAZEL_REMOTE_CACHE": "1", "SILO_NAME": ""},
        getsize=sizes.__getitem__,
    )
    assert empty == []


def test_xla_version(build_util) -> None:
    sha = "0123456789abcdef" * 2
    assert build_util.get_build_version(sha, {}) == "2.98.0+git0123456"
    assert build_util.get_build_version(sha, {"TORCH_XLA_VERSION": "2.5.0"}) == "2.5.0+git0123456"
    assert (
        build_util.get_build_version(sha, {"TORCH_XLA_VERSION": "2.5.0", "GIT_VERSIONED_XLA_BUILD": "0"})
        == "2.5.0"
    )


def test_rc_files_reach_the_build(tmp_path: Path, fake_bazel, build_util) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".bazelrc").write_text((example_dir("fakexla") / "dot-bazelrc").read_text())
    (workspace / ".bazelrc.user").write_text("build --jobs=3\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bazelrc").write_text(
        "# builder's cache settings\nbuild --disk_cache=/bazel-cache\nbuild --remote_cache=http://127.0.0.1:9/c\n"
    )
    entries = []
    for rc in fake_bazel.rc_files(workspace, str(home), system_rc=tmp_path / "absent.bazelrc"):
        entries += fake_bazel.read_rc(rc, workspace, optional=True)

    argv = build_util.bazel_options_from_env({"DEBUG": "1", "BAZEL_JOBS": "7"})
    options = fake_bazel.expand_options(entries, argv)
    settings = fake_bazel.settings_from_options(options)
    assert "--disk_cache=/bazel-cache" in options
    assert settings.disk_cache == "/bazel-cache"
    assert settings.remote_cache == "http://127.0.0.1:9/c"
    assert settings.remote_upload_local_results is False  # upstream's default for local builds
    assert settings.compilation_mode == "dbg"  # --config=dbg on the command line beats -c opt in .bazelrc
    assert settings.jobs == 7  # command line beats .bazelrc.user
    assert settings.exec_properties == ["cache-silo-key=dev"]

    remote = fake_bazel.settings_from_options(fake_bazel.expand_options(entries, ["--config=remote_cache"]))
    assert remote.remote_cache.startswith("grpcs://")
    assert remote.remote_upload_local_results is True
    with pytest.raises(fake_bazel.FakeBazelError, match="HTTP cache"):
        fake_bazel.Executor(workspace, remote)
    with pytest.raises(fake_bazel.FakeBazelError, match="not defined"):
        fake_bazel.expand_options(entries, ["--config=nope"])


def test_disk_cache_round_trip(tmp_path: Path, fake_bazel) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "in.txt").write_text("hello\n")
    settings = fake_bazel.Settings(disk_cache=str(tmp_path / "cache" / "bazel"), jobs=1)
    action = fake_bazel.Action(
        ["cp", "in.txt", "out/copy.txt"], [Path("in.txt")], Path("out/copy.txt"), "copy"
    )

    first = fake_bazel.Executor(workspace, settings)
    first.run_all([action])
    assert first.counts == {"disk cache hit": 0, "remote cache hit": 0, "local": 1}
    assert list((tmp_path / "cache" / "bazel" / "ac").glob("??/*"))
    assert list((tmp_path / "cache" / "bazel" / "cas").glob("??/*"))

    (workspace / "out" / "copy.txt").unlink()
    second = fake_bazel.Executor(workspace, settings)
    second.run_all([action])
    assert second.counts["disk cache hit"] == 1
    assert (workspace / "out" / "copy.txt").read_text() == "hello\n"
    assert second.summary() == "INFO: 1 processes: 1 disk cache hit."

    siloed = fake_bazel.Settings(disk_cache=settings.disk_cache, exec_properties=["cache-silo-key=other"])
    third = fake_bazel.Executor(workspace, siloed)
    third.run_all([action])
    assert third.counts["local"] == 1  # another silo, another key


# ------------------------------------------------------------------ faketorch's env knobs


@pytest.fixture
def faketorch_cmake(monkeypatch):
    monkeypatch.syspath_prepend(str(example_dir("faketorch_setuptools")))
    for mod in [m for m in sys.modules if m == "tools" or m.startswith("tools.")]:
        monkeypatch.delitem(sys.modules, mod)
    from tools.setup_helpers import cmake, env  # the fixture's, not an installed 'tools'

    yield cmake, env
    for mod in [m for m in sys.modules if m == "tools" or m.startswith("tools.")]:
        del sys.modules[mod]


def test_faketorch_cmake_defines(faketorch_cmake) -> None:
    cmake, env = faketorch_cmake
    defines = cmake.cmake_defines(
        {
            "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
            "CMAKE_C_COMPILER_LAUNCHER": "ccache",
            "BUILD_TEST": "0",
            "USE_CUDA": "0",
            "MAX_JOBS": "2",
            "REL_WITH_DEB_INFO": "1",
            "HOME": "/root",
        },
        "/src/faketorch",
        "2.99.0a0",
    )
    assert defines["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert defines["CMAKE_C_COMPILER_LAUNCHER"] == "ccache"
    assert defines["BUILD_TEST"] == "0"
    assert defines["USE_CUDA"] == "0"
    assert defines["CMAKE_BUILD_TYPE"] == "RelWithDebInfo"
    assert defines["CMAKE_INSTALL_PREFIX"] == "/src/faketorch/torch"
    assert "MAX_JOBS" not in defines and "HOME" not in defines
    with pytest.raises(SystemExit, match="CMAKE_INSTALL_PREFIX"):
        cmake.cmake_defines({"CMAKE_INSTALL_PREFIX": "/x"}, "/src", "1")

    assert env.cmake_build_type({"DEBUG": "1", "REL_WITH_DEB_INFO": "1"}) == "Debug"
    assert env.cmake_build_type({"DEBUG": "1", "CMAKE_BUILD_TYPE": "MinSizeRel"}) == "MinSizeRel"
    assert env.cmake_build_type({}) == "Release"
    assert env.max_jobs({"MAX_JOBS": "3"}) == "3"


def test_heavy_faketorch_has_the_heavy_kernel_header_in_every_commit(tmp_path: Path) -> None:
    """The tests build the light kernels; heavy=True (benchmarks, tests that interrupt a
    compile) puts the heavy header in every commit (the setuptools-era tag, the pin, main),
    and changes nothing else."""
    light = write_example_repo("faketorch", tmp_path / "light" / "faketorch")
    heavy = write_example_repo("faketorch", tmp_path / "heavy" / "faketorch", heavy=True)
    rel = "csrc/kernels/kernel_common.h"
    light_text = (example_dir("faketorch") / rel).read_text()
    heavy_text = (Path(examples.__file__).parent / "kernel_common_heavy.h").read_text()
    assert "#include <variant>" in heavy_text and "#include" not in light_text
    for ref in ("v2.98.0", "v2.99.0", "main"):
        assert git(light, "show", f"{ref}:{rel}") == light_text.strip(), ref
        assert git(heavy, "show", f"{ref}:{rel}") == heavy_text.strip(), ref
        trees = [dict(line.split("\t")[::-1] for line in git(r, "ls-tree", "-r", ref).splitlines())
                 for r in (light, heavy)]
        assert trees[0].pop(rel) != trees[1].pop(rel) and trees[0] == trees[1], ref


def test_heavy_every_makes_every_nth_kernel_heavy_in_a_namespace_of_its_own(tmp_path: Path) -> None:
    """heavy_every=4 (the tests that interrupt a build): kernel_000, kernel_004, ... include
    the heavy header, put beside the light one under faketorch::detail_heavy; the light
    header and the other kernels are the light ones, in every commit."""
    light = write_example_repo("faketorch", tmp_path / "light" / "faketorch")
    some = write_example_repo("faketorch", tmp_path / "some" / "faketorch", heavy=True, heavy_every=4)
    heavy_text = (Path(examples.__file__).parent / "kernel_common_heavy.h").read_text()
    for ref in ("v2.98.0", "v2.99.0", "main"):
        header = git(some, "show", f"{ref}:csrc/kernels/kernel_heavy.h")
        assert header == heavy_text.replace("namespace faketorch::detail", "namespace faketorch::detail_heavy").strip()
        assert git(some, "show", f"{ref}:csrc/kernels/kernel_common.h") == git(
            light, "show", f"{ref}:csrc/kernels/kernel_common.h")
        heavy_kernels = sorted(git(some, "grep", "-l", '#include "kernel_heavy.h"', ref, "--",
                                   "csrc/kernels").splitlines())
        assert heavy_kernels == [f"{ref}:csrc/kernels/kernel_{n:03d}.cpp" for n in range(0, 54, 4)]
        kernel = git(some, "show", f"{ref}:csrc/kernels/kernel_004.cpp")
        assert "using namespace faketorch::detail_heavy;" in kernel and "kernel_common.h" not in kernel
        assert git(some, "show", f"{ref}:csrc/kernels/kernel_005.cpp") == git(
            light, "show", f"{ref}:csrc/kernels/kernel_005.cpp")


def test_heavy_every_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(examples.ExampleError, match="heavy_every must be 1 or more, not 0"):
        write_example_repo("faketorch", tmp_path / "faketorch", heavy=True, heavy_every=0)
