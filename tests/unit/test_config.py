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


def test_unknown_key_of_a_known_section_in_env_suggests_the_closest():
    with pytest.raises(ConfigError) as info:
        load_config(None, {"BUILDER_TOOLCHAIN_GCCC": "1"})
    assert info.value.message == "environment variable BUILDER_TOOLCHAIN_GCCC: no setting toolchain.gccc"
    assert info.value.hint.startswith("did you mean BUILDER_TOOLCHAIN_GCC? known keys in [toolchain]: ")
    assert info.value.exit_code == 2


def test_builder_variables_outside_known_sections_are_ignored():
    cfg = load_config(None, {"BUILDER_TOOLCHAINX_GCC": "1", "BUILDER_DEBUG": "1", "BUILDER_TEST_DOWNLOADS": "/x"})
    assert cfg == load_config(None, {})


@pytest.mark.parametrize(("name", "value", "words"), [
    ("BUILDER_BUILD_JOBS", "-3", "between 0 and 4096"),
    ("BUILDER_BUILD_JOBS", "99999999999999999999", "between 0 and 4096"),
    ("BUILDER_BUILD_MEMORY_PER_JOB_GIB", "nan", "finite"),
    ("BUILDER_BUILD_CPU_LIMIT", "inf", "finite"),
    ("BUILDER_BUILD_CPU_LIMIT", "-1", "between 0"),
    ("BUILDER_BUILD_MEMORY_LIMIT_GIB", "1e300", "between 0"),
    ("BUILDER_BUILD_MIN_FREE_DISK_GIB", "-0.5", "between 0"),
])
def test_numbers_are_range_checked(name, value, words):
    with pytest.raises(ConfigError, match=words):
        load_config(None, {name: value})


@pytest.mark.parametrize("text", ["[build]\ncpu_limit = inf\n", "[build]\nmemory_per_job_gib = nan\n",
                                  "[build]\njobs = -1\n", "[build]\njobs = 123456789012345678901234567890\n"])
def test_numbers_in_the_file_are_range_checked(tmp_path, text):
    with pytest.raises(ConfigError, match=r"builder.toml:2: build\."):
        load_config(write(tmp_path, text), {})


def test_paths_are_expanded_and_absolute_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WHERE", "elsewhere")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, {"BUILDER_DATA_DIR": "~/bd", "BUILDER_INDEX_DIR": "rel/index",
                             "BUILDER_PREBUILT_DOWNLOAD_CACHE": "$WHERE/dl", "BUILDER_CACHE_CCACHE": "path:~/cc"})
    assert cfg.data_dir == str(tmp_path / "home" / "bd")
    assert cfg.index_dir == tmp_path / "rel" / "index"
    assert cfg.prebuilt.download_cache == str(tmp_path / "elsewhere" / "dl")
    assert cfg.cache.ccache == f"path:{tmp_path}/home/cc"
    assert cfg.logs_dir == tmp_path / "home" / "bd" / "logs"


def test_relative_paths_in_the_file_are_relative_to_it(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "builder.toml"
    path.write_text('data_dir = "data"\n[ca]\nextra_certificates = "../ca.pem"\n'
                    '[prebuilt]\nfind_links = ["wheels", "https://example.org/w/"]\n')
    monkeypatch.chdir("/")
    cfg = load_config(path, {})
    assert cfg.data_dir == str(tmp_path / "conf" / "data")
    assert cfg.ca.extra_certificates == str(tmp_path / "ca.pem")
    assert cfg.prebuilt.find_links == [str(tmp_path / "conf" / "wheels"), "https://example.org/w/"]


def test_unset_variable_in_a_path_is_an_error(monkeypatch):
    monkeypatch.delenv("NO_SUCH_VAR_I16", raising=False)
    with pytest.raises(ConfigError, match=r"\$NO_SUCH_VAR_I16, which is not set"):
        load_config(None, {"BUILDER_DATA_DIR": "$NO_SUCH_VAR_I16/x"})


def test_control_characters_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="control character"):
        load_config(write(tmp_path, 'data_dir = "/tmp/a\\u0000b"\n'), {})
    with pytest.raises(ConfigError, match="control character"):
        load_config(None, {"BUILDER_INDEX_DIR": "/tmp/\x1b[2Jx"})


def test_non_utf8_file_is_one_error(tmp_path):
    path = tmp_path / "builder.toml"
    path.write_bytes(b'[toolchain]\ngcc = "12\xff"\n')
    with pytest.raises(ConfigError, match=r"builder.toml:2: not UTF-8 text \(byte 0xff\)"):
        load_config(path, {})


def test_unknown_section_suggests_the_closest(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "[biuld]\njobs = 1\n"), {})
    assert info.value.hint.startswith("did you mean [build]? known sections: ")


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
