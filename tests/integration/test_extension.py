"""A torch extension defined only in builder.toml ([packages.torchsort]: the torchsort sdist
from PyPI), built by `builder wheels --torch 2.13.0 --pkg torchsort=VERSION` against the
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

# torchsort on PyPI (teddykoker/torchsort): setup.py @0.1.10 makes one CppExtension,
# torchsort.isotonic_cpu from torchsort/isotonic_cpu.cpp with -fopenmp -ffast-math (a CUDA one
# only when `nvcc` runs, never in builder's CPU images); its pyproject.toml names
# setuptools.build_meta and requires setuptools>=61.0, wheel, torch>=1.7.1 (torch: from the
# index, builds_against). One compile, about 2 min on 2 cores cold. Its newest member's mtime
# is 2025-06-09 17:12:13: an odd second, which zip cannot store (builder.repro.normalize).
# bench/real.py builds torch-spline-conv (5 files) for the timings.
VERSION = "0.1.10"
PACKAGE = '''
[packages.torchsort]
sdist = "torchsort"
build_requires = ["setuptools>=61.0", "wheel"]
import_name = "torchsort"
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
    done = run_builder("wheels", "--torch", "2.13.0", "--pkg", f"torchsort={VERSION}", "--json", config=cfg)
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
    ext = cold["by_recipe"]["torchsort"]
    assert ext["status"] == "built" and ext["project"] == "torchsort"
    # the odd-second source time: written and checked as the even second below, in normal form
    assert ext["filename"] == f"torchsort-{VERSION}-cp311-cp311-manylinux_2_34_x86_64.whl"
    assert ext["platform"]["policy"] == "manylinux_2_34"
    assert ext["platform"]["limited_by"] == ["GLIBC_2.32 (libc.so.6)"]
    assert ext["platform"]["vendored"] == []
    assert cold["by_recipe"]["torch"]["version"].startswith("2.13.0")
    assert cold["smoke"] == "passed"
    stats = ext["ccache"]
    assert stats["misses"] == 1, stats  # a cold cache: its one file really compiled through ccache
    # built against the indexed torch (builds_against): its container started from the layer with
    # that exact wheel installed (made here or by an earlier run on the same bytes: keyed by them)
    log = Path(ext["log"]).read_text(errors="replace")
    layer = against_layer(log)
    assert layer and layer[1] == [cold["by_recipe"]["torch"]["filename"]]


def test_the_wheel_installs_from_the_index_alone_and_imports(env, cold, engine):
    from builder.engine import ContainerSpec, Mount

    python_tag = next(s["tag"] for s in cold["stages"] if s["name"] == "python")
    # soft_rank on CPU runs the compiled isotonic_cpu kernel (torchsort/ops.py @0.1.10)
    script = ("PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= pip install -q --no-cache-dir "
              "--index-url file:///index/simple torch torchsort && cd /tmp && python -c '"
              "import importlib.metadata as m, torch, torchsort, torchsort.isotonic_cpu as k; "
              "r = torchsort.soft_rank(torch.tensor([[8.0, 1.0, 5.0]]), regularization_strength=1e-3); "
              "print(\"torchsort\", m.version(\"torchsort\"), r.round().tolist(), k.__file__)'")
    result = engine.run(ContainerSpec(image=python_tag, command=["sh", "-c", script], network="host",
                                      mounts=[Mount(str(env["index"]), "/index", read_only=True)]))
    assert result.exit_code == 0, result.output[-3000:]
    assert (f"torchsort {VERSION} [[3.0, 1.0, 2.0]] /opt/venv/lib/python3.11/site-packages/torchsort/isotonic_cpu"
            in result.output), result.output[-3000:]


def test_a_rerun_is_a_no_op(env, cold, engine):
    since = int(time.time()) - 1
    again = wheels(env["cfg"])
    until = int(time.time()) + 1
    ext = again["by_recipe"]["torchsort"]
    assert ext["status"] == "reused" and ext["sha256"] == cold["by_recipe"]["torchsort"]["sha256"]
    assert all(s["reused"] for s in again["stages"]) and again["smoke"] == "reused"
    # no build container of this data dir was created (other tests may share the daemon)
    root = str(env["root"])
    created = [e for e in engine.client.events(since=since, until=until, decode=True,
                                               filters={"type": "container", "event": "create"})
               if any(root in str(v) for v in (e.get("Actor", {}).get("Attributes") or {}).values())]
    assert created == []


def test_a_rebuild_from_an_empty_data_dir_hits_the_shared_ccache(env, cold, tmp_path_factory):
    fresh = setup_data(tmp_path_factory.mktemp("extension-fresh"), env["volume"])  # no wheel, no sdist, no src
    rebuilt = wheels(fresh)["by_recipe"]["torchsort"]
    assert rebuilt["status"] == "built" and rebuilt["sha256"] == cold["by_recipe"]["torchsort"]["sha256"]
    stats = rebuilt["ccache"]
    assert (stats["direct_hits"], stats["misses"]) == (1, 0), stats  # its one compile, from the shared volume
    print(f"torchsort rebuild: {rebuilt['seconds']} s, ccache {stats} "
          f"(cold: {cold['by_recipe']['torchsort']['seconds']} s)")
