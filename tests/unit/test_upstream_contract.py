"""docs/upstream.md is the one place that lists what builder relies on upstream: the
recipes must use exactly its env, command and file rows, and the fixtures must carry
(and cite) the upstream files those rows name."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from builder.examples import example_dir
from builder.recipes import RECIPES, BuildContext
from builder.source import buildreqs

TABLE = Path(__file__).resolve().parents[2] / "docs" / "upstream.md"


def rows() -> list[tuple[str, str, str, str]]:
    out = []
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in RECIPES:
            out.append((cells[0], cells[1], cells[2].strip("`").split("`")[0], cells[3]))
    return out


# the recipes that build from source (a prebuilt-only one, torch_tpu, has no env or command)
BUILT = sorted(name for name, recipe in RECIPES.items() if not recipe.prebuilt_only)


def listed(recipe: str, kind: str) -> set[str]:
    return {name for r, k, name, _ in rows() if r == recipe and k == kind}


def full_context() -> BuildContext:
    # Every optional knob switched on (a version), so every variable a recipe can set shows.
    return BuildContext(jobs=2, source_date_epoch=1, version="9.9.9", against=("torch==9.9.9",),
                        bazel_version="7.4.1", bazel_base_url="http://127.0.0.1:9/bazel")


def test_every_row_names_its_upstream_source():
    assert rows(), "the table has no rows"
    for recipe, kind, name, source in rows():
        # wheel / rule: what a prebuilt-only recipe reads from upstream's wheel (torch_tpu)
        assert kind in {"env", "command", "file", "version", "layout", "rc", "wheel", "rule"}, (recipe, kind)
        assert kind not in {"wheel", "rule"} or RECIPES[recipe].prebuilt_only, (recipe, kind)
        assert re.search(r"pytorch|CMake|scikit-build|reproducible|fixture|bazelisk|Bazel|torch_tpu", source), \
            (recipe, name, source)


@pytest.mark.parametrize("name", BUILT)
def test_recipe_env_is_exactly_the_table(name):
    recipe = RECIPES[name]
    assert set(recipe.env(full_context())) == listed(name, "env")


@pytest.mark.parametrize("name", BUILT)
def test_recipe_bazelrc_lines_are_exactly_the_table(name):
    """What a recipe writes to ~/.bazelrc (upstream reads Bazel options from rc files and
    its own env knobs only): each option once in the table, with why."""
    script = RECIPES[name].script(replace(full_context(), bazel_remote="http://127.0.0.1:9/bazel"))
    written = set(re.findall(r"(?:^|\n|[\"'])((?:startup|common|build) --[a-z_]+)", script))
    assert written == listed(name, "rc")


@pytest.mark.parametrize("name", BUILT)
def test_recipe_command_is_the_table(name):
    recipe = RECIPES[name]
    [command] = [c for c in listed(name, "command") if c.startswith("python")]
    assert " ".join(recipe.build_command("setuptools.build_meta")[:5]) == command
    settings = listed(name, "command") - {command}
    assert set(recipe.config_settings("scikit_build_core.build")) == settings
    assert recipe.config_settings("setuptools.build_meta") == []


@pytest.mark.parametrize("name", BUILT)
def test_build_requirement_files_are_the_table(name):
    assert listed(name, "file") == {buildreqs.REQUIREMENTS_FILE, buildreqs.PYPROJECT}


@pytest.mark.parametrize("tree", ["faketorch", "faketorch_setuptools"])
def test_fixture_carries_the_files_and_cites_upstream(tree):
    root = example_dir(tree)
    for path in (buildreqs.REQUIREMENTS_FILE, buildreqs.PYPROJECT):
        text = (root / path).read_text()
        assert "pytorch/pytorch" in text, f"{tree}/{path} does not name the upstream file it follows"


def test_main_fixture_interfaces_cite_upstream():
    root = example_dir("faketorch")
    for path in ("CMakeLists.txt", "tools/metadata/version.py", "tools/metadata/dependencies.py",
                 "torchgen/gen.py", "aten/src/ATen/native/native_functions.yaml"):
        assert "pytorch/pytorch" in (root / path).read_text() or "pytorch/" in (root / path).read_text(), path


def test_fixture_minimums_match_the_table():
    cmake = (example_dir("faketorch") / "CMakeLists.txt").read_text()
    assert "cmake_minimum_required(VERSION 3.27" in cmake and "VERSION_LESS 9.3" in cmake
    versions = listed("torch", "version")
    assert {"CMake >= 3.27", "GCC >= 9.3", "scikit-build-core >= 1.0"} <= versions
    backend, requires = buildreqs.parse_pyproject((example_dir("faketorch") / "pyproject.toml").read_text(), "x")
    assert backend == "scikit_build_core.build" and "scikit-build-core>=1.0" in requires


def test_xla_fixture_has_upstreams_layout_and_cites_it():
    root = example_dir("fakexla")
    names = listed("xla", "layout")
    assert {"WORKSPACE", "bazel/torch.BUILD", ".bazelrc", ".bazelversion"} <= names
    for name in names - {".torch_commit"}:  # .torch_commit is written with the torch SHA (examples)
        path = root / name.replace(".bazel", "dot-bazel", 1) if name.startswith(".") else root / name
        text = path.read_text()
        assert name == ".bazelversion" or "pytorch/xla" in text, f"fakexla/{name} does not cite upstream"
    assert "PYTORCH_LOCAL_DIR = \"../\"" in (root / "bazel" / "dependencies.bzl").read_text()
    assert "build --action_env=CC=gcc" in (root / "dot-bazelrc").read_text()


def test_torchvision_fixture_has_upstreams_layout_and_cites_it():
    root = example_dir("faketorchvision")
    names = listed("torchvision", "layout")
    assert {"setup.py", "version.txt", "torchvision/csrc/ops/cpu/nms_kernel.cpp"} <= names
    for name in names - {"version.txt"}:  # version.txt is one line, read by setup.py's readline()
        assert "pytorch/vision" in (root / name).read_text(), f"faketorchvision/{name} does not cite upstream"
    backend, requires = buildreqs.parse_pyproject((root / "pyproject.toml").read_text(), "x")
    assert backend == buildreqs.LEGACY_BACKEND and requires == ["setuptools", "torch", "wheel"]
    assert "pytorch/vision" in (root / "pyproject.toml").read_text()
    setup = (root / "setup.py").read_text()
    for knob in listed("torchvision", "env") - {"MAX_JOBS", "CC", "CXX", "SOURCE_DATE_EPOCH"}:
        assert f'"{knob}"' in setup, f"faketorchvision/setup.py does not read {knob}"
    for path in sorted((root / "torchvision").rglob("*")):
        if path.suffix in (".py", ".cpp", ".h"):
            assert "pytorch/vision" in path.read_text(), f"{path.relative_to(root)} does not cite upstream"
