"""`builder nightly` and `builder ci render github`."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import typer

from builder import validate
from builder.cli.common import MAX_KEEP, app, get_config, handle_errors, in_range
from builder.config import MAX_JOBS
from builder.console import err, out, print_error
from builder.errors import BuilderError, ConfigError
from builder.index.directory import DirectoryIndex
from builder.report.nightly import (
    EXIT_BUILT,
    EXIT_FAILED,
    EXIT_NOTHING_NEW,
    NightlyState,
    log_tail,
    plan_nightly,
    write_report,
)
from builder.run.graph import PackageRequest, Request, parse_pkg

ci_app = typer.Typer(help="CI helpers.", no_args_is_help=True)
app.add_typer(ci_app, name="ci", help="CI helpers: print a workflow that runs builder nightly.")

WORKFLOW = Path(__file__).resolve().parent.parent / "workflows" / "nightly.yml"


@app.command("nightly")
@handle_errors
def nightly_cmd(
    keep: int = typer.Option(7, "--keep", help="Nightly versions kept per package in the index (>= 1).",
                              callback=in_range(1, MAX_KEEP)),
    pkg: list[str] = typer.Option([], "--pkg", help="A package to build (repeatable; default: the recipes "
                                  "marked nightly: torch). What they build against comes too, at the commit a "
                                  "package pins (e.g. --pkg xla: torch at its .torch_commit); a prebuilt-only one "
                                  "(--pkg torch_tpu) comes at the newest version that pairs with the nightly torch."),
    repo: list[str] = typer.Option([], "--repo", help="NAME=URL: a git URL for this run (default: \\[repos])."),
    push: str = typer.Option(None, "--push", help="Also upload the wheels to this index URL."),
    report_dir: Path = typer.Option(None, "--report-dir", help="Where report.json and logs go."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel compile jobs.", callback=in_range(0, MAX_JOBS)),
) -> None:
    """Build main of a package set as dated dev versions; exit 0 built, 3 nothing new, 1 failed."""
    from builder.cli.wheels import push_report, report_json
    from builder.recipes import RECIPES, get_recipe
    from builder.run.graph import build_order
    from builder.run.pipeline import run_wheels

    cfg = get_config()
    names = build_order(cfg, [parse_pkg(p).name for p in pkg] or [r.name for r in RECIPES.values() if r.nightly])
    repos = {name: get_recipe(name, cfg).repo_url(cfg) for name in names} | dict(parse_repo(r) for r in repo)
    state_path = Path(cfg.data_dir) / "nightly" / "state.json"
    state = NightlyState.load(state_path)
    today = dt.datetime.now(dt.UTC).date()
    plan = plan_nightly(cfg, state, today, names, repos)
    run_dir = report_dir or Path(cfg.data_dir) / "nightly" / f"{plan.date}-{time.strftime('%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)  # first: a failure's log must have somewhere to land
    heads = ", ".join([f"{name} {sha[:12]}" for name, sha in plan.shas.items()]
                      + [f"{name} {version or '(none pairs)'}" for name, version in plan.picked.items()])
    data = {"date": plan.date, "shas": plan.shas}
    if plan.offers:
        data["prebuilt"] = plan.offers_json()
        for line in offer_lines(plan):
            err.print(line, markup=False, highlight=False)
    if plan.nothing_new:
        data["status"] = "nothing-new"
        state.saw(plan)
        state.save(state_path)
        path = write_report(run_dir, data)
        err.print(f"nothing new since the last nightly ({heads}); report {path}", markup=False)
        raise typer.Exit(EXIT_NOTHING_NEW)
    data.update(version=plan.version, versions=plan.versions)
    err.print(f"nightly {plan.version}: {heads}", markup=False)
    started = time.monotonic()
    request = nightly_request(cfg, names, plan.shas, repos, plan.versions, jobs, plan.picked)
    try:
        report = run_wheels(cfg, request, lambda text: err.print(text, markup=False, highlight=False))
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
    state.last = plan.heads
    state.saw(plan)
    state.runs[plan.date] = plan.serial + 1
    state.save(state_path)
    path = write_report(run_dir, data)
    out.print(f"built nightly {plan.version}; report {path}", markup=False)
    raise typer.Exit(EXIT_BUILT)


def nightly_request(cfg, names: list[str], shas: dict[str, str], repos: dict[str, str],  # noqa: ANN001 - Config
                    versions: dict[str, str], jobs: int, picked: dict[str, str] | None = None) -> Request:
    """Every package at its head, with its dated version; but what a package of the set
    pins (``Recipe.pins_against``: xla's .torch_commit) comes from that pin, at its own
    version, since the head may not even compile with it (torch main is C++20, xla
    master C++17). A prebuilt-only member comes at its ``picked`` version, or not at all
    when none pairs."""
    from builder.recipes import get_recipe

    picked = picked or {}
    pinned = {dep for name in names if get_recipe(name, cfg).pins_against
              for dep in get_recipe(name, cfg).builds_against if dep in names}
    packages = []
    for name in names:
        if name in picked:
            if picked[name]:
                packages.append(PackageRequest(name, picked[name]))
            continue
        packages.append(PackageRequest(name, None if name in pinned else shas[name], repos[name],
                                       "" if name in pinned else versions[name]))
    return Request(tuple(packages), jobs=jobs)


def offer_lines(plan) -> list[str]:  # noqa: ANN001 - NightlyPlan
    """One line per prebuilt-only member: what tonight takes (or why nothing), and the
    versions that appeared since the last nightly with the torch each supports."""
    lines = []
    for name, offer in plan.offers.items():
        supports = dict(offer.offered)
        new = ", ".join(f"{v} ({supports[v]})" for v in plan.new.get(name, [])) or "none"
        taken = offer.picked or "not taken"
        lines.append(f"{name}: {taken}: {offer.why}; new on offer since the last nightly: {new}")
    return lines


def parse_repo(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name.strip() or not url.strip():
        raise ConfigError(f"--repo {text!r} is not NAME=URL", "e.g. --repo torch=file:///src/pytorch")
    return name.strip(), validate.repo_url(url.strip(), f"--repo {name.strip()}")


@ci_app.command("render")
@handle_errors
def ci_render(system: str = typer.Argument("github", help="CI system (github).")) -> None:
    """Print the example CI workflow that runs `builder nightly` (GitHub Actions)."""
    if system != "github":
        raise BuilderError(f"no workflow for CI system {system!r}", "only 'github' is provided; adapt its steps")
    out.print(WORKFLOW.read_text(), markup=False, end="")
