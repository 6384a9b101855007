"""Image commands: render, images, base bootstrap, config show."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from builder import config as config_mod
from builder.cli import app, get_config, handle_errors
from builder.console import out


@app.command("config")
@handle_errors
def config_show(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Show the effective configuration (defaults < builder.toml < BUILDER_* < flags)."""
    cfg = get_config()
    data = config_mod.as_dict(cfg)
    if as_json:
        out.print_json(json.dumps(data))
        return
    out.print(f"# source: {cfg.source}")
    for section, values in data.items():
        if isinstance(values, dict):
            out.print(f"[{section}]", markup=False)
            for key, value in values.items():
                out.print(f"{key} = {json.dumps(value)}", markup=False)
        else:
            out.print(f"{section} = {json.dumps(values)}", markup=False)


_ = Path  # keep import for later commands
