"""Reproducibility commands: `builder lock` and `builder verify`.

Option parsing and printing only; the work is in builder.lock and builder.run.verify.
(`builder index show WHEEL` prints a wheel's provenance manifest.)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import typer

from builder.cli.common import app, get_config, handle_errors, in_range
from builder.cli.wheels import register_with_recipe_options
from builder.config import MAX_JOBS
from builder.console import err, out
from builder.errors import BuildError, ConfigError
from builder.repro.lockfile import DEFAULT_LOCK


def _note(text: str) -> None:
    err.print(text, markup=False, highlight=False)


def lock_cmd(
    pkg: list[str] = typer.Option([], "--pkg", help="NAME=REF of any recipe to lock (repeatable)."),
    output: Path = typer.Option(Path(DEFAULT_LOCK), "--out", "-o", help="Lock file to write."),
    as_json: bool = typer.Option(False, "--json", help="Also print the lock on stdout."),
    **options: object,
) -> None:
    """Write builder.lock: base image, apt packages of each stage, pip hashes, source SHAs, prebuilt wheel hashes."""
    from builder.cli.wheels import request_of
    from builder.engine import Engine
    from builder.repro.lock import make_deps_lock, make_lock
    from builder.repro.lockfile import SourceLock, lock_to_json, write_lock
    from builder.repro.manifest import redact_url
    from builder.run.graph import resolve
    from builder.stages.images import bring_up
    from builder.stages.plan import deps_stage, image_stages

    cfg = get_config()
    # before any Docker call: a bad ref costs one ls-remote
    resolved = resolve(cfg, request_of(options, pkg, 0, False, False, ""))
    sources, refs, prebuilt = {}, {}, {}
    for source in resolved.sources:
        if source.ref is None:  # a version: its wheel and the dependency wheels it brings, by sha256
            from builder.recipes import built_projects, get_recipe
            from builder.repro.prebuilt_lock import lock_prebuilt

            recipe = get_recipe(source.name, cfg)
            own = built_projects(cfg) if recipe.prebuilt_requires_built else frozenset()
            prebuilt[source.name] = lock_prebuilt(cfg, recipe.project, source.version, own,
                                                  cfg.logs_dir / f"lock-{source.name}.log")
            continue
        sources[source.name] = SourceLock(redact_url(source.ref.url), source.ref.ref, source.ref.sha)
        refs[source.name] = source
    engine = Engine()
    specs = image_stages(cfg)
    images = bring_up(engine, cfg, _note, specs)
    base_id, stages = images.base_id, images.stages
    _note("reading installed packages and hashing pip requirements ...")
    lock = make_lock(engine, cfg, base_id, stages, sources, specs)
    deps = {}
    for name in sources:  # each source's build requirements, from its commit (or sdist), as the build reads them
        from builder.recipes import get_recipe
        from builder.run.pipeline import prepare_deps
        from builder.run.sources import source_requirements

        requirements = source_requirements(cfg, get_recipe(name, cfg), refs[name])
        stage = prepare_deps(engine, cfg, requirements, stages[-1], _note, name)
        spec = deps_stage(cfg, requirements.requirements, requirements.sources, requirements.bazel_version)
        deps[name] = make_deps_lock(engine, cfg, spec, stage, lock.stages[stages[-1].name].pip)
    lock = dataclasses.replace(lock, deps=deps, prebuilt=prebuilt)
    write_lock(lock, output)
    packages = sum(len(s.apt) for s in lock.stages.values())
    _note(f"wrote {output}: {len(lock.stages)} stages, {packages} apt entries, "
          f"{sum(len(s.pip) for s in lock.stages.values())} pip packages, {len(sources)} sources, "
          f"{len(lock.deps)} deps layers, {sum(len(p.files) for p in prebuilt.values())} prebuilt wheels")
    if as_json:
        typer.echo(lock_to_json(lock), nl=False)


register_with_recipe_options("lock", lock_cmd, {"pkg": list[str], "output": Path, "as_json": bool})


@app.command("verify")
@handle_errors
def verify_cmd(
    wheel: str = typer.Argument(None, help="Wheel file name in the index (see `builder index list`)."),
    all_wheels: bool = typer.Option(False, "--all", help="Verify every wheel that has a manifest."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel compile jobs for the rebuild.",
                             callback=in_range(0, MAX_JOBS)),
    directory: Path | None = typer.Option(None, "--dir", help="Index directory (default: \\[index] dir)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
) -> None:
    """Rebuild wheels from their manifests with empty caches and compare sha256."""
    from builder.engine import Engine
    from builder.index.directory import DirectoryIndex
    from builder.run.reaper import reap
    from builder.run.verify import verify_all, verify_wheel

    if bool(wheel) == all_wheels:
        raise ConfigError("name one WHEEL, or pass --all")
    cfg = get_config({"index.dir": str(directory) if directory else None})
    index = DirectoryIndex(cfg.index_dir)
    if wheel:
        index.manifest(wheel)  # a malformed or unknown name fails here, before any Docker call
    engine = Engine()
    reap(engine, cfg, _note)  # what a SIGKILLed verify (or build) left: its containers, scratch dirs, volumes
    if all_wheels:
        results, skipped = verify_all(engine, cfg, index, _note, jobs)
        for name in skipped:
            _note(f"{name}: skipped (no provenance manifest)")
    else:
        results = [verify_wheel(engine, cfg, index, wheel, _note, jobs)]
    if as_json:
        out.print_json(json.dumps([r.as_dict() for r in results]))
    for result in results:
        _note(result.summary())
        for line in result.notes:
            _note(f"  note: {line}")
        for line in result.differences:
            _note(f"  differs: {line}")
        if result.diffoscope:
            _note(result.diffoscope)
        if result.kept:
            _note(f"  rebuilt wheel kept at {result.kept}")
    failed = [r.wheel for r in results if not r.ok]
    if failed:
        raise BuildError(f"{len(failed)} of {len(results)} wheel(s) did not verify: {', '.join(failed)}")
