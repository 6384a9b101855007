"""`builder index fetch` and `builder xla-check`: option parsing and printing only.

The work is in builder.index.fetch (resolve, download, publish), builder.recipes.xla_pairing and
builder.xla.check. Data goes to stdout (JSON with --json), progress and errors to stderr.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from typer.core import TyperCommand

from builder.cli.common import app, get_config, handle_errors
from builder.cli.index import index_app
from builder.console import err, out, print_error, print_table
from builder.index.download import completion_notes

if TYPE_CHECKING:  # the check itself is imported when the command runs
    from builder.xla.check import CheckReport


@contextlib.contextmanager
def download_progress() -> Iterator:
    """A progress bar per downloading file on stderr (a line per finished file when stderr
    is not a terminal); the callback is thread-safe."""
    lock = threading.Lock()
    if not err.is_terminal:
        yield completion_notes(lambda text: err.print(text, markup=False, highlight=False))
        return
    bars = Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                    TransferSpeedColumn(), console=err, transient=False)
    tasks: dict[str, int] = {}

    def update(filename: str, done: int, total: int | None) -> None:
        with lock:
            if filename not in tasks:
                tasks[filename] = bars.add_task(filename[:60], total=total)
            bars.update(tasks[filename], completed=done, total=total)

    with bars:
        yield update


def requirement_spec(text: str) -> str:
    """A PEP 508 requirement naming a project from the index (no URL, no option-like text)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from builder.errors import ValidationError

    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ValidationError(f"SPEC {text!r} is not a requirement: {exc}") from None
    if req.url or text.startswith("-"):
        raise ValidationError(f"SPEC {text!r}: name a project and version (torch==2.9.0), not a URL or option")
    return text


