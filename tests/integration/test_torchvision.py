"""`builder wheels --pkg torchvision=REF` end to end: the torchvision recipe on
faketorchvision (pytorch/vision's setup.py shape, C++ ops through TORCH_LIBRARY), against
the real Docker daemon, real ccache and the real directory index.

It builds against the real torch 2.13.0 CPU wheel, imported with `builder index add` from
this machine's find-links dir and named with `--torch 2.13.0`: faketorch has no
torch.utils.cpp_extension and no ATen headers, so it cannot host a C++ extension build.
The torch wheel is therefore prebuilt here (never rebuilt), and "torch reused" means the
same prebuilt wheel from the index on every run.
"""

from __future__ import annotations

import json
import os
import uuid
import zipfile
from pathlib import Path

import pytest

from builder.examples import commit_change, write_example_repo
from tests.conftest import run_builder, write_config

pytestmark = pytest.mark.docker

FIND_LINKS = Path(os.environ.get("PIP_FIND_LINKS", "/opt/wheels"))
TORCH = FIND_LINKS / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    if not TORCH.is_file():
        pytest.fail(f"{TORCH} is missing: this machine's find-links dir should hold the torch 2.13.0 CPU wheel")
    root = tmp_path_factory.mktemp("torchvision")
    repo = write_example_repo("faketorchvision", root / "repos" / "faketorchvision")
    volume = f"builder-test-tv-{uuid.uuid4().hex[:8]}"
    cfg = write_config(root / "builder.toml", root / "data",
                       f'[cache]\nccache = "volume:{volume}"\nbazel = "volume:{volume}-bazel"\n'
                       f'[repos]\ntorchvision = "file://{repo}"\n')
    run_builder("index", "add", str(TORCH), config=cfg, check=True)
    yield {"cfg": cfg, "repo": repo, "index": root / "data" / "index", "root": root}
    engine.remove_volume(volume)
    engine.remove_volume(f"{volume}-bazel")


def wheels(env, ref: str = "main"):
    done = run_builder("wheels", "--torch", "2.13.0", "--pkg", f"torchvision={ref}", "--json", config=env["cfg"])
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    return {w["recipe"]: w for w in report["wheels"]}, report


def manifest(env, wheel: str) -> dict:
    return json.loads(run_builder("index", "show", wheel, config=env["cfg"], check=True).stdout)


@pytest.fixture(scope="module")
def cold(env):
    return wheels(env)


def test_builds_against_the_torch_of_the_run(env, cold):
    built, report = cold
    torch, vision = built["torch"], built["torchvision"]
    assert torch["status"] == "prebuilt" and torch["filename"] == TORCH.name
    assert vision["status"] == "built"
    assert vision["filename"].startswith("torchvision-0.99.0a0+")  # version.txt + "+<sha7>", upstream's rule
    assert report["smoke"] == "passed"  # torchvision.ops.nms ran C++ from _C.so
    recorded = manifest(env, vision["filename"])
    definition = recorded["predicate"]["buildDefinition"]
    assert definition["internalParameters"]["against"] == ["torch==2.13.0+cpu"]
    assert recorded["against_sha256"] == [torch["sha256"]]
    deps = {d.get("name"): d for d in definition["resolvedDependencies"]}
    assert deps["against:torch"]["uri"] == TORCH.name
    assert deps["against:torch"]["digest"]["sha256"] == torch["sha256"]
    env_recorded = definition["internalParameters"]["env"]
    assert env_recorded["PYTORCH_VERSION"] == "2.13.0+cpu" and env_recorded["FORCE_CUDA"] == "0"
    with zipfile.ZipFile(env["index"] / "files" / vision["filename"]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "torchvision/_C.so" in names and "torchvision/image.so" in names  # no_python_abi_suffix
    assert "Requires-Dist: torch==2.13.0+cpu" in metadata  # pinned to the torch it was compiled against


def test_changing_a_cpp_file_rebuilds_torchvision_only(env, cold):
    commit_change(env["repo"], "torchvision/csrc/ops/cpu/nms_kernel.cpp", branch="nms")  # main stays for the others
    built, report = wheels(env, "nms")
    assert built["torch"]["status"] == "prebuilt" and built["torch"]["sha256"] == cold[0]["torch"]["sha256"]
    vision = built["torchvision"]
    assert vision["status"] == "built" and vision["filename"] != cold[0]["torchvision"]["filename"]
    cache = vision["ccache"]
    # four translation units (vision.cpp, ops/nms.cpp, ops/cpu/nms_kernel.cpp, io/image/image.cpp):
    # only the changed one compiles again
    assert cache["misses"] == 1 and cache["direct_hits"] + cache["preprocessed_hits"] == 3, cache
    assert report["smoke"] == "passed"


def test_noop_rerun_reuses_the_wheel(env, cold):
    built, report = wheels(env)
    assert built["torch"]["status"] == "prebuilt" and built["torchvision"]["status"] == "reused"
    assert report["smoke"] == "reused"
