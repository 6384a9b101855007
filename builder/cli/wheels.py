"""`builder wheels`: build (or fetch) wheels of a package graph into the local index.

The per-package options (``--torch``, ``--xla``, ``--torch-repo`` ...) are made from the
recipes that ask for them (``Recipe.flag_help``); ``--pkg NAME=REF`` names any recipe,
built-in or a ``[packages.NAME]`` table."""

from __future__ import annotations

import inspect
import json

import typer
from rich.console import Console

from builder.cli.common import app, get_config, handle_errors, in_range
from builder.config import MAX_JOBS, describe_ca
from builder.console import err, out, print_table
from builder.recipes import RECIPES
from builder.resources import DiskEstimate
from builder.run.graph import PackageRequest, Request, merge, parse_pkg
from builder.run.pipeline import RunReport, check_plan_disk, plan_disk, plan_request, planned_statuses_match, run_wheels
from builder.run.progress import Reporter
from builder.run.wheelplan import WheelPlan
from builder.source.gitprogress import fetch_options


def print_report(report: RunReport, console: Console) -> None:
    """The run's summary for people: a row per image stage and wheel with the wheel's file
    name the long field (builder.console.print_table), then a line per step for its cache
    figures (ccache, sccache-dist) and the smoke and trace lines."""
    rows = [(f"image {s.name}", s.key[:12], "reused" if s.reused else "built", f"{s.seconds:.1f}", "", "", "")
            for s in report.stages]
    rows += [(o.project, o.key[:12], o.status, f"{o.seconds:.1f}", f"{o.ccache.hit_rate:.0%}" if o.ccache else "",
              o.sha256[:12], o.filename) for o in report.steps]
    notes = [f"{o.project}: {platform_summary(o.platform)}" for o in report.steps if o.platform]
    notes += [f"{o.project}: ccache {o.ccache.summary()}" for o in report.steps if o.ccache]
    notes += [f"{o.project}: {dist_summary(o.dist)}" for o in report.steps if o.dist]
    if report.smoke_figures:
        notes.append(f"smoke ({report.smoke}): {report.smoke_figures['summary']}")
    notes += [f"note: {said}" for said in plan_notes(report)]
    if report.phases.seconds:
        notes.append(f"time: {report.phases.summary(report.seconds)}")
    if report.trace:
        notes.append(f"trace: {report.trace} (open in https://ui.perfetto.dev)")
    print_table(console, ("step", "key", "status", "seconds", "ccache", "sha256", "wheel"), rows, long="wheel",
                title=f"builder wheels: {report.seconds:.1f} s, {report.jobs} jobs, smoke {report.smoke}", notes=notes)


def platform_summary(p: dict) -> str:
    """``manylinux_2_24_x86_64 (limited by GLIBCXX_3.4.21 (libstdc++.so.6)); vendored libz.so.1``."""
    said = p.get("tag", "")
    limit = p.get("limited_by") or []
    if limit:
        said += f" (limited by {', '.join(limit)})"
    elif p.get("policy", "").startswith(("manylinux", "musllinux")):
        said += " (the most compatible policy)"
    if p.get("vendored"):
        said += f"; vendored {', '.join(p['vendored'])}"
    return said


def dist_summary(d: dict) -> str:
    servers = ", ".join(f"{k} {v}" for k, v in sorted(d.get("dist_servers", {}).items()))
    return (f"sccache-dist: {d.get('dist_compiles', 0)} distributed ({servers or 'none'}), "
            f"{d.get('local_compiles', 0)} local (fallbacks {d.get('dist_failed', 0)}), "
            f"cache hits {d.get('cache_hits', 0)}, misses {d.get('cache_misses', 0)}")


def plan_notes(report: RunReport) -> tuple[str, ...]:
    return report.plan.resolved.notes if report.plan else ()


def report_json(report: RunReport) -> dict:
    return {
        "seconds": round(report.seconds, 3),
        "jobs": report.jobs,
        "trace": str(report.trace) if report.trace else None,
        "smoke": report.smoke,
        "smoke_figures": report.smoke_figures,
        "stages": [{"name": s.name, "key": s.key, "tag": s.tag, "image_id": s.image_id, "reused": s.reused,
                    "seconds": round(s.seconds, 3)} for s in report.stages],
        "wheels": [{"recipe": o.recipe, "project": o.project, "status": o.status, "filename": o.filename,
                    "version": o.version, "sha256": o.sha256, "key": o.key, "source_sha": o.source_sha,
                    "seconds": round(o.seconds, 3), "ccache": o.ccache.as_dict() if o.ccache else None,
                    "log": str(o.log_path) if o.log_path else None,
                    "profile": str(o.profile) if o.profile else None,
                    "dist": o.dist or None, "platform": o.platform or None} for o in report.steps],
        "plan": report.plan.as_dict() if report.plan else None,
        "plan_deviations": planned_statuses_match(report.plan, report) if report.plan else [],
        "phases": report.phases.as_dict(),
    }


