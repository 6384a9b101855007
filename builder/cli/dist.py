"""`builder dist up|down|status`: a local sccache-dist cluster (scheduler + build servers on
127.0.0.1) to try distributed builds and to test them; a team runs the same processes on
its own machines (README, "Distributed compilation")."""

from __future__ import annotations

from pathlib import Path

import typer

from builder.caches import dist
from builder.cli.common import app, get_config, handle_errors
from builder.console import out

dist_app = typer.Typer(help="A local sccache-dist cluster (scheduler and build servers).", no_args_is_help=True)
app.add_typer(dist_app, name="dist", help="Start, stop or inspect a local sccache-dist cluster.")


def _root() -> Path:
    return Path(get_config().data_dir) / "dist"


@dist_app.command("up")
@handle_errors
def up_cmd(
    servers: int = typer.Option(2, "--servers", min=1, max=64, help="Build servers to start."),
    cpus: int = typer.Option(0, "--cpus-per-server", min=0, help="Pin each server to this many cores (0: all)."),
) -> None:
    """Start a scheduler and build servers on 127.0.0.1 (needs root and bubblewrap).
    """
    cluster = dist.up(_root(), servers, cpus)
    out.print(f"scheduler {cluster.scheduler}, servers {', '.join(cluster.servers)}", markup=False)
    out.print(f"use it: builder wheels --torch main --dist {cluster.scheduler}   "
              f"(token: [dist] token_file = \"{cluster.token_file}\")", markup=False)


@dist_app.command("down")
@handle_errors
def down_cmd() -> None:
    """Stop the cluster `builder dist up` started (by its recorded pids).
    """
    stopped = dist.down(_root())
    out.print(f"stopped {', '.join(stopped)}" if stopped else "no cluster is running here", markup=False)


@dist_app.command("status")
@handle_errors
def status_cmd() -> None:
    """The local cluster's scheduler and what it reports.
    """
    cluster = dist.load(_root())
    if cluster is None:
        out.print("no cluster is running here (builder dist up)", markup=False)
        raise typer.Exit(1)
    status = dist.probe(cluster.scheduler, cluster.token_file.read_text().strip())
    state = "unreachable" if status is None else f"{status.servers} servers, {status.cpus} cores"
    out.print(f"scheduler {cluster.scheduler}: {state}", markup=False)
