"""Which Requires-Dist of a wheel the index must hold (builder.index.deps): pure logic, and
fetch_dependencies end to end against a local PEP 503 index on disk (file://), resolved
by the real pip (the real torch wheel and PyPI are in tests/integration/test_index_deps.py)."""

from __future__ import annotations

import pytest

from builder.config import Config
from builder.errors import BuildError
from builder.index.deps import fetch_dependencies, requires_dist, runtime_requirements, unmet
from builder.index.directory import DirectoryIndex
from builder.settings import PrebuiltConfig
from tests.helpers_wheels import make_wheel

OWN = frozenset({"torch", "torch_xla"})  # what builder builds: never fetched as a dependency

# torch 2.13.0's Requires-Dist as its METADATA lists them (plus markers for other platforms)
TORCH_REQUIRES = ["filelock", "typing-extensions>=4.10.0", 'setuptools; python_version >= "3.12"',
                  'optree>=0.13.0; extra == "optree"', 'opt-einsum>=3.3; extra == "opt-einsum"',
                  'pywin32; sys_platform == "win32"',
                  'triton==3.5.0; platform_system == "Linux" and platform_machine == "x86_64"']


def test_markers_are_evaluated_for_the_python_stage_and_extras_dropped():
    assert runtime_requirements(TORCH_REQUIRES, "3.11") == ["filelock", "typing-extensions>=4.10.0",
                                                            "triton==3.5.0"]
    assert "setuptools" in runtime_requirements(TORCH_REQUIRES, "3.12")
    assert "setuptools" in runtime_requirements(TORCH_REQUIRES, "3.12.4")
    assert runtime_requirements(['tomli; python_full_version < "3.11.0"', 'x; implementation_name == "pypy"',
                                 'y; platform_machine == "aarch64"'], "3.11") == []


def test_extras_count_only_when_requested():
    assert runtime_requirements(TORCH_REQUIRES, "3.11", extras=("opt-einsum",)) == [
        "filelock", "typing-extensions>=4.10.0", "opt-einsum>=3.3", "triton==3.5.0"]
    # an extra's name is compared normalized (PEP 685), as pip does
    assert "opt-einsum>=3.3" in runtime_requirements(TORCH_REQUIRES, "3.11", extras=("Opt_Einsum",))
    assert not any(r.startswith("optree") for r in runtime_requirements(TORCH_REQUIRES, "3.11", ("opt-einsum",)))
    # a requirement listed both plain and under an extra is asked for once
    assert runtime_requirements(["numpy", 'numpy; extra == "np"'], "3.11", ("np",)) == ["numpy"]


def test_requirements_met_by_the_index_are_not_fetched(tmp_path):
    index = DirectoryIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "w", "torch", "2.99.0a0+gitabc1234", tag="cp311-cp311-linux_x86_64"))
    index.add(make_wheel(tmp_path / "w", "filelock", "3.20.0"))
    index.add(make_wheel(tmp_path / "w", "typing_extensions", "4.15.0"))
    assert unmet(index, ["torch>=2.99.0a0", "filelock>=3", "fsspec", "Typing-Extensions>=4.10"]) == ["fsspec"]
    assert unmet(index, ["filelock>=4"]) == ["filelock>=4"]


def test_a_wheel_the_python_stage_cannot_install_does_not_count(tmp_path):
    index = DirectoryIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "w", "markupsafe", "3.0.3", tag="cp312-cp312-manylinux_2_17_x86_64"))
    index.add(make_wheel(tmp_path / "w", "numpy", "2.3.0", tag="cp311-cp311-manylinux_2_28_aarch64"))
    index.add(make_wheel(tmp_path / "w", "sympy", "1.15.0", requires_python=">=3.12"))
    index.add(make_wheel(tmp_path / "w", "pyyaml", "6.0.3", tag="cp311-cp311-manylinux_2_17_x86_64"))
    assert unmet(index, ["MarkupSafe>=2", "numpy", "sympy", "pyyaml"], "3.11") == ["MarkupSafe>=2", "numpy", "sympy"]
    assert unmet(index, ["MarkupSafe>=2", "sympy"], "3.12") == []


def test_requires_dist_read_from_the_wheel(tmp_path):
    assert requires_dist(make_wheel(tmp_path, "plain", "1.0")) == []
    wheel = make_wheel(tmp_path, "withdeps", "1.0", requires=("filelock", 'a; extra == "x"'))
    assert requires_dist(wheel) == ["filelock", 'a; extra == "x"']


@pytest.fixture()
def upstream(tmp_path):
    """A real PEP 503 index on disk (file://), standing in for PyPI: fetch_dependencies runs
    its real path (pip resolving against it, download, sha256 check, publish). absl-py
    needs six, so the closure takes pip's resolution, not a list the test wrote."""
    index = DirectoryIndex(tmp_path / "upstream")
    for name, version, requires in (("absl_py", "2.3.1", ("six>=1.16",)), ("six", "1.17.0", ()),
                                    ("six", "1.15.0", ()), ("libtpu", "0.0.21", ()),
                                    ("torch", "2.9.0", ())):  # a torch upstream, never to be taken
        index.add(make_wheel(tmp_path / "upstream-src", name, version, requires=requires))
    return index


def config_for(tmp_path, upstream: DirectoryIndex, data: str = "data", cache: str | None = "downloads") -> Config:
    """A data dir of its own; its own download cache unless ``cache`` is None (the user's)."""
    return Config(data_dir=str(tmp_path / data),
                  prebuilt=PrebuiltConfig(index_url=upstream.simple_url(), find_links=[],
                                          download_cache="" if cache is None else str(tmp_path / cache)))


