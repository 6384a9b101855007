"""A torch extension defined only in builder.toml ([packages.spline]: the torch-spline-conv
sdist from PyPI), built by `builder wheels --torch 2.13.0 --pkg spline=VERSION` against the
CPU torch 2.13.0 wheel imported into the index, on the real Docker daemon: it installs from
the index alone and imports, a rerun is a no-op, and a rebuild from an empty data dir with
the same ccache volume is (almost) all cache hits. One cold build per module, reused."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import against_layer, run_builder, write_config

pytestmark = pytest.mark.docker

VERSION = "1.2.2"  # torch-spline-conv on PyPI: 5 C++ files, about 4.5 min on 2 cores cold
PACKAGE = '''
[packages.spline]
sdist = "torch-spline-conv"
env = { FORCE_ONLY_CPU = "1" }
build_requires = ["setuptools", "wheel"]
import_name = "torch_spline_conv"
'''


def torch_wheel() -> Path:
    """The CPU torch 2.13.0 wheel for Python 3.11 in pip's find-links dir."""
    folders = [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split() if Path(p).is_dir()]
    found = sorted(w for folder in folders for w in folder.glob("torch-2.13.0*-cp311-cp311-*linux*x86_64.whl"))
    if not found:
        pytest.fail(f"no torch 2.13.0 cp311 wheel in $PIP_FIND_LINKS ({os.environ.get('PIP_FIND_LINKS')!r})")
    return found[0]


def setup_data(root: Path, volume: str) -> Path:
    """A data dir whose index holds torch 2.13.0 (and its dependencies), a config naming the
    package and the shared ccache volume."""
    cfg = write_config(root / "builder.toml", root / "data", f'[cache]\nccache = "volume:{volume}"\n' + PACKAGE)
    run_builder("index", "add", str(torch_wheel()), config=cfg, check=True, timeout=900)
    return cfg


def wheels(cfg: Path) -> dict:
    done = run_builder("wheels", "--torch", "2.13.0", "--pkg", f"spline={VERSION}", "--json", config=cfg)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    report["by_recipe"] = {w["recipe"]: w for w in report["wheels"]}
    return report


@pytest.fixture(scope="module")
def env(tmp_path_factory, base_image, engine):
    root = tmp_path_factory.mktemp("extension")
    volume = f"builder-test-ccache-{uuid.uuid4().hex[:8]}"
    yield {"root": root, "volume": volume, "cfg": setup_data(root, volume), "index": root / "data" / "index"}
    engine.remove_volume(volume)


@pytest.fixture(scope="module")
def cold(env):
    return wheels(env["cfg"])


def test_the_sdist_builds_against_the_indexed_torch(env, cold):
    spline = cold["by_recipe"]["spline"]
    assert spline["status"] == "built" and spline["project"] == "torch-spline-conv"
    # auditwheel in the build container: bookworm's glibc symbols it uses (GLIBC_2.32, which
    # manylinux_2_31 lacks) decide the tag; torch's libc10 / libtorch_cpu it links are left to
    # the torch wheel, not vendored (builder.recipes.base TORCH_LIBRARIES)
    assert spline["filename"] == f"torch_spline_conv-{VERSION}-cp311-cp311-manylinux_2_34_x86_64.whl"
    assert spline["platform"]["policy"] == "manylinux_2_34"
    assert spline["platform"]["limited_by"] == ["GLIBC_2.32 (libc.so.6)"]
    assert spline["platform"]["vendored"] == []
    assert cold["by_recipe"]["torch"]["version"].startswith("2.13.0")
    assert cold["smoke"] == "passed"
    stats = spline["ccache"]
    assert stats["misses"] >= 1, stats  # a cold cache: it really compiled through ccache
    # built against the indexed torch (builds_against): its container started from the layer with
    # that exact wheel installed (made here or by an earlier run on the same bytes: keyed by them)
    log = Path(spline["log"]).read_text(errors="replace")
    layer = against_layer(log)
    assert layer and layer[1] == [cold["by_recipe"]["torch"]["filename"]]


def test_the_wheel_installs_from_the_index_alone_and_imports(env, cold, engine):
    from builder.engine import ContainerSpec, Mount

    python_tag = next(s["tag"] for s in cold["stages"] if s["name"] == "python")
    script = ("PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= pip install -q --no-cache-dir "
              "--index-url file:///index/simple torch torch-spline-conv && cd /tmp && python -c '"
              "import torch, torch_spline_conv as t; from torch_spline_conv import spline_basis; "
              "b, w = spline_basis(torch.rand(4, 2), torch.tensor([5, 5]), "
              "torch.tensor([1, 1], dtype=torch.uint8), 1); "
              "print(\"spline\", t.__version__, tuple(b.shape), t.__file__)'")
    result = engine.run(ContainerSpec(image=python_tag, command=["sh", "-c", script], network="host",
                                      mounts=[Mount(str(env["index"]), "/index", read_only=True)]))
    assert result.exit_code == 0, result.output[-3000:]
    assert f"spline {VERSION} (4, 4) /opt/venv/lib/python3.11/site-packages/torch_spline_conv" in result.output


def test_a_rerun_is_a_no_op(env, cold, engine):
    since = int(time.time()) - 1
    again = wheels(env["cfg"])
    until = int(time.time()) + 1
    spline = again["by_recipe"]["spline"]
    assert spline["status"] == "reused" and spline["sha256"] == cold["by_recipe"]["spline"]["sha256"]
    assert all(s["reused"] for s in again["stages"]) and again["smoke"] == "reused"
    # no build container of this data dir was created (other tests may share the daemon)
    root = str(env["root"])
    created = [e for e in engine.client.events(since=since, until=until, decode=True,
                                               filters={"type": "container", "event": "create"})
               if any(root in str(v) for v in (e.get("Actor", {}).get("Attributes") or {}).values())]
    assert created == []


def test_a_rebuild_from_an_empty_data_dir_hits_the_shared_ccache(env, cold, tmp_path_factory):
    fresh = setup_data(tmp_path_factory.mktemp("extension-fresh"), env["volume"])  # no wheel, no sdist, no src
    rebuilt = wheels(fresh)["by_recipe"]["spline"]
    assert rebuilt["status"] == "built"
    stats = rebuilt["ccache"]
    hits = stats["direct_hits"] + stats["preprocessed_hits"]
    assert hits / (hits + stats["misses"]) >= 0.9, stats
    print(f"spline rebuild: {rebuilt['seconds']} s, ccache {stats} (cold: {cold['by_recipe']['spline']['seconds']} s)")