@index_app.command("fetch")
@handle_errors
def index_fetch(
    specs: list[str] = typer.Argument(..., help="Requirements, e.g. torch==2.9.0 torch_xla==2.9.0."),
    source: str = typer.Option(None, "--from", help="Upstream: an index URL (PEP 503), a file:// or local "
                               "index, or a directory of wheels (default: \\[prebuilt] index_url)."),
    no_deps: bool = typer.Option(False, "--no-deps", help="Fetch only the named wheels, not their dependencies."),
    refresh: bool = typer.Option(False, "--refresh", help="Resolve against upstream even when the local index "
                                 "already satisfies the specs."),
    download_cache: str = typer.Option(None, "--download-cache", help="Verified downloads kept for reruns "
                                       "(default: \\[prebuilt] download_cache, else ~/.cache/builder/downloads)."),
    directory: Path | None = typer.Option(None, "--dir", help="Index directory (default: \\[index] dir)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
) -> None:
    """Download wheels for the python stage's interpreter into the local index, checked against
    the upstream page's sha256, through a download cache (a rerun downloads nothing)."""
    from builder.index.directory import DirectoryIndex
    from builder.index.download import default_cache_dir
    from builder.index.fetch import fetch
    from builder.index.resolve import sources_for
    from builder.interpreter import Interpreter
    from builder.recipes.xla_pairing import check_requirements

    cfg = get_config({"prebuilt.download_cache": download_cache,
                      "index.dir": str(directory) if directory else None})
    requirements = [requirement_spec(s) for s in specs]
    check_requirements(requirements, "builder index fetch")  # a mismatched pair: refused before any download
    sources = sources_for(source, cfg.prebuilt.index_url, cfg.prebuilt.find_links)
    index = DirectoryIndex(cfg.index_dir)
    cache = default_cache_dir(cfg.prebuilt.download_cache)
    with download_progress() as progress:
        result = fetch(requirements, index, cache, Interpreter.of(cfg), sources.index_url, list(sources.find_links),
                       deps=not no_deps, log=cfg.logs_dir / "fetch.log", refresh=refresh, progress=progress,
                       note=lambda text: err.print(text, markup=False, highlight=False))
    if as_json:
        typer.echo(json.dumps({**result.as_dict(), "index": str(index.root), "download_cache": str(cache)}, indent=2))
        return
    for item in result.items:
        out.print(f"{item.status:<10} {item.pin.filename}  sha256={item.pin.sha256[:16]}", markup=False)
    err.print(f"{result.summary()}; index: {index.simple_url()}", markup=False, highlight=False)


VALUE_OPTIONS = ("--torch", "--xla")  # xla-check's options that take a separate value


def strict_as_flag(args: list[str]) -> list[str]:
    """``--strict`` alone (before the script) as ``--strict=error``: click would otherwise take
    the next word, the script, as its value. After the script, words are the script's."""
    out, skip = list(args), False
    for i, arg in enumerate(out):
        if skip:
            skip = False
        elif arg == "--strict":
            out[i] = "--strict=error"
        elif arg in VALUE_OPTIONS:
            skip = True
        elif arg == "--" or not arg.startswith("-"):
            break
    return out


class StrictFlagCommand(TyperCommand):
    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        return super().parse_args(ctx, strict_as_flag(args))


@app.command("xla-check", cls=StrictFlagCommand,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                               "allow_interspersed_args": False})
@handle_errors
def xla_check(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The training script; ARGS after it are passed to it.",
                                  exists=True, dir_okay=False, readable=True),
    torch: str = typer.Option(None, "--torch", help="torch version (default: the index's, else 2.9.0)."),
    xla: str = typer.Option(None, "--xla", help="torch_xla version (default: the index's, else 2.9.0)."),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON on stdout."),
    strict: str = typer.Option(None, "--strict", metavar="[=SEVERITY]", help="A CI gate: exit 1 on any `error` "
                               "finding (a cost on most steps); --strict=warning also on warnings (periodic), "
                               "--strict=info on any finding."),
    verbose: bool = typer.Option(False, "--verbose", help="Also show torch_xla's analysis blocks live."),
) -> None:
    """Run a PyTorch/XLA script on the CPU PJRT backend with metrics and PT_XLA_DEBUG_LEVEL=2, and
    list what keeps it from executing lazily (recompiles, host syncs, CPU fallbacks, ...)."""
    import time

    from builder.errors import BuildError, ValidationError
    from builder.index.directory import DirectoryIndex
    from builder.xla.check import check_output
    from builder.xla.frequency import SEVERITIES
    from builder.xla.runtime import default_versions, prepare, run_script

    if strict is not None and strict not in SEVERITIES:
        raise ValidationError(f"--strict={strict} is not a severity", "use --strict (errors only), "
                              "--strict=warning or --strict=info")
    compile_script(script)  # before anything is fetched (torch + torch_xla are about 4 GB)
    cfg = get_config()
    torch, xla = default_versions(DirectoryIndex(cfg.index_dir), torch, xla)

    def note(text: str) -> None:
        err.print(text, markup=False, highlight=False)

    env = prepare(cfg, torch, xla, note)
    note(f"xla-check: {script} in {env.image} (torch {torch}, torch_xla {xla}, PJRT_DEVICE=CPU) ...")
    log_path = cfg.logs_dir / "xla-check" / f"{script.stem}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    output, code, seconds = run_script(env.image, script, list(ctx.args), log_path, note, verbose)
    report = check_output(output, str(script.resolve().parent), code)
    if not report.figures["metrics_read"]:
        raise BuildError(f"{script} exited with {code} before torch_xla's metrics could be read",
                         f"see the log {log_path}")
    data = {**report.as_dict(), "script": str(script), "args": list(ctx.args), "image": env.image,
            "torch": env.torch, "torch_xla": env.xla, "seconds": round(seconds, 3), "log": str(log_path)}
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        print_findings(report, script)
    err.print(f"log: {log_path}", markup=False, highlight=False)
    if code != 0:
        print_error(f"{script} exited with {code}", f"see the log {log_path}")
        raise typer.Exit(code)
    failing = report.failing(strict) if strict else []
    if failing:
        err.print(f"--strict={strict}: {len(failing)} finding(s) at {strict} or worse", markup=False,
                  highlight=False)
        raise typer.Exit(1)


def compile_script(script: Path) -> None:
    """Refuse a file that is not Python (a log, a binary, a typo'd path to a notebook) with
    one line naming where it fails to compile, before any image, download or run."""
    from builder.errors import ValidationError

    try:
        compile(script.read_bytes(), str(script), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        raise ValidationError(f"{script} is not a Python script ({where}{exc.msg})",
                              "pass the training script itself (python -m py_compile FILE shows the error)") from None
    except (ValueError, UnicodeDecodeError) as exc:  # NUL bytes, not text
        raise ValidationError(f"{script} is not a Python script ({exc})", "pass the training script itself") from None


def print_findings(report: CheckReport, script: Path) -> None:
    import os

    f = report.figures
    err.print(f"metrics: {f['steps']} step(s), {f['compiles']} compile(s), {f['executions']} execution(s), "
              f"{f['transfers_from_device']} device->host transfer(s), {len(f['aten_counters'])} aten:: counter(s)",
              markup=False, highlight=False)
    if not report.findings:
        out.print(f"{script}: no findings", markup=False)
        return
    rows = []
    for finding in report.findings:
        where = finding.location
        if where:
            path, _, line = where.rpartition(":")
            rel = os.path.relpath(path)
            where = f"{path if rel.startswith('..') else rel}:{line}"
        what = finding.kind + (f" {finding.detail}" if finding.kind == "cpu-fallback" else "")
        rows.append((finding.severity, what, where or "?", finding.summary, finding.hint))
    print_table(out, ("severity", "finding", "where", "how often", "hint"), rows, long="hint",
                title=f"{script}: {len(report.findings)} finding(s) in {f['steps']} step(s)")
