"""The free tables of builder.toml: [repos] NAME = URL and [packages.NAME]."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import builder.recipes  # noqa: F401 (registers the built-in recipes: their names and default repositories)
from builder.config import Config, PackageConfig, as_dict, load_config
from builder.errors import ConfigError
from builder.recipes import get_recipe

SPLINE = '''
[packages.spline]
sdist = "torch-spline-conv"
env = { FORCE_ONLY_CPU = "1" }
build_requires = ["setuptools", "wheel>=0.40"]
import_name = "torch_spline_conv"
'''


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "builder.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ or {})
    assert "\n" not in info.value.message
    return info.value


def test_repos_is_a_free_table_with_recipe_defaults(tmp_path):
    cfg = load_config(write(tmp_path, '[repos]\ntorchvision = "https://example.org/vision.git"\n'), {})
    assert cfg.repos.get("torchvision") == "https://example.org/vision.git"
    assert cfg.repos.get("torch") is None  # only what was set
    # a recipe's URL: the configured one, else its upstream default
    assert get_recipe("torch").repo_url(cfg) == "https://github.com/pytorch/pytorch.git"
    assert get_recipe("xla").repo_url(cfg) == "https://github.com/pytorch/xla.git"
    # the attribute access of callers written for fixed keys still works
    assert cfg.repos.torch == "https://github.com/pytorch/pytorch.git"
    assert cfg.repos.torchvision == "https://example.org/vision.git"
    with pytest.raises(AttributeError):
        cfg.repos.nothing_here  # noqa: B018
    with pytest.raises(TypeError):
        cfg.repos["torch"] = "file:///x"


def test_repos_from_file_env_and_flags(tmp_path):
    path = write(tmp_path, '[repos]\ntorch = "file:///srv/torch"\nxla = "file:///srv/xla"\n')
    cfg = load_config(path, {"BUILDER_REPOS_XLA": "file:///env/xla", "BUILDER_REPOS_TORCHVISION": "file:///env/tv"},
                      {"repos.torch": "file:///flag/torch"})
    assert dict(cfg.repos) == {"torch": "file:///flag/torch", "xla": "file:///env/xla", "torchvision": "file:///env/tv"}
    assert get_recipe("xla").repo_url(cfg) == "file:///env/xla"
    assert cfg.repos.torch == "file:///flag/torch"


def test_repos_values_are_checked(tmp_path):
    err = error_of(tmp_path, '[repos]\ntorch = "file:///ok"\nvision = "ext::sh -c evil"\n')
    assert "builder.toml:3" in err.message and "repos.vision" in err.message
    err = error_of(tmp_path, '[repos]\nVision = "https://example.org/v.git"\n')
    assert "'Vision' is not a valid recipe name" in err.message
    with pytest.raises(ConfigError, match="repos.torch"):
        load_config(None, {"BUILDER_REPOS_TORCH": "ftp://example.org/x"})


def test_a_package_table_is_parsed(tmp_path):
    cfg = load_config(write(tmp_path, SPLINE), {})
    assert cfg.packages == {"spline": PackageConfig(sdist="torch-spline-conv", env={"FORCE_ONLY_CPU": "1"},
                                                    build_requires=("setuptools", "wheel>=0.40"),
                                                    import_name="torch_spline_conv")}
    assert cfg.packages["spline"].builds_against is None  # the recipe's default
    data = as_dict(cfg)
    assert data["packages"]["spline"]["env"] == {"FORCE_ONLY_CPU": "1"}
    json.dumps(data)  # `builder config --json`
    text = ('[packages.spline]\nrepo = "https://github.com/rusty1s/pytorch_spline_conv.git"\n'
            'smoke = "import torch_spline_conv\\nprint(1)"\nbuilds_against = ["torch"]\n')
    git = load_config(write(tmp_path, text), {})
    assert git.packages["spline"].repo.endswith(".git") and git.packages["spline"].builds_against == ("torch",)


@pytest.mark.parametrize("text, words", [
    (SPLINE.replace("import_name", "import_nmae"), ["builder.toml:6", "unknown key packages.spline.import_nmae",
                                                     "did you mean import_name?"]),
    ('[packages.spline]\nsdist = "a"\nrepo = "https://example.org/a.git"\n',
     ["builder.toml:1", "both of sdist and repo"]),
    ('[packages.spline]\nenv = { A = "1" }\n', ["neither of sdist and repo"]),
    ('[packages.spline]\nsdist = "a"\nenv = { FORCE_ONLY_CPU = 1 }\n',
     ["packages.spline.env.FORCE_ONLY_CPU must be a string", 'quote it: FORCE_ONLY_CPU = "1"']),
    ('[packages.spline]\nsdist = "a"\nenv = { lower = "1" }\n', ["environment variable name"]),
    ('[packages.spline]\nsdist = "a"\nenv = { A = "$(id)" }\n', ["packages.spline.env.A"]),
    ('[packages.Spline]\nsdist = "a"\n', ["'Spline' is not a valid recipe name"]),
    ('[packages."sp line"]\nsdist = "a"\n', ["is not a valid recipe name"]),
    ('[packages.torch]\nsdist = "a"\n', ["[packages.torch] has the name of the built-in recipe 'torch'"]),
    ('[packages.spline]\nsdist = "a b"\n', ["packages.spline.sdist"]),
    ('[packages.spline]\nrepo = "ext::sh"\n', ["packages.spline.repo"]),
    ('[packages.spline]\nsdist = "a"\nbuild_requires = "setuptools"\n', ["must be a list of strings"]),
    ('[packages.spline]\nsdist = "a"\nbuild_requires = ["x @ https://evil/x.whl"]\n',
     ["packages.spline.build_requires"]),
    ('[packages.spline]\nsdist = "a"\nbuild_requires = ["--index-url=http://evil"]\n', ["not a valid requirement"]),
    ('[packages.spline]\nsdist = "a"\nimport_name = "a-b"\n', ["packages.spline.import_name"]),
    ('[packages.spline]\nsdist = "a"\nbuilds_against = ["Torch"]\n', ["packages.spline.builds_against"]),
    ('[packages.spline]\nsdist = "a"\nsmoke = "import a\\u0000"\n', ["control character"]),
    ('[packages]\nspline = "torch-spline-conv"\n', ["[packages.spline] must be a table"]),
    ('[pakages.spline]\nsdist = "a"\n', ["unknown section [pakages]", "did you mean [packages]?"]),
])
def test_bad_package_tables_are_one_line_errors(tmp_path, text, words):
    err = error_of(tmp_path, text)
    for word in words:
        assert word in str(err), str(err)


def test_packages_are_not_set_from_the_environment():
    with pytest.raises(ConfigError, match="builder.toml only"):
        load_config(None, {"BUILDER_PACKAGES_SPLINE_SDIST": "x"})


def test_default_config_has_empty_tables():
    cfg = Config()
    assert dict(cfg.repos) == {} and cfg.packages == {}
    loaded = load_config(None, {})  # no builder.toml, no environment: the defaults, tables empty
    assert dict(loaded.repos) == {} and loaded.packages == {}
    assert loaded == cfg
    assert load_config(None, {"BUILDER_REPOS_TORCH": "file:///r"}) != cfg  # equality sees the tables
