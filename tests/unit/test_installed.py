"""The installed-wheels layer's key and script (builder.stages.installed), which image a
build step starts from (builder.run.wheelstep.against_image) and which wheels a smoke
takes from a layer (builder.run.smoke.underlying_wheels): pure logic, a recording engine."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest

from builder.config import load_config
from builder.engine import RunResult
from builder.errors import BuildError
from builder.index.directory import DirectoryIndex
from builder.run.smoke import underlying_wheels
from builder.run.wheelstep import StepOutcome, against_image
from builder.stages.installed import (
    INSTALLED_REPOSITORY,
    commit_installed,
    install_files_script,
    installed_key,
    pip_from_local_index,
)
from tests.helpers_wheels import make_wheel

SHA_A, SHA_B = "a" * 64, "b" * 64


def test_key_changes_with_each_input_and_not_with_wheel_order():
    key = installed_key("sha256:parent", [SHA_A, SHA_B], "script")
    assert len(key) == 24
    assert installed_key("sha256:parent", [SHA_B, SHA_A], "script") == key
    assert installed_key("sha256:other", [SHA_A, SHA_B], "script") != key
    assert installed_key("sha256:parent", [SHA_A], "script") != key
    assert installed_key("sha256:parent", [SHA_A, SHA_B], "script2") != key


def test_script_installs_the_exact_files_compiled_from_the_index_alone():
    script = install_files_script(["torch-2.13.0-cp311-cp311-linux_x86_64.whl", "a-1-py3-none-any.whl"])
    lines = script.splitlines()
    assert lines[0] == "set -eu"
    install = shlex.split(lines[2])
    assert install[:3] == ["PIP_CONFIG_FILE=/dev/null", "PIP_FIND_LINKS=", "PIP_EXTRA_INDEX_URL="]
    assert "--no-compile" not in install and "--index-url" in install
    assert install[install.index("--index-url") + 1] == "file:///index/simple/"
    assert install[-2:] == ["/index/files/a-1-py3-none-any.whl",
                            "/index/files/torch-2.13.0-cp311-cp311-linux_x86_64.whl"]
    assert lines[3] == "pip list --format=freeze --disable-pip-version-check"


def test_one_container_installs_skip_byte_compiling():
    assert " --no-compile " in pip_from_local_index("x")
    assert "--no-compile" not in pip_from_local_index("x", compile_pyc=True)


class _Engine:
    """Answers image_id from ``present``; records the runs; commits when the run exits 0."""

    def __init__(self, present=(), exit_code=0) -> None:
        self.present, self.exit_code, self.runs = set(present), exit_code, []

    def image_id(self, ref):  # noqa: ANN001
        return "sha256:" + ref if ref in self.present else None

    def run_and_commit(self, spec, repository, tag, log, labels):  # noqa: ANN001
        self.runs.append((spec, repository, tag, labels))
        image_id = None if self.exit_code else "sha256:new"
        return RunResult(self.exit_code, "line\nlast words", 1.0), image_id


def test_commit_reuses_an_existing_tag_without_a_container(tmp_path: Path):
    engine = _Engine(present={"repo/x:k1"})
    made = commit_installed(engine, tmp_path, "parent:t", "true", "repo/x", "k1", {}, io.StringIO(), "w")
    assert (made.tag, made.reused, made.seconds) == ("repo/x:k1", True, 0.0)
    assert engine.runs == []


def test_commit_runs_offline_with_the_index_read_only_and_labels_the_key(tmp_path: Path):
    engine = _Engine()
    made = commit_installed(engine, tmp_path, "parent:t", "echo hi", "repo/x", "k2", {"a": "b"}, io.StringIO(), "w")
    assert made.tag == "repo/x:k2" and made.reused is False
    ((spec, repository, tag, labels),) = engine.runs
    assert (spec.image, spec.command, spec.network) == ("parent:t", ["sh", "-c", "echo hi"], "none")
    ((mount),) = spec.mounts
    assert (mount.source, mount.target, mount.read_only) == (str(tmp_path), "/index", True)
    assert (repository, tag, labels) == ("repo/x", "k2", {"builder.installed.key": "k2", "a": "b"})


def test_a_failed_install_is_one_error_naming_what(tmp_path: Path):
    engine = _Engine(exit_code=3)
    with pytest.raises(BuildError, match=r"installing torch-x\.whl from the local index failed \(exit 3\): "
                                         r"line\nlast words"):
        commit_installed(engine, tmp_path, "parent:t", "false", "repo/x", "k3", {}, io.StringIO(), "torch-x.whl")


def test_a_step_without_against_starts_from_the_stage_image(tmp_path: Path):
    engine = _Engine()
    index = DirectoryIndex(tmp_path / "index")
    assert against_image(engine, index, "builder/deps:k", "sha256:d", "", io.StringIO()) == "builder/deps:k"
    assert engine.runs == []


def test_a_step_against_a_wheel_starts_from_its_layer(tmp_path: Path):
    engine = _Engine()
    index = DirectoryIndex(tmp_path / "index")
    added = index.add(make_wheel(tmp_path / "w", "torch", "2.13.0"))
    log = io.StringIO()
    tag = against_image(engine, index, "builder/deps:k", "sha256:d", added.sha256, log)
    key = installed_key("sha256:d", [added.sha256], install_files_script([added.filename]))
    assert tag == f"{INSTALLED_REPOSITORY}:{key}"
    ((spec, _, _, labels),) = engine.runs
    assert spec.image == "builder/deps:k" and labels["builder.installed.parent"] == "sha256:d"
    assert log.getvalue().endswith(f"# against layer {tag} (made)\n")


def test_a_step_against_a_wheel_missing_from_the_index_is_refused(tmp_path: Path):
    index = DirectoryIndex(tmp_path / "index")
    with pytest.raises(BuildError, match=r"sha256 aaaaaaaaaaaa\.\.\. it builds against is not in the index"):
        against_image(_Engine(), index, "builder/deps:k", "sha256:d", SHA_A, io.StringIO())


def test_the_smoke_layers_only_what_another_wheel_of_the_run_builds_against(tmp_path: Path):
    cfg = load_config(None, environ={"BUILDER_DATA_DIR": str(tmp_path / "data")})
    torch = StepOutcome("torch", "torch", "prebuilt", "torch-2.13.0-x.whl", "2.13.0", SHA_A)
    xla = StepOutcome("xla", "torch_xla", "built", "torch_xla-2.9.0-x.whl", "2.9.0", SHA_B)
    assert underlying_wheels(cfg, [torch, xla]) == [("torch-2.13.0-x.whl", SHA_A)]
    assert underlying_wheels(cfg, [torch]) == []
    assert underlying_wheels(cfg, [xla]) == []
