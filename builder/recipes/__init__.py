"""Recipes: what is specific to one package (env, commands, smoke check).

Adding a package (say torchvision) means one new recipe module registered here,
not edits across the tree; a torch extension needs no module at all: a
``[packages.NAME]`` table in builder.toml makes an :class:`ExtensionRecipe`.
"""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from builder.errors import ConfigError
from builder.recipes.base import BuildContext, Recipe
from builder.recipes.extension import ExtensionRecipe
from builder.recipes.torch import TorchRecipe
from builder.recipes.torch_tpu import TorchTpuRecipe
from builder.recipes.torchvision import TorchvisionRecipe
from builder.recipes.xla import XlaRecipe
from builder.settings import register_recipe

RECIPES: dict[str, Recipe] = {"torch": TorchRecipe(), "xla": XlaRecipe(), "torchvision": TorchvisionRecipe(),
                              "torch_tpu": TorchTpuRecipe()}
for _recipe in RECIPES.values():  # the config reserves their names and knows their default repositories
    register_recipe(_recipe.name, _recipe.default_repo)


def recipes_for(cfg=None) -> dict[str, Recipe]:  # noqa: ANN001 - Config
    """The built-in recipes and the config's ``[packages.NAME]`` extensions, by name."""
    found: dict[str, Recipe] = dict(RECIPES)
    for name, package in (getattr(cfg, "packages", None) or {}).items():
        if name in RECIPES:  # load_config refuses it already; a Config made by hand is checked here
            raise ConfigError(f"[packages.{name}] has the name of the built-in recipe {name!r}",
                              "choose another name for the package")
        found[name] = ExtensionRecipe(name, package)
    return found


def built_projects(cfg=None) -> frozenset[str]:  # noqa: ANN001 - Config
    """The wheel projects builder builds itself (never fetched from PyPI as a dependency)."""
    return frozenset(recipe.project for recipe in recipes_for(cfg).values())


def deps_layer_requirements(recipe: Recipe, requirements: tuple[str, ...]) -> tuple[str, ...]:
    """The commit's build requirements the deps layer installs: all but the projects the
    package builds against. Those come from the local index at build time (this run's
    wheel, ``BuildContext.against``); pytorch/vision's pyproject lists "torch", which the
    layer would otherwise take from PyPI (a different torch, and gigabytes)."""
    against = {canonicalize_name(RECIPES[name].project) for name in recipe.builds_against if name in RECIPES}
    return tuple(r for r in requirements if canonicalize_name(Requirement(r).name) not in against)


def get_recipe(name: str, cfg=None) -> Recipe:  # noqa: ANN001 - Config
    """The recipe called ``name``: a built-in, or (given ``cfg``) a ``[packages.NAME]`` table."""
    known = recipes_for(cfg)
    try:
        return known[name]
    except KeyError:
        raise ConfigError(f"no recipe named {name!r}",
                          f"known: {', '.join(known)}; a torch extension is a [packages.{name}] table in builder.toml"
                          ) from None


__all__ = ["BuildContext", "Recipe", "RECIPES", "ExtensionRecipe", "built_projects", "deps_layer_requirements",
           "get_recipe", "recipes_for"]
