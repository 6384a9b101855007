"""`builder profile`: the slowest translation units of a built wheel, its cache misses and why."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from builder.cli.common import app, get_config, handle_errors
from builder.console import out, print_table
from builder.errors import ConfigError
from builder.report import profile as prof


def _find(data_dir: str, name: str | None) -> prof.Profile:
    """A wheel file name (or a path to a profile), or a package name for its latest build;
    None: the newest profile of any package."""
    if name is None:
        pointers = sorted(prof.profiles_dir(data_dir).glob("latest-*.json"), key=lambda p: p.stat().st_mtime)
        newest = prof.latest(data_dir, pointers[-1].stem.removeprefix("latest-")) if pointers else None
        if newest is None:
            raise ConfigError(f"no build profile yet in {prof.profiles_dir(data_dir)}",
                              "build a wheel with `builder wheels`; only compiled steps have one")
        return newest
    path = Path(name)
    if path.suffix == ".json" and path.is_file():
        return prof.load(path)
    candidate = prof.profiles_dir(data_dir) / f"{path.name}.json"
    if candidate.is_file():
        return prof.load(candidate)
    latest = prof.latest(data_dir, name)
    if latest is not None:
        return latest
    known = sorted(p.name[:-5] for p in prof.profiles_dir(data_dir).glob("*.whl.json"))
    raise ConfigError(f"no build profile for {name!r} in {prof.profiles_dir(data_dir)}",
                      "name a wheel built here (profiles: " + (", ".join(known[-5:]) or "none yet") +
                      ") or a package name; only compiled steps have one")


@app.command("profile")
@handle_errors
def profile_cmd(
    wheel: str = typer.Argument(None, help="Wheel file name, or a package for its latest build "
                                "(default: the newest build profiled)."),
    diff_with: str = typer.Option(None, "--diff", help="Compare with another build (wheel name or profile path)."),
    top: int = typer.Option(10, "--top", min=1, help="How many of the slowest units to list."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Where a wheel's compile time went and why its cache missed.
    """
    cfg = get_config()
    current = _find(cfg.data_dir, wheel)
    other = _find(cfg.data_dir, diff_with) if diff_with else None
    changes = prof.diff(current, other) if other else None
    slowest = sorted(current.units, key=lambda u: -u.seconds)[:top]
    misses = [u for u in current.units if u.result == "miss"]
    if as_json:
        data = current.as_dict()
        data["slowest"] = [u.output for u in slowest]
        if changes is not None:
            data["diff"] = {"against": other.wheel, **changes}
        out.print_json(json.dumps(data))
        return
    t = current.totals()
    out.print(f"{current.wheel}: {t['units']} units, {t['miss']} missed, {t['direct_hit']} direct hits, "
              f"{t['preprocessed_hit']} preprocessed hits, {t['remote_hit']} remote hits; compile wall "
              f"{t['wall_seconds']:.1f} s, CPU {t['cpu_seconds']:.1f} s over {t['slots']} job slots "
              f"({current.jobs} jobs)", markup=False)
    if current.dist:
        out.print(f"sccache-dist: {current.dist.get('dist_compiles', 0)} distributed "
                  f"{current.dist.get('dist_servers', {})}, {current.dist.get('local_compiles', 0)} local, "
                  f"{current.dist.get('dist_failed', 0)} failed distributions", markup=False)
    print_table(out, ("seconds", "result", "unit"),
                [(f"{u.seconds:.2f} s", u.result, u.source or u.output) for u in slowest], long="unit",
                title=f"slowest {len(slowest)}:")
    if misses:
        more = [f"... and {len(misses) - top} more (--top N, or --json)"] if len(misses) > top else []
        print_table(out, ("unit", "why"), [(u.source or u.output, u.why) for u in misses[:top]], long="why",
                    title=f"misses ({len(misses)}):", notes=more)
    if changes is not None:
        print_table(out, ("missed", "why"), [(i["source"] or i["output"], i["why"]) for i in changes["missed"][:top]],
                    long="why", title=f"against {other.wheel}: {len(changes['missed'])} missed "
                    f"({len(changes['newly_missed'])} of them hit there), {len(changes['slower'])} slower, "
                    f"{len(changes['added'])} new units")
        if changes["slower"]:
            print_table(out, ("before", "now", "slower"), [(f"{i['before']:.2f} s", f"{i['seconds']:.2f} s",
                                                            i["output"]) for i in changes["slower"][:top]],
                        long="slower")
