"""The torchvision recipe: env from pytorch/vision's setup.py knobs, the container script
(ccache masquerade, torch from the local index), the smoke check, and the deps layer that
leaves out what the package builds against."""

from __future__ import annotations

import subprocess

from builder.recipes import RECIPES, BuildContext, deps_layer_requirements, get_recipe
from builder.recipes.base import mark
from builder.recipes.torchvision import TorchvisionRecipe, pinned_version


def ctx(**kw) -> BuildContext:
    return BuildContext(jobs=3, source_date_epoch=1704067200, **kw)


def test_registered_with_upstreams_names():
    recipe = get_recipe("torchvision")
    assert isinstance(recipe, TorchvisionRecipe) and RECIPES["torchvision"] is recipe
    assert (recipe.project, recipe.import_name, recipe.builds_against) == ("torchvision", "torchvision", ("torch",))
    assert recipe.default_repo == "https://github.com/pytorch/vision.git"
    assert recipe.source_dir == "/src/torchvision"


def test_cpu_env_with_every_codec_off():
    env = TorchvisionRecipe().env(ctx())
    assert env == {"FORCE_CUDA": "0", "TORCHVISION_USE_PNG": "0", "TORCHVISION_USE_JPEG": "0",
                   "TORCHVISION_USE_WEBP": "0", "TORCHVISION_USE_NVJPEG": "0", "MAX_JOBS": "3",
                   "CC": "gcc", "CXX": "g++", "SOURCE_DATE_EPOCH": "1704067200"}


def test_version_and_torch_pin():
    env = TorchvisionRecipe().env(ctx(version="0.99.0.dev20261204", against=("torch==2.13.0+cpu",),
                                      extra_env={"DEBUG": "1"}))
    assert env["BUILD_VERSION"] == "0.99.0.dev20261204"  # the whole version, as upstream's nightlies
    assert env["PYTORCH_VERSION"] == "2.13.0+cpu"  # Requires-Dist: torch==2.13.0+cpu
    assert env["DEBUG"] == "1"


def test_pinned_version():
    assert pinned_version(("numpy", "torch==2.13.0+cpu"), "torch") == "2.13.0+cpu"
    assert pinned_version(("Torch==1.0",), "torch") == "1.0"
    assert pinned_version(("torch>=2",), "torch") == ""
    assert pinned_version(("torch_xla==2.9.0",), "torch") == ""
    assert pinned_version(("not a requirement ==",), "torch") == ""


def test_job_count_is_unkeyed_and_the_rest_keyed():
    recipe = TorchvisionRecipe()
    assert "MAX_JOBS" in recipe.unkeyed_env()
    assert not {"FORCE_CUDA", "PYTORCH_VERSION", "BUILD_VERSION", "CXX"} & recipe.unkeyed_env()


def test_script_masquerades_ccache_and_leaves_torch_to_the_image():
    script = TorchvisionRecipe().script(ctx(against=("torch==2.13.0+cpu",)))
    lines = script.splitlines()
    links = next(i for i, line in enumerate(lines) if '"$HOME/.ccache-bin/g++"' in line)
    path = lines.index('export PATH="$HOME/.ccache-bin:$PATH"')
    build = lines.index("python -m build --wheel --no-isolation --outdir /out/dist")
    assert links < path < build
    # torch comes installed in the container's image (builder.stages.installed)
    assert "pip install" not in script and "PYTHONPATH" not in script
    assert lines[build - 2] == "cd /src/torchvision" and lines[build - 1] == mark("prepared")
    subprocess.run(["sh", "-n"], input=script, text=True, check=True)  # valid shell


def test_script_without_torch_still_masquerades():
    script = TorchvisionRecipe().script(ctx())
    assert '.ccache-bin/gcc"' in script and "pip install" not in script


def test_smoke_calls_a_cpp_op():
    code = TorchvisionRecipe().smoke_code()
    compile(code, "smoke", "exec")
    assert "torchvision.ops.nms(" in code and "_HAS_OPS" in code and "[0, 2]" in code


def test_release_base_is_version_txt(tmp_path):
    import subprocess as sp

    from builder.examples import write_example_repo

    repo = write_example_repo("faketorchvision", tmp_path / "faketorchvision")
    sha = sp.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    assert TorchvisionRecipe().release_base(repo / ".git", sha) == "0.99.0a0"


def test_deps_layer_leaves_out_what_it_builds_against():
    reqs = ("setuptools", "torch", "wheel")
    assert deps_layer_requirements(get_recipe("torchvision"), reqs) == ("setuptools", "wheel")
    assert deps_layer_requirements(get_recipe("xla"), ("Torch>=2", "numpy")) == ("numpy",)
    assert deps_layer_requirements(get_recipe("torch"), reqs) == reqs  # torch builds against nothing
