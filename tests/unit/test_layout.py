"""The folder tree is the architecture: imports point down the layers, never up; no
module is over the size the design allows; and no module outside recipes/ (and the
torch_xla program tooling in xla/) names a package builder builds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "builder"
# top to bottom: a module may import its own layer and the layers below it
LAYERS = ["cli", "run", "report", "caches", "xla", "recipes", "repro", "index", "stages", "source", "core"]
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
    assert LAYERS.index(layer_of("builder.run.pipeline")) < LAYERS.index(layer_of("builder.index.fetch"))


# ------------------------------------------------------------- no package names outside recipes/
# The packages builder has recipes for, as a name part (torch_repo, "xla", xla_layout ...).
PACKAGE_NAMES = re.compile(r"(?:^|_|\b)(torch|xla|torchvision|torchaudio|pytorch)(?:$|_|\b)", re.IGNORECASE)
# recipes/ holds what is specific to a package; xla/ is the torch_xla *program* tooling
# (xla-check), and cli/xla.py its command; examples/ are the fixture repos.
MAY_NAME_PACKAGES = ("recipes/", "xla/", "cli/xla.py", "examples/")
# the xla-check command's registration (its module) and its --help example key
COMMAND_NAMES = {"cli/main.py": {"xla"}, "cli/examples.py": {"xla-check"}}


def named_packages(source: str) -> list[tuple[int, str]]:
    """Identifiers, import paths and code strings (no whitespace: keys, flags, names) that
    name a package. Docstrings and prose (help texts, messages, examples) are not code."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            texts = [node.value] if not re.search(r"\s", node.value) else []
        elif isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            texts = [node.name]
        elif isinstance(node, ast.arg):
            texts = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg:
            texts = [node.arg]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or "", *(a.asname or a.name for a in node.names)]
        elif isinstance(node, ast.Import):
            texts = [a.asname or a.name for a in node.names]
        found += [(getattr(node, "lineno", 0), t) for t in texts if PACKAGE_NAMES.search(t)]
    return found


def test_the_name_check_catches_what_it_should():
    code = 'from builder.recipes.xla_layout import assemble\ntorch_repo = cfg.repos.xla\nif r == "torch": pass\n'
    assert sorted(t for _, t in named_packages(code)) == ["builder.recipes.xla_layout", "torch", "torch_repo", "xla"]
    prose = '"""Builds torch."""\nhelp = "a torch ref, e.g. --torch main"\nname = "torchlike"\n'
    assert named_packages(prose) == []


@pytest.mark.parametrize("path", [p for p in modules()
                                  if not str(p.relative_to(PACKAGE)).startswith(MAY_NAME_PACKAGES)],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outside_recipes_names_a_package(path):
    allowed = COMMAND_NAMES.get(str(path.relative_to(PACKAGE)), set())
    found = [(line, text) for line, text in named_packages(path.read_text()) if text not in allowed]
    assert not found, f"{path.relative_to(PACKAGE)} names packages (move it into a recipe): {found[:5]}"


# ------------------------------------------------------------- no import circle, no output-like names
def import_graph() -> dict[str, set[str]]:
    """Module -> the builder modules it imports (function-level imports too): ``from
    builder.cli import cache`` is an edge to builder.cli.cache, ``from builder.x import name``
    one to builder.x."""
    known = {module_name(p) for p in modules()}
    graph: dict[str, set[str]] = {}
    for path in modules():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builder"):
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    edges.add(child if child in known else node.module)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in known)
        graph[module_name(path)] = {e for e in edges if e in known} - {module_name(path)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_a_module_that_imports_it_back():
    graph = import_graph()
    assert "builder.cli.common" in graph["builder.cli.wheels"]  # the graph resolves real edges
    assert not cycles(graph), f"import circles: {cycles(graph)}"


def test_the_circle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


OUTPUT_NAMES = {"build", "dist", "out", "target", "output", "bin", "obj"}


def test_no_package_folder_is_named_like_build_output():
    folders = [p.relative_to(PACKAGE) for p in PACKAGE.rglob("*") if p.is_dir() and p.name in OUTPUT_NAMES
               and "__pycache__" not in p.parts]
    assert not folders, f"folders named like build output (ignored by editors, linters, git templates): {folders}"
