"""Issue "Real upstream, part 1": torch built the way pytorch builds it today, through
PEP 517 (`python -m build --wheel --no-isolation`) with build requirements read from the
commit into a content-keyed deps layer, against the real Docker daemon.

The fixture repo has both eras of upstream (builder/examples): main is on
scikit-build-core with no setup.py, the tag v2.98.0 (branch release/2.98) is the
setuptools-era shape. One recipe builds both.
"""

from __future__ import annotations

import json
import re
import uuid
import zipfile

import pytest

from builder.examples import commit_change, write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("pep517")
    torch_repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    volume = f"builder-test-ccache-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[cache]\nccache = "volume:{volume}"\nbazel = "volume:{volume}-bazel"\n'
                       f'[repos]\ntorch = "file://{torch_repo}"\n')
    yield {"cfg": cfg, "torch": torch_repo, "index": root / "data" / "index", "volume": volume}
    engine.remove_volume(volume)
    engine.remove_volume(f"{volume}-bazel")


def build(env, ref: str, *args: str):
    done = run_builder("wheels", "--torch", ref, "--no-smoke", "--json", *args, config=env["cfg"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [torch] = report["wheels"]
    deps = next(s for s in report["stages"] if s["name"] == "deps")
    return torch, deps


def wheel_text(env, filename: str, member_suffix: str) -> str:
    with zipfile.ZipFile(env["index"] / "files" / filename) as zf:
        name = next(n for n in zf.namelist() if n.endswith(member_suffix))
        return zf.read(name).decode()


@pytest.fixture(scope="module")
def main_build(env):
    return build(env, "main")


def test_main_builds_with_scikit_build_core_through_pep517(env, main_build, engine):
    torch, deps = main_build
    assert torch["status"] == "built"
    # torch builds without Bazel: its Bazel cache is neither mounted nor created
    assert engine.client.volumes.list(filters={"name": f"{env['volume']}-bazel"}) == []
    log = open(torch["log"]).read()
    manifest = json.loads((env["index"] / "files" / f"{torch['filename']}.manifest.json").read_text())
    internal = manifest["predicate"]["buildDefinition"]["internalParameters"]
    command = internal["command"]
    assert internal["buildImage"]["tag"] == deps["tag"]  # built in the commit's deps layer
    assert command[:5] == ["python", "-m", "build", "--wheel", "--no-isolation"]
    assert "-Cbuild-dir=build" in command  # scikit-build-core: a fixed build dir for ccache
    assert "*** Making wheel..." in log  # scikit-build-core's own output: the new backend ran
    metadata = wheel_text(env, torch["filename"], ".dist-info/METADATA")
    # Runtime dependencies from tools/metadata/dependencies.py (upstream's dynamic metadata).
    assert "Requires-Dist: filelock" in metadata and "Requires-Dist: typing-extensions>=4.10.0" in metadata
    assert "NumPy could not be found" not in log  # numpy came from the commit's requirements
    assert torch["version"].startswith("2.99.0a0+git")


def test_setuptools_era_tag_builds_through_the_same_recipe_with_ccache_hits(env, main_build):
    # main compiles as C++20 (pytorch#176662); v2.99.0, the commit before it, is the same
    # tree as C++17, as the setuptools-era v2.98.0 is: built first, it is what v2.98.0 hits
    cxx17, _ = build(env, "v2.99.0")
    assert cxx17["status"] == "built" and cxx17["version"].startswith("2.99.0a0+git")
    torch, deps = build(env, "v2.98.0")
    assert torch["status"] == "built" and torch["version"].startswith("2.98.0+git")
    log = open(torch["log"]).read()
    assert "*** Making wheel..." not in log and "running bdist_wheel" in log  # setuptools ran setup.py
    manifest = json.loads((env["index"] / "files" / f"{torch['filename']}.manifest.json").read_text())
    assert "-Cbuild-dir=build" not in json.dumps(manifest)
    # Its requirements (setuptools backend, no scikit-build-core) make another deps layer.
    # (Reused or built: the daemon may hold it from an earlier run; it is another image either way.)
    assert deps["key"] != main_build[1]["key"] and deps["image_id"] != main_build[1]["image_id"]
    # Same sources, same compile commands as v2.99.0: the era change costs almost no compile.
    stats = torch["ccache"]
    assert stats["direct_hits"] + stats["preprocessed_hits"] >= 0.9 * (
        stats["direct_hits"] + stats["preprocessed_hits"] + stats["misses"]), stats


def test_rerun_is_a_noop(env, main_build):
    torch, deps = build(env, "main")
    assert torch["status"] == "reused" and deps["reused"]
    assert torch["sha256"] == main_build[0]["sha256"]


def test_same_requirements_share_the_deps_layer_and_one_file_recompiles(env, main_build, engine):
    commit_change(env["torch"], "csrc/kernels/kernel_003.cpp", branch="one-file")  # main stays for the others
    torch, deps = build(env, "one-file")
    assert torch["status"] == "built"
    assert deps["reused"] and deps["image_id"] == main_build[1]["image_id"]
    stats = torch["ccache"]
    assert stats["misses"] >= 1
    assert stats["direct_hits"] + stats["preprocessed_hits"] >= 0.9 * (
        stats["direct_hits"] + stats["preprocessed_hits"] + stats["misses"] - 1), stats


def test_missing_pyyaml_fails_naming_the_requirement(env, main_build, engine):
    files = sorted(p.name for p in (env["index"] / "files").glob("*.whl"))
    reqs = (env["torch"] / "requirements-build.txt").read_text()
    pyproject = (env["torch"] / "pyproject.toml").read_text()
    commit_change(env["torch"], "requirements-build.txt", reqs.replace("pyyaml\n", ""), branch="no-pyyaml")
    commit_change(env["torch"], "pyproject.toml", pyproject.replace('    "pyyaml",\n', ""), branch="no-pyyaml")
    done = run_builder("wheels", "--torch", "no-pyyaml", "--no-smoke", config=env["cfg"])
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert re.match(r"error: building torch from [0-9a-f]{12} failed: the build imports the Python module "
                    r"'yaml' \(package 'pyyaml'\), which is not in the build requirements "
                    r"\(requirements-build\.txt and pyproject\.toml\); add pyyaml there at that commit; "
                    r"see the log /", last), last
    assert sorted(p.name for p in (env["index"] / "files").glob("*.whl")) == files  # nothing published
    # The changed requirements made a new deps layer; the old one is untouched.
    deps_tags = [t for image in engine.client.images.list(name="builder/deps") for t in image.tags]
    assert f"builder/deps:{main_build[1]['key']}" in deps_tags and len(deps_tags) >= 2
