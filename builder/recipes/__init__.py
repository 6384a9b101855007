"""Recipes: what is specific to one package (env, commands, smoke check).

Adding a package (say torchvision) means one new recipe module registered here,
not edits across the tree.
"""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from builder.errors import ConfigError
from builder.recipes.base import BuildContext, Recipe
from builder.recipes.torch import TorchRecipe
from builder.recipes.torchvision import TorchvisionRecipe
from builder.recipes.xla import XlaRecipe

RECIPES: dict[str, Recipe] = {"torch": TorchRecipe(), "xla": XlaRecipe(), "torchvision": TorchvisionRecipe()}


def built_projects() -> frozenset[str]:
    """The wheel projects builder builds itself (never fetched from PyPI as a dependency)."""
    return frozenset(recipe.project for recipe in RECIPES.values())


def deps_layer_requirements(recipe: Recipe, requirements: tuple[str, ...]) -> tuple[str, ...]:
    """The commit's build requirements the deps layer installs: all but the projects the
    package builds against. Those come from the local index at build time (this run's
    wheel, ``BuildContext.against``); pytorch/vision's pyproject lists "torch", which the
    layer would otherwise take from PyPI (a different torch, and gigabytes)."""
    against = {canonicalize_name(RECIPES[name].project) for name in recipe.builds_against if name in RECIPES}
    return tuple(r for r in requirements if canonicalize_name(Requirement(r).name) not in against)


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(f"no recipe named {name!r}", f"known: {', '.join(RECIPES)}") from None


__all__ = ["BuildContext", "Recipe", "RECIPES", "built_projects", "deps_layer_requirements", "get_recipe"]
