"""Recipes: what is specific to one package (env, commands, smoke check).

Adding a package (say torchvision) means one new recipe module registered here,
not edits across the tree.
"""

from __future__ import annotations

from builder.errors import ConfigError
from builder.recipes.base import BuildContext, Recipe
from builder.recipes.torch import TorchRecipe
from builder.recipes.xla import XlaRecipe

RECIPES: dict[str, Recipe] = {"torch": TorchRecipe(), "xla": XlaRecipe()}


def built_projects() -> frozenset[str]:
    """The wheel projects builder builds itself (never fetched from PyPI as a dependency)."""
    return frozenset(recipe.project for recipe in RECIPES.values())


def get_recipe(name: str, cfg=None) -> Recipe:  # noqa: ANN001 - Config: [packages] tables add recipes
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(f"no recipe named {name!r}", f"known: {', '.join(RECIPES)}") from None


__all__ = ["BuildContext", "Recipe", "RECIPES", "built_projects", "get_recipe"]