def names(index: DirectoryIndex) -> list[str]:
    return sorted(p.name for p in index.files_dir.glob("*.whl"))


def digests(index: DirectoryIndex) -> dict[str, str]:
    return {e.filename: e.sha256 for e in index.entries()}


def test_own_projects_come_from_the_index_never_from_upstream(tmp_path, upstream):
    cfg = config_for(tmp_path, upstream)
    index = DirectoryIndex(tmp_path / "index")
    xla = make_wheel(tmp_path / "w", "torch_xla", "2.9.0", tag="cp311-cp311-linux_x86_64",
                     requires=("torch==2.9.0", "absl-py>=1.0.0", 'libtpu==0.0.21; extra == "tpu"'))
    notes: list[str] = []

    # no torch in the index: torch is named for the user to build, never fetched (upstream has one)
    index.add(xla)
    summary = fetch_dependencies(cfg, index, [xla.name], notes.append, own_projects=OWN)
    assert names(index) == ["absl_py-2.3.1-py3-none-any.whl", "six-1.17.0-py3-none-any.whl", xla.name]
    assert summary.startswith("dependencies: 2 wheel(s): 2 downloaded (0 MB), 0 from the download cache, "
                              "0 already in the index (resolved upstream)")
    assert "not fetching torch==2.9.0: build or import it into the index" in " ".join(notes)
    ours, theirs = digests(index), digests(upstream)
    for wheel in ("absl_py-2.3.1-py3-none-any.whl", "six-1.17.0-py3-none-any.whl"):  # upstream's bytes
        assert ours[wheel] == theirs[wheel]

    # a torch from source whose version does not match is not fetched either; the rest is there
    index.add(make_wheel(tmp_path / "w", "torch", "2.9.0a0+gitabc1234", tag="cp311-cp311-linux_x86_64"))
    notes.clear()
    assert fetch_dependencies(cfg, index, [xla.name], notes.append, own_projects=OWN) == \
        "dependencies: all in the index"
    assert any("not fetching torch==2.9.0" in n for n in notes)
    assert "torch-2.9.0-py3-none-any.whl" not in names(index)

    # a matching torch (local label and all) satisfies it; an extra brings its requirement
    index.add(make_wheel(tmp_path / "w", "torch", "2.9.0+cpu", tag="cp311-cp311-linux_x86_64"))
    notes.clear()
    assert fetch_dependencies(cfg, index, [xla.name], notes.append, own_projects=OWN) == \
        "dependencies: all in the index"
    assert notes == []
    before = names(index)
    fetch_dependencies(cfg, index, [xla.name], notes.append, extras=("tpu",), own_projects=OWN)
    assert names(index) == sorted([*before, "libtpu-0.0.21-py3-none-any.whl"])


def test_a_failed_dependency_fetch_says_the_wheel_is_published(tmp_path, upstream):
    cfg = config_for(tmp_path, upstream)
    index = DirectoryIndex(tmp_path / "index")
    wheel = make_wheel(tmp_path / "w", "app", "1.0", requires=("fsspec",))  # upstream has no fsspec
    index.add(wheel)
    with pytest.raises(BuildError) as caught:
        fetch_dependencies(cfg, index, [wheel.name], lambda _: None, own_projects=OWN)
    assert caught.value.message == (
        f"app-1.0-py3-none-any.whl published, but not its dependencies: resolving fsspec from "
        f"{upstream.simple_url()} failed: No matching distribution found for fsspec")
    log = tmp_path / "data" / "logs" / "fetch-dependencies.log"
    assert caught.value.hint == (f"see {log}; point [prebuilt] index_url / find_links at a reachable source, "
                                 "or add with --no-deps")
    assert "fsspec" in log.read_text()  # pip's own output, kept
    assert names(index) == [wheel.name]  # the wheel stays published, nothing else came


def test_a_fresh_data_dir_downloads_nothing_the_machine_has(tmp_path, upstream, monkeypatch):
    """The download cache is the user's (XDG_CACHE_HOME), not the data dir's: a teammate's
    or a second project's fresh data dir takes every file from it, checked by sha256, and
    says so; the pip resolution is not asked again either."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    wheel = make_wheel(tmp_path / "w", "app", "1.0", requires=("absl-py",))
    first_cfg, second_cfg = (config_for(tmp_path, upstream, data, cache=None) for data in ("one", "two"))
    first, second = DirectoryIndex(tmp_path / "one" / "index"), DirectoryIndex(tmp_path / "two" / "index")
    for index in (first, second):
        index.add(wheel)
    assert fetch_dependencies(first_cfg, first, [wheel.name], lambda _: None, own_projects=OWN).startswith(
        "dependencies: 2 wheel(s): 2 downloaded (0 MB), 0 from the download cache, 0 already in the index")
    stored = sorted(p.relative_to(tmp_path / "xdg") for p in (tmp_path / "xdg").rglob("*.whl"))
    assert [str(p.parent.parent) for p in stored] == ["builder/downloads/sha256"] * 2
    assert fetch_dependencies(second_cfg, second, [wheel.name], lambda _: None, own_projects=OWN).startswith(
        "dependencies: 2 wheel(s): 0 downloaded (0 MB), 2 from the download cache, 0 already in the index "
        "(upstream not asked)")
    assert digests(second) == digests(first)
    assert not (tmp_path / "one" / "downloads").exists() and not (tmp_path / "two" / "downloads").exists()
