"""`builder demo`: the whole pipeline on the bundled example repos, offline, in minutes.

Writes the fake torch and fake xla (shipped with the package) into its workdir as git
repos, then runs the same commands a user types, against a data dir in that workdir:
images, wheels, and the index listing. The workdir keeps a builder.toml, so the demo's
results stay findable afterwards (`builder -c WORKDIR/builder.toml index list`), and a
second run in the same workdir reuses its repos and is a no-op.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import typer

from builder.cli.common import app, handle_errors, output_dir
from builder.console import err, out
from builder.errors import BuildError


def demo_recipes() -> list:
    """The recipes with a bundled example repo (``Recipe.example``): what the demo builds."""
    from builder.recipes import RECIPES

    return [recipe for recipe in RECIPES.values() if recipe.example]


def demo_commands(config: Path) -> list[list[str]]:
    """images, wheels (twice: the second a no-op), index list. wheels names the recipes no
    other demo recipe builds against, each at main: the others come in through the graph,
    at the commit their dependents pin (fakexla's .torch_commit, as pytorch/xla's), since
    torch main and xla master do not compile together (C++20 vs C++17)."""
    base = [sys.executable, "-m", "builder", "--config", str(config)]
    recipes = demo_recipes()
    tops = [r for r in recipes if not any(r.name in other.builds_against for other in recipes)]
    wheels = [*base, "wheels", *(f"--{recipe.name}=main" for recipe in tops)]
    return [
        [*base, "images"],
        wheels,
        wheels,  # the no-op rerun
        [*base, "index", "list"],
    ]


@app.command("demo")
@handle_errors
def demo_cmd(
    workdir: Path = typer.Option(None, "--workdir",
                                 help="Where to write the example repos and data (default: temp dir)."),
    ca: str = typer.Option(None, "--extra-ca", help="Extra CA bundle for containers (default: the one "
                           "$SSL_CERT_FILE, $REQUESTS_CA_BUNDLE or $PIP_CERT names, as for every command)."),
) -> None:
    """Run the real pipeline on bundled example repos (fake torch + fake xla), offline."""
    from builder.examples import BazelMirror

    root = (output_dir(workdir, "--workdir") if workdir else Path(tempfile.mkdtemp(prefix="builder-demo-"))).absolute()
    repos = {recipe.name: example_repo(recipe.example, root / "repos" / recipe.example) for recipe in demo_recipes()}
    extra_ca = ca or ""
    # An example's .bazelversion (fakexla's: Bazel 7.4.1): bazelisk fetches the example's stand-in
    # from this mirror (on 127.0.0.1, for the demo's duration) instead of releases.bazel.build.
    with BazelMirror(root / "bazel-mirror") as mirror:
        config = root / "builder.toml"
        config.write_text(  # JSON strings are TOML basic strings: a quote in a path stays data
            f'data_dir = {json.dumps(str(root / "data"))}\n'
            "[repos]\n" + "".join(f"{name} = {json.dumps(f'file://{path}')}\n" for name, path in repos.items())
            + f'[bazel]\nbase_url = {json.dumps(mirror.url)}\n'
            # the example repos are a few MB: the recipes' figures for real pytorch and xla
            # (Recipe.disk_gib) do not apply; [build] min_free_disk_gib still does
            + "[build]\ndisk_estimate_scale = 0\n"
            + (f'[ca]\nextra_certificates = {json.dumps(extra_ca)}\n' if extra_ca else "")
        )
        err.print(f"demo: example repos and data in {root}", markup=False)
        for command in demo_commands(config):
            err.print("$ builder " + " ".join(command[5:]), markup=False)
            if subprocess.run(command).returncode != 0:
                raise BuildError(f"demo step failed: builder {' '.join(command[5:])}", f"see {root}")
    err.print(f"demo done: install with pip install --index-url file://{root / 'data' / 'index' / 'simple'}/ "
              + " ".join(recipe.project for recipe in demo_recipes()), markup=False)
    err.print("demo results: list them again any time with", markup=False)
    out.print(index_list_command(config), markup=False)


def index_list_command(config: Path) -> str:
    """The exact line that lists the demo's index later (the demo's own builder.toml)."""
    return f"builder -c {shlex.quote(str(config))} index list"


def example_repo(name: str, dest: Path) -> Path:
    """The example repo at ``dest``: written once, reused by later demos in the same
    workdir (its commits are deterministic, so a rerun builds nothing new)."""
    from builder.examples import write_example_repo

    if (dest / ".git").exists():
        return dest
    return write_example_repo(name, dest)
