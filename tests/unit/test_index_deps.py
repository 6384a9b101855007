"""Which Requires-Dist of a wheel the index must hold (builder.index_deps): pure logic."""

from __future__ import annotations

from builder.index import DirectoryIndex
from builder.index_deps import requires_dist, runtime_requirements, unmet
from tests.helpers_wheels import make_wheel


def test_markers_are_evaluated_for_the_python_stage_and_extras_dropped():
    requires = ["filelock", "typing-extensions>=4.10.0", 'setuptools; python_version >= "3.12"',
                'optree>=0.13.0; extra == "optree"', 'pywin32; sys_platform == "win32"',
                'triton==3.5.0; platform_system == "Linux" and platform_machine == "x86_64"']
    assert runtime_requirements(requires, "3.11") == ["filelock", "typing-extensions>=4.10.0", "triton==3.5.0"]
    assert "setuptools" in runtime_requirements(requires, "3.12")


def test_requirements_met_by_the_index_are_not_fetched(tmp_path):
    index = DirectoryIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path / "w", "torch", "2.99.0a0+gitabc1234", tag="cp311-cp311-linux_x86_64"))
    index.add(make_wheel(tmp_path / "w", "filelock", "3.20.0"))
    assert unmet(index, ["torch>=2.99.0a0", "filelock>=3", "fsspec"]) == ["fsspec"]
    assert unmet(index, ["filelock>=4"]) == ["filelock>=4"]


def test_requires_dist_read_from_the_wheel(tmp_path):
    wheel = make_wheel(tmp_path, "plain", "1.0")
    assert requires_dist(wheel) == []
