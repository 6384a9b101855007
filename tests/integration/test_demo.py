"""`make demo` (= `builder demo`) end to end on the bundled fixture repos: images, the
wheels (torch on scikit-build-core, torch_xla against it), the no-op rerun, the index."""

from __future__ import annotations

import shlex
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_builder

pytestmark = pytest.mark.docker


@pytest.fixture()
def own_caches(engine):
    """Cache volumes of this run, through the environment every command of the demo inherits:
    the demo would otherwise write the user's default builder-ccache and builder-bazel."""
    prefix = f"builder-test-demo-{uuid.uuid4().hex[:8]}"
    env = {"BUILDER_CACHE_CCACHE": f"volume:{prefix}-ccache", "BUILDER_CACHE_BAZEL": f"volume:{prefix}-bazel"}
    yield env
    for location in env.values():
        engine.remove_volume(location.removeprefix("volume:"))


def test_demo_builds_reruns_as_a_noop_and_lists_the_index(tmp_path, base_image, own_caches, engine):
    defaults = default_volumes(engine)
    # No --extra-ca: the demo trusts the CA bundle the environment names, like every command.
    done = run_builder("demo", "--workdir", str(tmp_path), timeout=1500, env=own_caches)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout + done.stderr
    assert text.count("torch: built torch-2.99.0a0+git") == 1  # built once ...
    assert "torch: reused torch-2.99.0a0+git" in text and "torch_xla: reused torch_xla-" in text  # ... then reused
    files = sorted(p.name.split("-", 1)[0] for p in (tmp_path / "data" / "index" / "files").glob("*.whl"))
    assert files == ["filelock", "fsspec", "torch", "torch_xla", "typing_extensions"], files
    assert f"demo done: install with pip install --index-url file://{tmp_path}/data/index/simple/" in text

    # The demo's results stay findable: the line it prints lists them, from any directory.
    printed = done.stdout.strip().splitlines()[-1]
    assert printed == f"builder -c {tmp_path}/builder.toml index list", done.stdout
    argv = shlex.split(printed)
    listed = run_builder(*argv[3:], config=tmp_path / "builder.toml", check=True, cwd=tmp_path.parent)
    assert "torch-2.99.0a0+git" in listed.stdout and "torch_xla-" in listed.stdout, listed.stdout
    ccache = Path(engine.client.volumes.get(own_caches["BUILDER_CACHE_CCACHE"].removeprefix("volume:"))
                  .attrs["Mountpoint"])
    assert any(p.is_file() for p in ccache.rglob("*"))  # the run's own ccache is the one written ...
    assert default_volumes(engine) == defaults  # ... and no default volume was created for it


def default_volumes(engine) -> dict[str, str | None]:
    """The IDs (None: absent) of the user's default cache volumes."""
    found = {v.name: v.id for v in engine.client.volumes.list()}
    return {name: found.get(name) for name in ("builder-ccache", "builder-bazel")}
