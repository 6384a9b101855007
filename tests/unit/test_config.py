from pathlib import Path

import pytest

from builder.config import Config, find_config_file, load_config
from builder.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "builder.toml"
    path.write_text(text)
    return path


def test_defaults_pin_every_tool():
    cfg = load_config(None, environ={})
    assert cfg.toolchain.gcc == "12.2.0-14+deb12u1"
    assert cfg.toolchain.clang and cfg.toolchain.ccache and cfg.toolchain.cmake
    assert all("==" in r for r in cfg.python.requirements)


def test_precedence_file_then_env_then_flags(tmp_path):
    path = write(tmp_path, '[toolchain]\ngcc = "1.0-1"\ncmake = "3.0-1"\nninja = "1.0-1"\n')
    env = {"BUILDER_TOOLCHAIN_CMAKE": "3.1-1", "BUILDER_TOOLCHAIN_NINJA": "1.1-1"}
    cfg = load_config(path, env, {"toolchain.ninja": "1.2-1"})
    assert cfg.toolchain.gcc == "1.0-1"  # file
    assert cfg.toolchain.cmake == "3.1-1"  # env beats file
    assert cfg.toolchain.ninja == "1.2-1"  # flag beats env
    assert cfg.source == str(path)


def test_env_types_are_parsed():
    cfg = load_config(None, {"BUILDER_BUILD_JOBS": "3", "BUILDER_BASE_BOOTSTRAP": "false",
                             "BUILDER_PYTHON_REQUIREMENTS": "a==1,b==2"})
    assert cfg.build.jobs == 3 and cfg.base.bootstrap is False
    assert cfg.python.requirements == ["a==1", "b==2"]


def test_unknown_key_names_file_and_line(tmp_path):
    path = write(tmp_path, '[base]\nsuite = "bookworm"\n\n[toolchain]\ngcc = "1-1"\nclnag = "14"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert f"{path}:6" in str(info.value) and "toolchain.clnag" in str(info.value)
    assert "clang" in str(info.value)  # the hint lists the known keys


def test_unknown_section(tmp_path):
    path = write(tmp_path, '[tools]\ngcc = "1"\n')
    with pytest.raises(ConfigError, match=r"builder.toml:1: unknown section \[tools\]"):
        load_config(path, {})


def test_wrong_type_names_key_and_line(tmp_path):
    path = write(tmp_path, '[build]\njobs = "many"\n')
    with pytest.raises(ConfigError, match=r"builder.toml:2: build.jobs must be an integer"):
        load_config(path, {})


def test_bad_toml_is_one_error(tmp_path):
    path = write(tmp_path, "[base\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path, {})


def test_missing_explicit_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        find_config_file(str(tmp_path / "nope.toml"), {})


def test_unknown_env_variable():
    with pytest.raises(ConfigError, match="BUILDER_TOOLCHAIN"):
        load_config(None, {"BUILDER_TOOLCHAINX_GCC": "1"})


def test_hostile_pin_rejected(tmp_path):
    path = write(tmp_path, '[toolchain]\ngcc = "12; rm -rf /"\n')
    with pytest.raises(ConfigError, match="toolchain.gcc"):
        load_config(path, {})


def test_unpinned_requirement_rejected(tmp_path):
    path = write(tmp_path, '[python]\nrequirements = ["setuptools>=60"]\n')
    with pytest.raises(ConfigError, match="pinned requirement"):
        load_config(path, {})


def test_index_dir_defaults_under_data_dir(tmp_path):
    cfg = load_config(None, {"BUILDER_DATA_DIR": str(tmp_path)})
    assert cfg.index_dir == tmp_path / "index"
    assert isinstance(cfg, Config)


def test_example_config_loads():
    example = Path(__file__).resolve().parents[2] / "builder.toml.example"
    cfg = load_config(example, {})
    assert cfg.base.suite == "bookworm"
