"""A self-contained index (issue "Real upstream, part 1", item 4): `builder index add` of
the real torch 2.13.0 CPU wheel brings its runtime dependencies, and a fresh venv then
installs torch from builder's index alone (the machine's pip config, mirrors and
find-links switched off) and imports it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_builder, write_config

FIND_LINKS = Path(os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split()[0])
TORCH = FIND_LINKS / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture(scope="module")
def torch_wheel() -> Path:
    if not TORCH.is_file():
        pytest.fail(f"{TORCH} is missing: this machine's find-links dir should hold the torch 2.13.0 CPU wheel")
    return TORCH


def names(index: Path) -> list[str]:
    return sorted(p.name.split("-", 1)[0].lower() for p in (index / "files").glob("*.whl"))


def test_no_deps_publishes_the_wheel_only(tmp_path, torch_wheel):
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data")
    done = run_builder("index", "add", "--no-deps", str(torch_wheel), config=cfg)
    assert done.returncode == 0, done.stderr
    assert names(tmp_path / "data" / "index") == ["torch"]


def test_index_add_brings_dependencies_and_pip_installs_from_the_index_alone(tmp_path, torch_wheel):
    cfg = write_config(tmp_path / "builder.toml", tmp_path / "data")
    index = tmp_path / "data" / "index"
    done = run_builder("index", "add", str(torch_wheel), config=cfg)
    assert done.returncode == 0, done.stderr
    assert "dependencies:" in done.stderr
    have = names(index)
    for dep in ("filelock", "fsspec", "jinja2", "markupsafe", "mpmath", "networkx", "sympy", "typing_extensions"):
        assert dep in have, (dep, have)
    again = run_builder("index", "add", str(torch_wheel), config=cfg)  # nothing new to fetch
    assert again.returncode == 0 and "dependencies: all in the index" in again.stderr
    assert "opt_einsum" not in have  # behind torch's extra "opt-einsum": only when asked for
    extra = run_builder("index", "add", "--extra", "opt-einsum", str(torch_wheel), config=cfg)
    assert extra.returncode == 0, extra.stderr
    assert names(index) == sorted([*have, "opt_einsum"])
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--disable-pip-version-check",
                              "--index-url", f"file://{index}/simple/", "torch"],
                             capture_output=True, text=True, env=env, timeout=900)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    assert "Looking in indexes: file://" in install.stdout and "pypi" not in install.stdout.lower()
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__, "
                            "torch.ones(2).sum().item())"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["2.13.0+cpu", "2.0"]
