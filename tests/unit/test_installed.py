"""The installed-wheels layer's key and script (builder.stages.installed), which image a
build step starts from (builder.run.wheelstep.against_image) and which wheels a smoke
takes from a layer (builder.run.smoke.underlying_wheels): pure logic, a recording engine."""

from __future__ import annotations

import io
import json
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
    ensure_installed,
    install_files_script,
    installed_key,
    layer_tag,
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
    assert lines[:2] == ["set -eu", 'mkdir -p "$HOME"']
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


def test_requirements_are_quoted_for_the_shell():
    assert shlex.split(pip_from_local_index("a>=1", "b c"))[-2:] == ["a>=1", "b c"]


class _Engine:
    """Answers image_id from ``present``; records the runs; commits when the run exits 0."""

    def __init__(self, present=(), exit_code=0, output="line\nlast words", commits=True) -> None:
        self.present, self.exit_code, self.output, self.commits = set(present), exit_code, output, commits
        self.runs, self.logs = [], []

    def image_id(self, ref):  # noqa: ANN001
        return "sha256:" + ref if ref in self.present else None

    def run_and_commit(self, spec, repository, tag, log, labels):  # noqa: ANN001
        self.runs.append((spec, repository, tag, labels))
        self.logs.append(log)
        image_id = None if self.exit_code or not self.commits else "sha256:new"
        return RunResult(self.exit_code, self.output, 1.0), image_id


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
    assert spec.environment == {"HOME": "/tmp/installed-home"}  # the script's mkdir -p "$HOME"
    assert spec.labels == {"builder.step": "installed-layer", "builder.key": "k2"}  # what `docker ps` shows
    assert 0.0 <= made.seconds < 60.0


def test_the_container_writes_to_the_log_it_was_given(tmp_path: Path):
    engine, log = _Engine(), io.StringIO()
    commit_installed(engine, tmp_path, "parent:t", "true", "repo/x", "k4", {}, log, "torch-x.whl")
    assert engine.logs == [log]
    assert log.getvalue() == "# repo/x:k4 from parent:t: torch-x.whl\n"


def test_an_install_that_exits_0_but_is_not_committed_is_an_error(tmp_path: Path):
    engine = _Engine(commits=False)
    with pytest.raises(BuildError, match=r"failed \(exit 0\)"):
        commit_installed(engine, tmp_path, "parent:t", "true", "repo/x", "k5", {}, io.StringIO(), "w")


def test_a_failed_install_is_one_error_naming_what(tmp_path: Path):
    engine = _Engine(exit_code=3)
    with pytest.raises(BuildError, match=r"installing torch-x\.whl from the local index failed \(exit 3\): "
                                         r"line\nlast words") as caught:
        commit_installed(engine, tmp_path, "parent:t", "false", "repo/x", "k3", {}, io.StringIO(), "torch-x.whl")
    assert caught.value.hint == "`builder index check` lists what the index holds"  # an in-memory log: no path


def test_the_error_shows_the_last_five_lines_and_names_the_log(tmp_path: Path):
    engine = _Engine(exit_code=1, output="\n".join(f"l{i}" for i in range(1, 8)) + "\n")
    log_path = tmp_path / "install.log"
    with log_path.open("w") as log, pytest.raises(BuildError) as caught:
        commit_installed(engine, tmp_path, "parent:t", "false", "repo/x", "k6", {}, log, "w")
    assert caught.value.message == "installing w from the local index failed (exit 1): l3\nl4\nl5\nl6\nl7"
    assert caught.value.hint == (f"see the log {log_path}; `builder index check` lists what the index holds")


def test_ensure_installed_keys_and_labels_the_exact_files(tmp_path: Path):
    index = DirectoryIndex(tmp_path / "index")
    a = index.add(make_wheel(tmp_path / "w", "torch", "2.13.0"))
    b = index.add(make_wheel(tmp_path / "w", "numpy", "2.0.0"))
    engine, log = _Engine(), io.StringIO()
    made = ensure_installed(engine, index.root, "builder/python:k", "sha256:p",
                            [(a.filename, a.sha256), (b.filename, b.sha256)], log)
    script = install_files_script([a.filename, b.filename])
    key = installed_key("sha256:p", [a.sha256, b.sha256], script)
    assert (made.tag, made.reused) == (f"{INSTALLED_REPOSITORY}:{key}", False)
    ((spec, repository, tag, labels),) = engine.runs
    assert (spec.image, spec.command, repository, tag) == ("builder/python:k", ["sh", "-c", script],
                                                          INSTALLED_REPOSITORY, key)
    assert spec.mounts[0].source == str(index.root)
    names = sorted([a.filename, b.filename])
    assert labels == {"builder.installed.key": key, "builder.installed.parent": "sha256:p",
                      "builder.installed.wheels": json.dumps(names)}
    assert log.getvalue() == f"# {made.tag} from builder/python:k: {', '.join(names)}\n"


def test_the_layer_tag_names_its_repository_and_the_key_of_the_files_script():
    wheels = [("b-1-py3-none-any.whl", SHA_B), ("a-1-py3-none-any.whl", SHA_A)]
    key = installed_key("sha256:p", [SHA_A, SHA_B], install_files_script(["a-1-py3-none-any.whl",
                                                                          "b-1-py3-none-any.whl"]))
    assert layer_tag("sha256:p", wheels) == f"builder/installed:{key}"
    assert layer_tag("sha256:p", wheels, "builder/smoke") == f"builder/smoke:{key}"


def test_ensure_installed_under_another_name_and_reuse_without_reading_the_files(tmp_path: Path):
    index = DirectoryIndex(tmp_path / "index")
    a = index.add(make_wheel(tmp_path / "w", "torch", "2.13.0"))
    made = ensure_installed(_Engine(), index.root, "p:t", "sha256:p", [(a.filename, a.sha256)], io.StringIO(),
                            "builder/smoke")
    assert made.tag == layer_tag("sha256:p", [(a.filename, a.sha256)], "builder/smoke") and not made.reused
    (index.root / "files" / a.filename).write_bytes(b"changed since the layer was made")
    engine = _Engine(present={made.tag})
    again = ensure_installed(engine, index.root, "p:t", "sha256:p", [(a.filename, a.sha256)], io.StringIO(),
                             "builder/smoke")
    assert (again.tag, again.reused, engine.runs) == (made.tag, True, [])  # the layer holds the checked bytes


def test_ensure_installed_refuses_bytes_that_are_not_the_planned_wheel(tmp_path: Path):
    index = DirectoryIndex(tmp_path / "index")
    a = index.add(make_wheel(tmp_path / "w", "torch", "2.13.0"))
    engine = _Engine()
    with pytest.raises(BuildError) as caught:
        ensure_installed(engine, index.root, "p:t", "sha256:p", [(a.filename, "c" * 64)], io.StringIO())
    assert caught.value.message == (f"{a.filename} in the index {index.root} is not the wheel planned "
                                 f"(sha256 cccccccccccc...)")
    assert caught.value.hint == "the index changed under the run: run it again"
    assert engine.runs == []


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
    assert log.getvalue().endswith(f"# against layer {tag} (made): {added.filename}\n")


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
