"""The python stage's interpreter: tags from [python] version, [base] suite and the machine."""

from __future__ import annotations

from pathlib import Path

from builder.index.deps import runtime_requirements, target_tags
from builder.index.resolve import Sources, resolve_command
from builder.interpreter import Interpreter, host_machine


def test_bookworm_x86_64_tags():
    python = Interpreter("3.11", "bookworm", "x86_64")
    assert python.abi == "cp311"
    assert python.platforms[0] == "manylinux_2_36_x86_64"
    assert "manylinux_2_17_x86_64" in python.platforms and "manylinux2014_x86_64" in python.platforms
    assert python.platforms[-2:] == ("linux_x86_64", "any")
    assert not any("2_37" in p for p in python.platforms)


def test_tags_follow_the_configured_series_suite_and_machine():
    python = Interpreter("3.12", "bullseye", "aarch64")
    command = resolve_command(["torch==2.9.0"], python, Sources("https://pypi.org/simple"), True, Path("/r.json"))
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    assert platforms[0] == "manylinux_2_31_aarch64" and "x86_64" not in " ".join(command)
    assert command[command.index("--python-version") + 1] == "3.12"
    assert command[command.index("--abi") + 1] == "cp312"
    tags = {str(t) for t in target_tags(python)}
    assert "cp312-cp312-manylinux_2_31_aarch64" in tags
    assert not any(t.startswith("cp311-cp311") or "x86_64" in t or "2_36" in t for t in tags)
    assert "cp311-abi3-manylinux_2_17_aarch64" in tags  # abi3 of an older series installs


def test_unknown_suite_gets_only_the_oldest_manylinux():
    assert Interpreter("3.11", "sid", "x86_64").platforms[0] == "manylinux_2_17_x86_64"


def test_markers_name_the_machine():
    requires = ['a; platform_machine == "aarch64"', 'b; platform_machine == "x86_64"']
    assert runtime_requirements(requires, Interpreter("3.11", "bookworm", "aarch64")) == ["a"]
    assert runtime_requirements(requires, Interpreter("3.11", "bookworm", "x86_64")) == ["b"]


def test_of_config_uses_python_version_and_suite():
    from builder.config import load_config

    python = Interpreter.of(load_config(None, {"BUILDER_PYTHON_VERSION": "3.12", "BUILDER_BASE_SUITE": "trixie"}))
    assert (python.series, python.suite, python.machine) == ("3.12", "trixie", host_machine())
    assert python.platforms[0] == f"manylinux_2_41_{host_machine()}"
