"""`builder nightly` and `builder ci render github`."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import typer

from builder.build.nightly import (
    EXIT_BUILT,
    EXIT_FAILED,
    EXIT_NOTHING_NEW,
    NightlyState,
    log_tail,
    plan_nightly,
    write_report,
)
from builder.cli.main import MAX_JOBS, MAX_KEEP, app, get_config, handle_errors, in_range
from builder.console import err, out, print_error
from builder.errors import BuilderError
from builder.index.directory import DirectoryIndex

ci_app = typer.Typer(help="CI helpers.", no_args_is_help=True)
app.add_typer(ci_app, name="ci", help="CI helpers: print a workflow that runs builder nightly.")

WORKFLOW = Path(__file__).resolve().parent.parent / "workflows" / "nightly.yml"


@app.command("nightly")
@handle_errors
def nightly_cmd(
    keep: int = typer.Option(7, "--keep", help="Nightly versions kept per package in the index (>= 1).",
                              callback=in_range(1, MAX_KEEP)),
    torch_repo: str = typer.Option(None, "--torch-repo", help="torch git URL (default from config)."),
    xla_repo: str = typer.Option(None, "--xla-repo", help="torch_xla git URL (default from config)."),
    push: str = typer.Option(None, "--push", help="Also upload the wheels to this index URL."),
    report_dir: Path = typer.Option(None, "--report-dir", help="Where report.json and logs go."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel compile jobs.", callback=in_range(0, MAX_JOBS)),
) -> None:
    """Build main of torch and torch_xla as dated dev versions; exit 0 built, 3 nothing new, 1 failed."""
    from builder.build.pipeline import Request, run_wheels
    from builder.cli.wheels import push_report, report_json

    cfg = get_config()
    state_path = Path(cfg.data_dir) / "nightly" / "state.json"
    state = NightlyState.load(state_path)
    today = dt.datetime.now(dt.UTC).date()
    plan = plan_nightly(cfg, state, today, torch_repo or cfg.repos.torch, xla_repo or cfg.repos.xla)
    run_dir = report_dir or Path(cfg.data_dir) / "nightly" / f"{plan.date}-{time.strftime('%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)  # first: a failure's log must have somewhere to land
    data = {"date": plan.date, "torch_sha": plan.torch_sha, "xla_sha": plan.xla_sha}
    if plan.nothing_new:
        data["status"] = "nothing-new"
        path = write_report(run_dir, data)
        err.print(f"nothing new since the last nightly (torch {plan.torch_sha[:12]}, xla {plan.xla_sha[:12]}); "
                  f"report {path}", markup=False)
        raise typer.Exit(EXIT_NOTHING_NEW)
    data.update(torch_version=plan.torch_version, xla_version=plan.xla_version)
    err.print(f"nightly {plan.torch_version}: torch {plan.torch_sha[:12]}, xla {plan.xla_sha[:12]}", markup=False)
    started = time.monotonic()
    try:
        report = run_wheels(cfg, Request(torch=plan.torch_sha, xla=plan.xla_sha, torch_repo=torch_repo,
                                         xla_repo=xla_repo, jobs=jobs, torch_version=plan.torch_version,
                                         xla_version=plan.xla_version,
                                         # A nightly tracks both heads, as upstream's nightlies did;
                                         # the versions still have to pair.
                                         torch_unpinned=True),
                            lambda text: err.print(text, markup=False, highlight=False))
        if push:
            push_report(cfg.index_dir, report, push, None)
        pruned = DirectoryIndex(cfg.index_dir).prune(keep)
    except BuilderError as exc:
        data.update(status="failed", error=str(exc), seconds=round(time.monotonic() - started, 3))
        tail = log_tail(exc)
        if tail is not None:
            log_path, text = tail
            shutil.copy(log_path, run_dir / log_path.name)
            data["failed_log"] = str(log_path)
            err.print(f"---- last 50 lines of {log_path} ----\n{text}\n----", markup=False, highlight=False)
        path = write_report(run_dir, data)
        if exc.hint:
            print_error(exc.message, f"{exc.hint} (report {path})")
        else:
            print_error(f"{exc.message} (report {path})")
        raise typer.Exit(EXIT_FAILED) from None
    data.update(status="built", pruned=pruned, **report_json(report))
    for step in report.steps:
        if step.log_path and step.log_path.is_file():
            shutil.copy(step.log_path, run_dir / step.log_path.name)
    if report.trace and report.trace.is_file():  # the run's Chrome trace travels with the report
        shutil.copy(report.trace, run_dir / "trace.json")
        data["trace"] = str(run_dir / "trace.json")
    state.last = {"torch": plan.torch_sha, "xla": plan.xla_sha}
    state.runs[plan.date] = plan.serial + 1
    state.save(state_path)
    path = write_report(run_dir, data)
    out.print(f"built nightly {plan.torch_version}; report {path}", markup=False)
    raise typer.Exit(EXIT_BUILT)


@ci_app.command("render")
@handle_errors
def ci_render(system: str = typer.Argument("github", help="CI system (github).")) -> None:
    """Print the example CI workflow that runs `builder nightly` (GitHub Actions)."""
    if system != "github":
        raise BuilderError(f"no workflow for CI system {system!r}", "only 'github' is provided; adapt its steps")
    out.print(WORKFLOW.read_text(), markup=False, end="")
