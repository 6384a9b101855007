"""The installed-wheels layer (builder.stages.installed) on the real Docker engine: the
exact index files and their dependencies installed over the python stage once per key,
byte-compiled, reused by key, a new layer for other bytes, and nothing tagged when the
install fails."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from builder.engine import ContainerSpec
from builder.errors import BuildError
from builder.index.directory import DirectoryIndex
from builder.stages.installed import INSTALLED_REPOSITORY, ensure_installed, install_files_script, installed_key
from tests.conftest import run_builder, write_config
from tests.helpers_wheels import make_wheel

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def python_stage(tmp_path_factory, base_image):
    data = tmp_path_factory.mktemp("installed")
    done = run_builder("images", "--json", config=write_config(data / "builder.toml", data), check=True)
    stage = next(r for r in json.loads(done.stdout) if r["name"] == "python")
    return stage["tag"], stage["image_id"]


@pytest.fixture
def made(engine):
    """Tags this test made; removed afterwards (nothing else is)."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        engine.remove_image(tag)


def index_with(tmp_path, marker: str):
    """An index with ``lowdep`` (a dependency) and ``toplib`` (requires it), both carrying
    ``marker`` so this run's bytes are its own."""
    index = DirectoryIndex(tmp_path / "index")
    dep = index.add(make_wheel(tmp_path / "w", "lowdep", "1.0", payload=marker.encode()))
    top = index.add(make_wheel(tmp_path / "w", "toplib", "2.0", payload=marker.encode(), requires=("lowdep==1.0",)))
    return index, [(top.filename, top.sha256)], dep


def test_layer_installs_the_files_and_their_dependencies_once_per_key(engine, python_stage, tmp_path, made):
    tag, image_id = python_stage
    index, wheels, dep = index_with(tmp_path, uuid.uuid4().hex)
    log = io.StringIO()
    first = ensure_installed(engine, index.root, tag, image_id, wheels, log)
    made.append(first.tag)
    key = installed_key(image_id, [wheels[0][1]], install_files_script([wheels[0][0]]))
    assert first.tag == f"{INSTALLED_REPOSITORY}:{key}" and first.reused is False
    labels = engine.image_labels(first.tag)
    assert labels["builder.installed.key"] == key and labels["builder.installed.parent"] == image_id
    assert json.loads(labels["builder.installed.wheels"]) == [wheels[0][0]]
    assert "lowdep==1.0" in log.getvalue() and "toplib==2.0" in log.getvalue()  # pip freeze, in the log
    # Installed, with its dependency, and byte-compiled: no pip, no network in this container.
    probe = ("import lowdep, toplib, importlib.util, os; print(toplib.__version__, lowdep.__version__); "
             "print(os.path.exists(importlib.util.cache_from_source(toplib.__file__)))")
    result = engine.run(ContainerSpec(image=first.tag, command=["python", "-c", probe], network="none"))
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["2.0", "1.0", "True"]
    again = ensure_installed(engine, index.root, tag, image_id, wheels, io.StringIO())
    assert again.tag == first.tag and again.reused is True and again.seconds == 0.0
    assert engine.image_id(again.tag) == engine.image_id(first.tag)


def test_other_bytes_get_a_layer_of_their_own(engine, python_stage, tmp_path, made):
    tag, image_id = python_stage
    one, wheels_one, _ = index_with(tmp_path / "one", uuid.uuid4().hex)
    two, wheels_two, _ = index_with(tmp_path / "two", uuid.uuid4().hex)
    assert wheels_one[0][0] == wheels_two[0][0] and wheels_one[0][1] != wheels_two[0][1]  # same name, other bytes
    first = ensure_installed(engine, one.root, tag, image_id, wheels_one, io.StringIO())
    made.append(first.tag)
    second = ensure_installed(engine, two.root, tag, image_id, wheels_two, io.StringIO())
    made.append(second.tag)
    assert second.tag != first.tag and second.reused is False


def test_a_failed_install_tags_nothing(engine, python_stage, tmp_path, made):
    tag, image_id = python_stage
    index, wheels, dep = index_with(tmp_path, uuid.uuid4().hex)
    (index.files_dir / dep.filename).unlink()  # the dependency's page still links it: the file is gone
    key = installed_key(image_id, [wheels[0][1]], install_files_script([wheels[0][0]]))
    log = io.StringIO()
    with pytest.raises(BuildError, match=r"installing toplib-2\.0-py3-none-any\.whl from the local index failed"):
        ensure_installed(engine, index.root, tag, image_id, wheels, log)
    assert engine.image_id(f"{INSTALLED_REPOSITORY}:{key}") is None


def test_bytes_other_than_planned_are_refused(engine, python_stage, tmp_path, made):
    tag, image_id = python_stage
    index, wheels, _ = index_with(tmp_path, uuid.uuid4().hex)
    other = "0" * 64
    log = io.StringIO()
    with pytest.raises(BuildError, match=r"toplib-2\.0-py3-none-any\.whl in the index .* is not the wheel planned"):
        ensure_installed(engine, index.root, tag, image_id, [(wheels[0][0], other)], log)
    assert log.getvalue() == ""  # refused before any container ran
    key = installed_key(image_id, [other], install_files_script([wheels[0][0]]))
    assert engine.image_id(f"{INSTALLED_REPOSITORY}:{key}") is None
