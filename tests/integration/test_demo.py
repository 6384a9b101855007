"""`make demo` (= `builder demo`) end to end on the bundled fixture repos: images, the
wheels (torch on scikit-build-core, torch_xla against it), the no-op rerun, the index."""

from __future__ import annotations

import pytest

from tests.conftest import HOST_CA, run_builder

pytestmark = pytest.mark.docker


def test_demo_builds_reruns_as_a_noop_and_lists_the_index(tmp_path, base_image):
    done = run_builder("demo", "--workdir", str(tmp_path), "--extra-ca", HOST_CA, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout + done.stderr
    assert text.count("torch: built torch-2.99.0a0+git") == 1  # built once ...
    assert "torch: reused torch-2.99.0a0+git" in text and "torch_xla: reused torch_xla-" in text  # ... then reused
    files = sorted(p.name.split("-", 1)[0] for p in (tmp_path / "data" / "index" / "files").glob("*.whl"))
    assert files == ["filelock", "fsspec", "torch", "torch_xla", "typing_extensions"], files
    assert f"demo done: install with pip install --index-url file://{tmp_path}/data/index/simple/" in text
