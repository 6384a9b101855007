"""`builder demo`: the whole pipeline on the bundled example repos, offline, in minutes.

Writes the fake torch and fake xla (shipped with the package) into a temp dir as git
repos, then runs the same commands a user types, against a private data dir: images,
wheels, and the index listing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import typer

from builder.cli import app, handle_errors, output_dir
from builder.console import err
from builder.errors import BuildError


def demo_commands(config: Path) -> list[list[str]]:
    base = [sys.executable, "-m", "builder", "--config", str(config)]
    return [
        [*base, "images"],
        [*base, "wheels", "--torch", "main", "--xla", "main"],
        [*base, "wheels", "--torch", "main", "--xla", "main"],  # the no-op rerun
        [*base, "index", "list"],
    ]


@app.command("demo")
@handle_errors
def demo_cmd(
    workdir: Path = typer.Option(None, "--workdir",
                                 help="Where to write the example repos and data (default: temp dir)."),
    ca: str = typer.Option(None, "--extra-ca", help="Extra CA bundle for containers (default: $PIP_CERT if set)."),
) -> None:
    """Run the real pipeline on bundled example repos (fake torch + fake xla), offline."""
    from builder.examples import BazelMirror, write_example_repo

    root = output_dir(workdir, "--workdir") if workdir else Path(tempfile.mkdtemp(prefix="builder-demo-"))
    torch_repo = write_example_repo("faketorch", root / "repos" / "faketorch")
    xla_repo = write_example_repo("fakexla", root / "repos" / "fakexla")
    extra_ca = ca or os.environ.get("PIP_CERT", "")
    # fakexla's .bazelversion names Bazel 7.4.1: bazelisk fetches the example's stand-in
    # from this mirror (on 127.0.0.1, for the demo's duration) instead of releases.bazel.build.
    with BazelMirror(root / "bazel-mirror") as mirror:
        config = root / "builder.toml"
        config.write_text(  # JSON strings are TOML basic strings: a quote in a path stays data
            f'data_dir = {json.dumps(str(root / "data"))}\n'
            f'[repos]\ntorch = {json.dumps(f"file://{torch_repo}")}\nxla = {json.dumps(f"file://{xla_repo}")}\n'
            f'[bazel]\nbase_url = {json.dumps(mirror.url)}\n'
            + (f'[ca]\nextra_certificates = {json.dumps(extra_ca)}\n' if extra_ca else "")
        )
        err.print(f"demo: example repos and data in {root}", markup=False)
        for command in demo_commands(config):
            err.print("$ builder " + " ".join(command[5:]), markup=False)
            if subprocess.run(command).returncode != 0:
                raise BuildError(f"demo step failed: builder {' '.join(command[5:])}", f"see {root}")
    err.print(f"demo done: install with pip install --index-url file://{root / 'data' / 'index' / 'simple'}/ "
              "torch torch_xla", markup=False)
