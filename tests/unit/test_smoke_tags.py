"""The smoke installs the run's wheels with pip's own tag check: no option that makes pip
take a wheel its interpreter or platform would refuse (issue 31, item 4). A wheel whose
tag does not fit the smoke image must fail the smoke, as it would fail a user's install."""

from __future__ import annotations

import shlex
from pathlib import Path

from builder.config import load_config
from builder.engine import RunResult
from builder.index.directory import DirectoryIndex
from builder.recipes.base import pip_from_local_index
from builder.run.smoke import smoke_check
from builder.run.wheelstep import StepOutcome
from tests.helpers_wheels import make_wheel

# pip options that bypass or change its wheel-tag selection (pip's `pip install --help`)
TAG_BYPASSES = ("--force-reinstall", "--no-deps", "--platform", "--python-version", "--implementation",
                "--abi", "--ignore-requires-python", "--no-index", "--find-links", "--prefer-binary")


def test_local_index_install_is_plain_pip_install():
    assert pip_from_local_index("torch==2.9.0", "x y") == (
        "PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= pip install --no-cache-dir "
        "--disable-pip-version-check --no-compile --index-url file:///index/simple/ torch==2.9.0 'x y'")


class _RecordingEngine:
    def __init__(self) -> None:
        self.specs = []

    def run(self, spec, log):  # noqa: ANN001
        self.specs.append(spec)
        return RunResult(exit_code=0, output="", seconds=0.0)


def test_smoke_script_installs_without_tag_bypass(tmp_path: Path):
    cfg = load_config(None, environ={"BUILDER_DATA_DIR": str(tmp_path / "data")})
    index = DirectoryIndex(tmp_path / "index")
    wheel = make_wheel(tmp_path / "src", "torch", "2.99.0", tag="cp311-cp311-manylinux_2_28_x86_64")
    sha = index.add(wheel).sha256
    engine = _RecordingEngine()
    outcome = StepOutcome("torch", "torch", "built", wheel.name, "2.99.0", sha)
    smoke_check(engine, cfg, index, "builder/python:x", "sha256:x", [outcome], tmp_path / "smoke.log")
    (spec,) = engine.specs
    script = spec.command[-1]
    install = next(line for line in script.splitlines() if " pip install " in line)
    assert install == pip_from_local_index("torch==2.99.0")
    words = shlex.split(install)
    assert not [w for w in words if w.split("=", 1)[0] in TAG_BYPASSES]
    assert spec.network == "none"
