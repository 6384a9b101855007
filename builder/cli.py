"""The `builder` command line: parses options, prints progress, nothing else.

Each sub-command loads the Config once, calls into the library and turns a
BuilderError into one ``error: ...`` line and a non-zero exit.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from builder import __version__
from builder.config import Config, find_config_file, load_config
from builder.console import err
from builder.errors import BuilderError

app = typer.Typer(
    name="builder",
    help="Containerized, reproducible builds of PyTorch and PyTorch/XLA wheels.",
    epilog="Example: builder demo   (see `builder COMMAND --help` for each command's example)",
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

_state: dict[str, Any] = {"config_path": None, "no_host_ca": False}

# What `builder` alone prints: the three commands a newcomer needs, before the full list.
FIRST_STEPS = """builder: containerized, reproducible builds of PyTorch and PyTorch/XLA wheels.

Start here:
  builder demo                                   the whole pipeline on bundled example repos (minutes, no config)
  builder wheels --torch main --xla main         build torch + torch_xla wheels from git refs into the local index
  builder index serve                            serve that index over HTTP (pip install --index-url URL torch)

All commands: builder --help"""


def handle_errors(func: F) -> F:
    """Turn BuilderError into ``error: ...`` on stderr and exit code 1 (130/143 on signals)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BuilderError as exc:
            err.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("[bold red]error:[/] interrupted (SIGINT); containers and temporary files removed")
            raise typer.Exit(130) from None
        except Terminated:
            err.print("[bold red]error:[/] terminated (SIGTERM); containers and temporary files removed")
            raise typer.Exit(143) from None

    return wrapper  # type: ignore[return-value]


class Terminated(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that every ``finally`` and context
    manager (containers, temp dirs, locks) unwinds the same way."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def get_config(overrides: dict[str, Any] | None = None) -> Config:
    import os

    path = find_config_file(_state["config_path"], os.environ)
    if _state["no_host_ca"]:
        overrides = {**(overrides or {}), "ca.extra_certificates": ""}
    return load_config(path, os.environ, overrides)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    config: Path | None = typer.Option(None, "--config", "-c", help="Path to builder.toml."),
    no_host_ca: bool = typer.Option(False, "--no-host-ca",
                                    help="Do not trust the CA bundle $SSL_CERT_FILE / $REQUESTS_CA_BUNDLE / "
                                         "$PIP_CERT names (same as \\[ca] extra_certificates = \"\")."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Containerized, reproducible builds of PyTorch and PyTorch/XLA wheels."""
    if version:
        typer.echo(f"builder {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(FIRST_STEPS)
        raise typer.Exit(0)
    _state["config_path"] = str(config) if config else None
    _state["no_host_ca"] = no_host_ca


def _register() -> None:
    # Sub-command modules register themselves on `app`; imported here so that
    # `builder --help` lists every command.
    from builder import cli_cache, cli_demo, cli_images, cli_nightly, cli_repro, cli_wheels  # noqa: F401
    try:
        from builder import cli_index  # noqa: F401
    except ImportError:  # pragma: no cover - during development only
        pass
    from builder import cli_xla  # noqa: F401  (index fetch, xla-check)
    from builder.cli_examples import attach

    attach(app)


def main() -> None:
    signal.signal(signal.SIGTERM, _on_sigterm)
    _register()
    try:
        app()
    except BuilderError as exc:  # pragma: no cover - safety net
        err.print(f"[bold red]error:[/] {exc}")
        sys.exit(exc.exit_code)