def push_report(index_dir, report: RunReport, url: str, user: str | None) -> None:
    """Upload each wheel of the report (identical files already there are skipped)."""
    from builder.index.upload import push_wheel, resolve_credentials

    user, password = resolve_credentials(url, user=user)
    for step in report.steps:
        result = push_wheel(index_dir / "files" / step.filename, url, user=user, password=password)
        err.print(f"push {step.filename}: {result.status}", markup=False)


def recipe_options() -> list[inspect.Parameter]:
    """``--NAME``, ``--NAME-repo``, ``--NAME-version`` (and ``--NAME-unpinned``) for each
    recipe that asks for them."""
    params = []
    for recipe in RECIPES.values():
        if not recipe.flag_help:
            continue
        n, project = recipe.name, recipe.project
        if recipe.prebuilt_only:  # a version or latest: no repository, no source-build version
            params.append(_option(recipe.flag or n, typer.Option(None, f"--{recipe.flag or n}", help=recipe.flag_help),
                                  str | None))
            continue
        params += [
            _option(n, typer.Option(None, f"--{n}", help=recipe.flag_help), str | None),
            _option(f"{n}_repo", typer.Option(None, f"--{n}-repo", help=f"{project} git URL (default: \\[repos] {n})."),
                    str | None),
            _option(f"{n}_version", typer.Option("", f"--{n}-version",
                                                 help=f"{recipe.version_env} for a source build."), str)]
        if recipe.unpinned_help:
            params.append(_option(f"{n}_unpinned", typer.Option(False, f"--{n}-unpinned", help=recipe.unpinned_help),
                                  bool))
    return params


def _option(name: str, default: object, annotation: object) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def request_of(options: dict, pkg: list[str], jobs: int, smoke: bool, force_smoke: bool, lock_file: str) -> Request:
    """The request from the per-recipe options and ``--pkg``; options win over --pkg for repos."""
    packages = [parse_pkg(text) for text in pkg]
    unpinned = False
    for recipe in RECIPES.values():
        if not recipe.flag_help:
            continue
        spec, repo, version = (options.get(recipe.flag or recipe.name), options.get(f"{recipe.name}_repo") or "",
                               options.get(f"{recipe.name}_version") or "")
        unpinned = unpinned or bool(options.get(f"{recipe.name}_unpinned"))
        if spec is not None or repo or version:
            packages.append(PackageRequest(recipe.name, spec, repo, version))
    # a repo or version alone names no package to build: it applies if the graph pulls it in
    return Request(packages=merge(packages), jobs=jobs, smoke=smoke, force_smoke=force_smoke, lock_file=lock_file,
                   unpinned=unpinned)


def print_plan(plan: WheelPlan, as_json: bool, bazelisk: str = "", bazel_url: str = "",
               disk: DiskEstimate | None = None) -> None:
    if as_json:
        out.print_json(json.dumps({**plan.as_dict(), **({"disk": {
            "packages_gib": dict(disk.packages), "total_gib": disk.total_gib, "free_gib": disk.free_gib,
            "where": disk.where}} if disk else {})}))
        return
    if disk is not None:
        out.print(f"# {disk.describe()}", markup=False)
    for said in plan.resolved.notes:
        out.print(f"# note: {said}", markup=False)
    for stage in plan.stages:
        state = "reuse" if stage.image_id else "build"
        out.print(f"# image {stage.name}: {state} {stage.key or '(key after its parent is built)'}", markup=False)
    for wheel in plan.wheels:
        ref, reqs = wheel.source.ref, wheel.requirements
        what = f"prebuilt {wheel.source.version}" if ref is None else f"{ref.ref} = {ref.sha} ({ref.url})"
        out.print(f"# {wheel.name}: {what}", markup=False)
        out.print(f"#   plan: {wheel.status}" + (f", key {wheel.key}" if wheel.key else "")
                  + (f", {wheel.filename}" if wheel.filename else "") + (f" ({wheel.why})" if wheel.why else ""),
                  markup=False)
        if reqs is not None:
            out.print(f"#   backend {reqs.backend}; build requirements from "
                      f"{', '.join(reqs.sources) or 'PEP 517 defaults'}: {' '.join(reqs.requirements)}", markup=False)
            if reqs.bazel_version:
                out.print(f"#   Bazel {reqs.bazel_version} (.bazelversion) through bazelisk "
                          f"{bazelisk}, from {bazel_url or 'releases.bazel.build'}", markup=False)


