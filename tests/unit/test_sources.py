"""builder.run.sources: an sdist package goes through the graph, the plan and the
checkout like a git one (a local simple index on 127.0.0.1 stands in for PyPI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.config import Config, PackageConfig
from builder.errors import ConfigError
from builder.index.directory import DirectoryIndex
from builder.recipes import get_recipe
from builder.run.graph import PackageRequest, Request, resolve
from builder.run.sources import check_out, resolve_source, source_requirements, source_time
from builder.run.wheelplan import BUILD, PREBUILT, plan_wheels
from builder.settings import PrebuiltConfig
from tests.helpers_wheels import make_wheel
from tests.unit.test_sdist import Index, good_sdist, sha256

SPLINE = PackageConfig(sdist="torch-spline-conv", build_requires=("wheel",), env={"FORCE_ONLY_CPU": "1"})


@pytest.fixture
def served(tmp_path):
    index = Index(tmp_path / "served")
    archive = good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz")
    index.publish("torch-spline-conv", archive)
    index.archive = archive  # type: ignore[attr-defined]
    yield index
    index.server.shutdown()
    index.server.server_close()


def config(tmp_path: Path, served: Index) -> Config:
    return Config(data_dir=str(tmp_path / "data"), packages={"spline": SPLINE},
                  prebuilt=PrebuiltConfig(index_url=served.url, download_cache=str(tmp_path / "downloads")))


def test_an_sdist_recipes_version_is_its_sdist(tmp_path, served):
    cfg = config(tmp_path, served)
    recipe = get_recipe("spline", cfg)
    source = resolve_source(cfg, recipe, "1.2.2", lambda: pytest.fail("an sdist has no repository"))
    digest = sha256(served.archive)
    assert source.sdist is not None
    assert source.sdist.path == tmp_path / "downloads" / "sha256" / digest / served.archive.name
    assert (source.ref.ref, source.ref.sha) == ("1.2.2", digest)  # type: ignore[union-attr]
    assert source.describe() == f"sdist torch-spline-conv 1.2.2 (sha256 {digest[:12]})"
    with pytest.raises(ConfigError, match="named by a version"):
        resolve_source(cfg, recipe, "main", lambda: "")
    # a git recipe is untouched: a version stays a prebuilt wheel
    assert resolve_source(cfg, get_recipe("torch"), "2.13.0", lambda: "").version == "2.13.0"


def test_requirements_time_and_checkout_of_an_sdist(tmp_path, served):
    cfg = config(tmp_path, served)
    recipe = get_recipe("spline", cfg)
    source = resolve_source(cfg, recipe, "1.2.2", lambda: "")
    reqs = source_requirements(cfg, recipe, source)
    # the sdist's, less torch (it builds against it: from the local index), then the table's
    assert reqs.requirements == ("setuptools>=64", "wheel")
    assert reqs.sources == ("pyproject.toml", "builder.toml") and reqs.backend == "setuptools.build_meta"
    assert source_time(cfg, source) == 1_678_977_120
    tree = check_out(cfg, recipe, source)
    assert tree.path == tmp_path / "data" / "src" / "spline" / "torch_spline_conv-1.2.2"
    assert (tree.path / "setup.py").is_file() and tree.sha == source.ref.sha  # type: ignore[union-attr]


def test_graph_and_plan_take_an_sdist_package(tmp_path, served):
    cfg = config(tmp_path, served)
    index = DirectoryIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path, "torch", "2.13.0", tag="cp311-cp311-linux_x86_64"))
    resolved = resolve(cfg, Request(packages=(PackageRequest("torch", "2.13.0"), PackageRequest("spline", "1.2.2"))))
    assert [s.name for s in resolved.sources] == ["torch", "spline"]  # what it builds against first
    torch, spline = plan_wheels(None, cfg, resolved, index, lambda _: None).wheels
    assert torch.status == PREBUILT
    assert spline.status == BUILD and spline.project == "torch-spline-conv"
    assert spline.requirements is not None and "wheel" in spline.requirements.requirements
    with pytest.raises(ConfigError, match="spline builds against torch, which nothing names"):
        resolve(cfg, Request(packages=(PackageRequest("spline", "1.2.2"),)))


def test_a_recorded_source_is_an_sdist_or_a_commit(tmp_path, served):
    from builder.run.sources import recorded_source

    cfg = config(tmp_path, served)
    digest = sha256(served.archive)
    url = served.url + "torch-spline-conv/" + served.archive.name
    source = recorded_source(cfg, get_recipe("spline", cfg), url, digest)
    assert source.sdist is not None and (source.ref.ref, source.ref.sha) == ("1.2.2", digest)  # type: ignore[union-attr]
    tree = check_out(cfg, get_recipe("spline", cfg), source, tmp_path / "scratch" / "spline")
    assert tree.path == tmp_path / "scratch" / "spline" / "torch_spline_conv-1.2.2"
    git = recorded_source(cfg, get_recipe("torch"), "file:///srv/torch", "a" * 40)
    assert git.sdist is None and git.ref.sha == "a" * 40  # type: ignore[union-attr]
