"""`builder wheels`: build (or fetch) torch and torch_xla wheels into the local index."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from builder.build.pipeline import Report, Request, run_wheels
from builder.build.progress import Reporter
from builder.cli.main import MAX_JOBS, app, get_config, handle_errors, in_range
from builder.config import describe_ca
from builder.console import err, out


def report_table(report: Report) -> Table:
    table = Table(title=f"builder wheels ({report.seconds:.1f} s, {report.jobs} jobs, smoke {report.smoke})")
    for column in ("step", "key", "status", "seconds", "ccache", "wheel", "sha256"):
        table.add_column(column, no_wrap=column in ("step", "key", "status"), overflow="fold")
    for s in report.stages:
        table.add_row(f"image {s.name}", s.key[:12], "reused" if s.reused else "built", f"{s.seconds:.1f}",
                      "", "", "")
    for o in report.steps:
        table.add_row(o.project, o.key[:12], o.status, f"{o.seconds:.1f}",
                      dist_summary(o.dist) if o.dist else (o.ccache.summary() if o.ccache else ""), o.filename,
                      o.sha256[:16])
    if report.xla_smoke:
        table.caption = f"xla smoke ({report.smoke}): {report.xla_smoke['summary']}"
    return table


def dist_summary(d: dict) -> str:
    servers = ", ".join(f"{k} {v}" for k, v in sorted(d.get("dist_servers", {}).items()))
    return (f"sccache-dist: {d.get('dist_compiles', 0)} distributed ({servers or 'none'}), "
            f"{d.get('local_compiles', 0)} local (fallbacks {d.get('dist_failed', 0)}), "
            f"cache hits {d.get('cache_hits', 0)}, misses {d.get('cache_misses', 0)}")


def report_lines(report: Report) -> list[str]:
    """The summary as plain lines, for a non-terminal (CI logs): nothing is wrapped or folded."""
    lines = [f"builder wheels: {report.seconds:.1f} s, {report.jobs} jobs, smoke {report.smoke}"]
    for s in report.stages:
        lines.append(f"  image {s.name}: {'reused' if s.reused else 'built'} {s.seconds:.1f} s key {s.key[:12]}")
    for o in report.steps:
        cache = f" ccache {o.ccache.summary()}" if o.ccache else ""
        lines.append(f"  {o.project}: {o.status} {o.seconds:.1f} s{cache} {o.filename} sha256 {o.sha256[:16]}")
        if o.dist:
            lines.append(f"  {o.project}: {dist_summary(o.dist)}")
    if report.xla_smoke:
        lines.append(f"  xla smoke ({report.smoke}): {report.xla_smoke['summary']}")
    if report.trace:
        lines.append(f"  trace: {report.trace} (open in https://ui.perfetto.dev)")
    return lines


def report_json(report: Report) -> dict:
    return {
        "seconds": round(report.seconds, 3),
        "jobs": report.jobs,
        "trace": str(report.trace) if report.trace else None,
        "smoke": report.smoke,
        "xla_smoke": report.xla_smoke,
        "stages": [{"name": s.name, "key": s.key, "tag": s.tag, "image_id": s.image_id, "reused": s.reused,
                    "seconds": round(s.seconds, 3)} for s in report.stages],
        "wheels": [{"recipe": o.recipe, "project": o.project, "status": o.status, "filename": o.filename,
                    "version": o.version, "sha256": o.sha256, "key": o.key, "source_sha": o.source_sha,
                    "seconds": round(o.seconds, 3), "ccache": o.ccache.as_dict() if o.ccache else None,
                    "log": str(o.log_path) if o.log_path else None,
                    "profile": str(o.profile) if o.profile else None,
                    "dist": o.dist or None} for o in report.steps],
    }


def push_report(index_dir, report: Report, url: str, user: str | None) -> None:
    """Upload each wheel of the report (identical files already there are skipped)."""
    from builder.index.upload import push_wheel, resolve_credentials

    user, password = resolve_credentials(url, user=user)
    for step in report.steps:
        result = push_wheel(index_dir / "files" / step.filename, url, user=user, password=password)
        err.print(f"push {step.filename}: {result.status}", markup=False)


@app.command("wheels")
@handle_errors
def wheels_cmd(
    torch: str = typer.Option(None, "--torch", help="torch ref (branch, tag, SHA) to build, or a prebuilt version "
                              "(default with --xla REF: the torch its .torch_commit pins)."),
    xla: str = typer.Option(None, "--xla", help="torch_xla ref to build, or a prebuilt version."),
    torch_repo: str = typer.Option(None, "--torch-repo", help="torch git URL (default: \\[repos] torch)."),
    xla_repo: str = typer.Option(None, "--xla-repo", help="torch_xla git URL (default: \\[repos] xla)."),
    torch_unpinned: bool = typer.Option(False, "--torch-unpinned",
                                        help="Build xla against --torch even where it differs from .torch_commit."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel compile jobs (default: by cores and memory).",
                             callback=in_range(0, MAX_JOBS)),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip installing and importing the wheels."),
    force_smoke: bool = typer.Option(False, "--force-smoke", help="Run the smoke check even if it passed before."),
    torch_version: str = typer.Option("", "--torch-version", help="PYTORCH_BUILD_VERSION for a source build."),
    xla_version: str = typer.Option("", "--xla-version", help="TORCH_XLA_VERSION for a source build."),
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
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; build nothing."),
    locked: bool = typer.Option(False, "--locked", help="Build exactly what the lock file records; "
                                "drift (a moved ref, a package no longer installable) is an error."),
    lock_file: str = typer.Option("builder.lock", "--lock-file", help="Lock file used with --locked."),
) -> None:
    """Build torch (and torch_xla) wheels from git refs into the local index, reusing what is unchanged."""
    cfg = get_config({"index.dir": index_dir, "cache.ccache": ccache, "cache.ccache_remote": ccache_remote,
                      "cache.bazel": bazel_cache, "cache.bazel_remote": bazel_remote, "build.user": user,
                      "dist.scheduler": dist})
    request = Request(torch=torch, xla=xla, torch_repo=torch_repo, xla_repo=xla_repo, jobs=jobs,
                      smoke=not no_smoke, force_smoke=force_smoke, torch_version=torch_version, xla_version=xla_version,
                      lock_file=lock_file if locked else "", torch_unpinned=torch_unpinned)
    if dry_run:
        from builder.build.pipeline import commit_requirements, plan_targets
        from builder.cli.images import print_dry_run

        for target in plan_targets(cfg, request):
            ref = target.ref
            what = f"prebuilt {target.version}" if ref is None else f"{ref.ref} = {ref.sha} ({ref.url})"
            out.print(f"# {target.recipe}: {what}", markup=False)
            if ref is not None:
                reqs = commit_requirements(cfg, ref, target.recipe)
                out.print(f"#   backend {reqs.backend}; build requirements from "
                          f"{', '.join(reqs.sources) or 'PEP 517 defaults'}: {' '.join(reqs.requirements)}",
                          markup=False)
                if reqs.bazel_version:
                    out.print(f"#   Bazel {reqs.bazel_version} (.bazelversion) through bazelisk "
                              f"{cfg.toolchain.bazelisk}, from {cfg.bazel.base_url or 'releases.bazel.build'}",
                              markup=False)
        print_dry_run(cfg, None)
        return
    reporter = Reporter(err)
    try:
        report = run_wheels(cfg, request, reporter.note, progress=reporter.step)
    finally:
        reporter.close()
    if push:
        push_report(cfg.index_dir, report, push, push_user)
    if as_json:
        out.print_json(json.dumps(report_json(report)))
    elif err.is_terminal:
        err.print(report_table(report))
        err.print(describe_ca(cfg), markup=False, highlight=False)
        out.print(f"index: {cfg.index_dir}/simple/", markup=False)
    else:
        for line in report_lines(report):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
        err.print(describe_ca(cfg), markup=False, highlight=False)
        out.print(f"index: {cfg.index_dir}/simple/", markup=False)