def wheels_cmd(
    pkg: list[str] = typer.Option([], "--pkg", help="NAME=REF or NAME=VERSION of any recipe (repeatable), "
                                  "e.g. torchvision=main or a \\[packages.NAME] table of builder.toml."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel compile jobs (default: by cores and memory).",
                             callback=in_range(0, MAX_JOBS)),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip installing and importing the wheels."),
    force_smoke: bool = typer.Option(False, "--force-smoke", help="Run the smoke check even if it passed before."),
    ccache: str = typer.Option(None, "--ccache", help="ccache location: volume:NAME or path:/dir."),
    ccache_remote: str = typer.Option(None, "--ccache-remote", help="Remote ccache: redis://HOST:PORT or http://HOST/PATH."),
    bazel_cache: str = typer.Option(None, "--bazel-cache", help="Bazel disk cache: volume:NAME or path:/dir."),
    bazel_remote: str = typer.Option(None, "--bazel-remote-cache", help="Bazel HTTP remote cache URL."),
    dist: str = typer.Option(None, "--dist", help="sccache-dist scheduler URL: distribute the compiles "
                             "(token from $BUILDER_DIST_TOKEN or [dist] token_file)."),
    user: str = typer.Option(None, "--user", help="uid:gid the build containers run as."),
    push: str = typer.Option(None, "--push", help="Also upload the wheels to this index URL (legacy upload API)."),
    push_user: str = typer.Option(None, "--user-name", help="Upload user (password from env or .netrc)."),
    index_dir: str = typer.Option(None, "--dir", help="Local index directory (default: \\[index] dir)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report (with --dry-run: the plan) as JSON on "
                                 "stdout."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (each wheel: key, reuse or build) and "
                                 "the stage Dockerfiles; build nothing."),
    locked: bool = typer.Option(False, "--locked", help="Build exactly what the lock file records; "
                                "drift (a moved ref, a package no longer installable) is an error."),
    lock_file: str = typer.Option("builder.lock", "--lock-file", help="Lock file used with --locked."),
    **options: object,
) -> None:
    """Build wheels (torch, torch_xla, any recipe) from git refs into the local index, reusing what is unchanged."""
    cfg = get_config({"index.dir": index_dir, "cache.ccache": ccache, "cache.ccache_remote": ccache_remote,
                      "cache.bazel": bazel_cache, "cache.bazel_remote": bazel_remote, "build.user": user,
                      "dist.scheduler": dist})
    request = request_of(options, pkg, jobs, not no_smoke, force_smoke, lock_file if locked else "")
    if dry_run:
        from builder.cli.images import _try_engine, print_dry_run

        planner = Reporter(err)
        try:
            with fetch_options(progress=planner.fetch):  # planning clones and fetches the mirrors
                plan = plan_request(cfg, request, lambda _: None, _try_engine())
        finally:
            planner.close()
        disk = plan_disk(cfg, plan)
        print_plan(plan, as_json, cfg.toolchain.bazelisk, cfg.bazel.base_url, disk)
        check_plan_disk(disk)  # the run would refuse: so does its dry run (exit 1)
        if not as_json:
            print_dry_run(cfg, None)
        return
    reporter = Reporter(err)
    try:
        with fetch_options(progress=reporter.fetch):  # clone and fetch progress of the mirrors
            report = run_wheels(cfg, request, reporter.note, progress=reporter.step)
    finally:
        reporter.close()
    if push:
        push_report(cfg.index_dir, report, push, push_user)
    if as_json:
        out.print_json(json.dumps(report_json(report)))
        return
    print_report(report, err)
    err.print(describe_ca(cfg), markup=False, highlight=False)
    out.print(f"index: {cfg.index_dir}/simple/", markup=False)


def register_with_recipe_options(name: str, func, hints: dict[str, object]) -> None:  # noqa: ANN001
    """Register ``func`` as the command ``name`` with the recipes' options added to its
    signature (typer reads the signature); they reach ``func`` as keyword arguments."""
    signature = inspect.signature(func)
    fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation))
              for p in recipe_options() + fixed]

    def command(**kwargs: object) -> None:
        func(**kwargs)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = func.__doc__
    app.command(name)(handle_errors(command))


register_with_recipe_options("wheels", wheels_cmd, {
    "pkg": list[str], "jobs": int, "no_smoke": bool, "force_smoke": bool, "ccache": str, "ccache_remote": str,
    "bazel_cache": str, "bazel_remote": str, "dist": str, "user": str, "push": str, "push_user": str,
    "index_dir": str, "as_json": bool, "dry_run": bool, "locked": bool, "lock_file": str})
