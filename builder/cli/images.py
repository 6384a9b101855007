"""Image commands: config, render, images, base bootstrap."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from builder import config as config_mod
from builder.cli.common import app, get_config, handle_errors, output_dir
from builder.config import Config, describe_ca
from builder.console import err, out, print_table
from builder.engine import Engine
from builder.errors import BuilderError
from builder.stages.bootstrap import bootstrap_base
from builder.stages.images import StageResult, bring_up, push_stages
from builder.stages.plan import image_stages, render_stage, select_stages

base_app = typer.Typer(help="Manage the base OS image.", no_args_is_help=True)
app.add_typer(base_app, name="base", help="Manage the base OS image (bootstrap it from Debian packages).")


@app.command("config")
@handle_errors
def config_show(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Show the effective configuration (defaults < builder.toml < BUILDER_* < flags)."""
    cfg = get_config()
    data = config_mod.as_dict(cfg)
    if as_json:
        out.print_json(json.dumps(data))
        return
    out.print(f"# source: {cfg.source}", markup=False)
    for section, values in data.items():
        if isinstance(values, dict):
            out.print(f"[{section}]", markup=False)
            for key, value in values.items():
                out.print(f"{key} = {json.dumps(value)}", markup=False)
        else:
            out.print(f"{section} = {json.dumps(values)}", markup=False)


def _rendered(cfg: Config, stage: str | None, engine: Engine | None):
    """Render the stages; parent IDs come from Docker when it answers (else keys are provisional)."""
    specs = select_stages(image_stages(cfg), stage)
    parent_ref = cfg.base.image
    parent_id = engine.image_id(parent_ref) if engine else None
    rendered = []
    for spec in specs:
        item = render_stage(spec, parent_ref, parent_id)
        rendered.append(item)
        parent_ref = item.tag
        parent_id = engine.image_id(item.tag) if engine else None
    return rendered


def _try_engine() -> Engine | None:
    try:
        return Engine()
    except BuilderError:
        return None


@app.command("render")
@handle_errors
def render_cmd(
    stage: str = typer.Argument(None, help="Render up to this stage (base, toolchain, python)."),
    out_dir: Path = typer.Option(None, "--out", help="Write <stage>.Dockerfile files here."),
) -> None:
    """Render the pinned Dockerfiles from dockerfiles/*.j2 (to stdout or --out DIR)."""
    cfg = get_config()
    engine = _try_engine()
    if engine is None:
        err.print("note: Docker is not reachable; parent image IDs are unknown, so keys are provisional")
    if out_dir:
        out_dir = output_dir(out_dir, "--out")
    for item in _rendered(cfg, stage, engine):
        if out_dir:
            path = out_dir / f"{item.name}.Dockerfile"
            path.write_text(item.dockerfile)
            for name, data in item.spec.files.items():
                (out_dir / name).write_bytes(data)
            out.print(f"{path}  (tag {item.tag})", markup=False)
        else:
            out.print(f"# ---- stage {item.name}: {item.tag}", markup=False)
            out.print(item.dockerfile, markup=False, end="")


def print_summary(results: list[StageResult], total: float) -> None:
    rows = [(r.name, r.image_id.removeprefix("sha256:")[:12], "pulled" if r.pulled else "reused" if r.reused
             else "built", f"{r.seconds:.1f}", r.key) for r in results]
    print_table(err, ("stage", "image", "status", "seconds", "key"), rows, long="key", title=f"stages ({total:.1f} s)")


def run_images(cfg: Config, stage: str | None = None, force: tuple[str, ...] = (),
               as_json: bool = False, push: str | None = None, cache_from: str | None = None,
               moving_tags: tuple[str, ...] = ()) -> list[StageResult]:
    engine = Engine()
    started = time.monotonic()
    specs = select_stages(image_stages(cfg), stage)

    def report(name: str, event: str) -> None:
        err.print(f"  {name:<10} {event}")

    results = bring_up(engine, cfg, err.print, specs, report=report, force=force, cache_from=cache_from).stages
    if push:
        push_stages(engine, cfg, results, push, moving_tags, lambda text: err.print(text, markup=False))
    total = time.monotonic() - started
    if as_json:
        out.print_json(json.dumps([r.__dict__ | {"log_path": str(r.log_path or "")} for r in results]))
    else:
        print_summary(results, total)
        err.print(describe_ca(cfg), markup=False, highlight=False)
    return results


def print_dry_run(cfg: Config, stage: str | None) -> None:
    engine = _try_engine()
    for item in _rendered(cfg, stage, engine):
        exists = bool(engine and engine.image_id(item.tag))
        out.print(f"# ---- stage {item.name}: {item.tag} ({'exists, reuse' if exists else 'would build'})",
                  markup=False)
        out.print(item.dockerfile, markup=False, end="")


@app.command("images")
@handle_errors
def images_cmd(
    stage: str = typer.Option(None, "--stage", help="Build up to this stage only."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and Dockerfiles; build nothing."),
    force: list[str] = typer.Option([], "--force", help="Rebuild this stage even if its key exists."),
    as_json: bool = typer.Option(False, "--json", help="Print the stage results as JSON."),
    push: str = typer.Option(None, "--push", help="Push base and stage images to this registry (host:port)."),
    cache_from: str = typer.Option(None, "--cache-from", help="Pull missing stages by key from this registry."),
    tag: list[str] = typer.Option([], "--tag", help="Extra moving tag to push (e.g. nightly)."),
) -> None:
    """Build the layered stage images (base -> toolchain -> python), reusing unchanged ones."""
    cfg = get_config()
    if dry_run:
        print_dry_run(cfg, stage)
        return
    run_images(cfg, stage, tuple(force), as_json, push, cache_from, tuple(tag))


@base_app.command("bootstrap")
@handle_errors
def bootstrap_cmd(force: bool = typer.Option(False, "--force", help="Rebuild even if the tag exists.")) -> None:
    """Build the base image from Debian packages (debootstrap minbase) and docker import it."""
    cfg = get_config()
    engine = Engine()
    result = bootstrap_base(engine, cfg, cfg.logs_dir / "bootstrap.log", force=force)
    if result.created:
        out.print(f"created {result.tag} ({result.image_id[:19]}) in {result.seconds:.1f} s", markup=False)
    else:
        out.print(f"{result.tag} exists ({result.image_id[:19]}); skipped", markup=False)
