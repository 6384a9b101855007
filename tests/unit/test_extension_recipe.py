"""The generic torch extension recipe made from a [packages.NAME] table."""

from __future__ import annotations

import pytest

from builder.config import Config, PackageConfig, load_config
from builder.errors import ConfigError
from builder.recipes import RECIPES, BuildContext, ExtensionRecipe, built_projects, get_recipe, recipes_for
from builder.settings import Repos

SPLINE = PackageConfig(sdist="torch-spline-conv", env={"FORCE_ONLY_CPU": "1"}, build_requires=("setuptools", "wheel"))


def config(**packages: PackageConfig) -> Config:
    return Config(packages=dict(packages))


def test_config_packages_become_recipes():
    cfg = config(spline=SPLINE)
    recipes = recipes_for(cfg)
    assert set(RECIPES) < set(recipes) and isinstance(recipes["spline"], ExtensionRecipe)
    recipe = get_recipe("spline", cfg)
    assert (recipe.name, recipe.project, recipe.sdist) == ("spline", "torch-spline-conv", "torch-spline-conv")
    assert recipe.import_name == "torch_spline_conv"  # derived from the project
    assert recipe.builds_against == ("torch",)  # the default
    assert recipe.build_requires == ("setuptools", "wheel")
    assert "torch-spline-conv" in built_projects(cfg) and "torch-spline-conv" not in built_projects()
    assert get_recipe("torch", cfg) is RECIPES["torch"]
    with pytest.raises(ConfigError, match="no recipe named 'spline'") as info:
        get_recipe("spline")  # without the config, only the built-ins
    assert "[packages.spline]" in str(info.value)


def test_env_has_the_tables_knobs_compilers_jobs_and_time():
    recipe = get_recipe("spline", config(spline=SPLINE))
    env = recipe.env(BuildContext(jobs=3, source_date_epoch=1678977120, extra_env={"EXTRA": "1"}))
    assert env == {"FORCE_ONLY_CPU": "1", "CC": "gcc", "CXX": "g++", "MAX_JOBS": "3",
                   "SOURCE_DATE_EPOCH": "1678977120", "EXTRA": "1"}
    assert "MAX_JOBS" in recipe.unkeyed_env()


def test_script_puts_a_ccache_masquerade_dir_first_and_installs_nothing():
    recipe = get_recipe("spline", config(spline=SPLINE))
    script = recipe.script(BuildContext(jobs=2, source_date_epoch=1, against=("torch==2.13.0+cpu",)))
    lines = script.splitlines()
    path = lines.index('export PATH="$HOME/.ccache-bin:$PATH"')
    links = lines[path - 1]
    assert links.startswith('mkdir -p "$HOME/.ccache-bin" && ')
    for name in ("gcc", "g++", "cc", "c++"):
        assert f'ln -sf "$(command -v ccache)" "$HOME/.ccache-bin/{name}"' in links
    assert path < lines.index("cd /src/spline")
    # torch comes installed in the container's image (builder.stages.installed), not from the script
    assert "pip install" not in script and "PYTHONPATH" not in script
    assert "python -m build --wheel --no-isolation" in script


def test_smoke_imports_the_module_or_runs_the_configured_code():
    plain = get_recipe("spline", config(spline=SPLINE)).smoke_code()
    assert plain.startswith("import torch_spline_conv\n")
    compile(plain, "smoke", "exec")
    named = ExtensionRecipe("spline", PackageConfig(sdist="torch-spline-conv", import_name="tsc"))
    assert named.smoke_code().startswith("import tsc\n")
    custom = ExtensionRecipe("spline", PackageConfig(sdist="x", smoke="import torch, torch_spline_conv"))
    assert custom.smoke_code() == "import torch, torch_spline_conv"


def test_builds_against_and_repo_urls():
    git = ExtensionRecipe("spline", PackageConfig(repo="https://example.org/spline.git", builds_against=()))
    assert git.builds_against == () and git.project == "spline"
    assert git.repo_url(Config()) == "https://example.org/spline.git"
    assert git.repo_url(Config(repos=Repos({"spline": "file:///srv/spline"}))) == "file:///srv/spline"
    with pytest.raises(ConfigError, match="sdist of 'torch-spline-conv'"):
        ExtensionRecipe("spline", SPLINE).repo_url(Config())


def test_a_hand_made_config_cannot_shadow_a_built_in():
    with pytest.raises(ConfigError, match="built-in recipe 'torch'"):
        recipes_for(config(torch=SPLINE))


def test_from_builder_toml(tmp_path):
    path = tmp_path / "builder.toml"
    path.write_text('[packages.spline]\nsdist = "torch-spline-conv"\nenv = { FORCE_ONLY_CPU = "1" }\n'
                    'smoke = "import torch, torch_spline_conv"\n')
    recipe = get_recipe("spline", load_config(path, {}))
    assert recipe.env(BuildContext(jobs=1, source_date_epoch=0))["FORCE_ONLY_CPU"] == "1"
    assert recipe.smoke_code() == "import torch, torch_spline_conv"


def test_env_rows_of_the_upstream_table_are_the_recipes():
    from pathlib import Path

    table = (Path(__file__).resolve().parents[2] / "docs" / "upstream.md").read_text()
    rows = {cells[2].strip("`") for line in table.splitlines()
            if len(cells := [c.strip() for c in line.strip().strip("|").split("|")]) == 4
            and cells[:2] == ["extension", "env"]}
    recipe = ExtensionRecipe("spline", PackageConfig(sdist="torch-spline-conv"))  # no table env
    assert set(recipe.env(BuildContext(jobs=2, source_date_epoch=1))) == rows
