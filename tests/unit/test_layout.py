"""The folder tree is the architecture: imports point down the layers, never up; no
module is over the size the design allows; and no module outside recipes/ (and the
torch_xla program tooling in xla/) names a package builder builds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "builder"
# top to bottom: a module may import its own layer and the layers below it
LAYERS = ["cli", "build", "xla", "recipes", "repro", "index", "stages", "source", "core"]
MAX_LINES = 400


def layer_of(module: str) -> str:
    """``builder.index.fetch`` -> ``index``; top-level modules (config, engine...) are the core."""
    parts = module.split(".")
    if module == "builder.__main__":  # `python -m builder`: the command line
        return "cli"
    if len(parts) > 2 and parts[1] in LAYERS:
        return parts[1]
    if len(parts) == 2 and parts[1] in LAYERS:  # the package itself
        return parts[1]
    return "core"


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "examples" not in p.relative_to(PACKAGE).parts)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder"):
            if node.module == "builder":
                found += [f"builder.{alias.name}" for alias in node.names]
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("builder.")]
    return found


def test_the_layers_are_the_top_level_folders():
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and p.name != "examples")
    assert folders == sorted(set(LAYERS) - {"core"})


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    here = LAYERS.index(layer_of(module_name(path)))
    upward = [m for m in imports(path) if LAYERS.index(layer_of(m)) < here]
    assert not upward, f"{path.relative_to(PACKAGE)} ({LAYERS[here]}) imports from a higher layer: {upward}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_over_the_size_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines (limit {MAX_LINES}): split it"


def test_a_layer_check_that_can_fail():
    # the checks above would pass vacuously if the names did not resolve to layers
    assert layer_of("builder.cli.wheels") == "cli" and layer_of("builder.config") == "core"
    assert LAYERS.index(layer_of("builder.build.pipeline")) < LAYERS.index(layer_of("builder.index.fetch"))
