"""`builder cache`: statistics, location and clearing of the shared compiler cache; the
sizes of the Bazel cache's trees beside them."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from builder.caches.bazel import bazel_cache_sizes
from builder.caches.ccache import CCACHE_MOUNT, parse_location, parse_print_stats
from builder.cli.common import app, get_config, handle_errors
from builder.config import Config
from builder.console import out, print_table
from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError, ConfigError

cache_app = typer.Typer(help="Inspect and manage the compiler cache (and see the Bazel cache's sizes).",
                        no_args_is_help=True)
app.add_typer(cache_app, name="cache", help="Inspect and manage the shared compiler cache (stats, path, clear).")


def _cache_image(engine: Engine, cfg: Config) -> str:
    """An image holding the pinned ccache: the current toolchain stage (must be built)."""
    from builder.cli.images import _rendered

    for stage in _rendered(cfg, "toolchain", engine):
        if stage.name == "toolchain":
            if engine.image_id(stage.tag) is None:
                raise ConfigError("the toolchain image is not built", "run `builder images` first")
            return stage.tag
    raise BuildError("no toolchain stage")  # pragma: no cover


def _run_ccache(engine: Engine, cfg: Config, *args: str) -> str:
    location = parse_location(cfg.cache.ccache, "cache.ccache")
    result = engine.run(ContainerSpec(image=_cache_image(engine, cfg), command=["ccache", *args],
                                      environment={"CCACHE_DIR": CCACHE_MOUNT}, network="none",
                                      mounts=[Mount(location.docker_source, CCACHE_MOUNT)]))
    if result.exit_code != 0:
        raise BuildError(f"ccache {' '.join(args)} failed on {location.describe()}: {result.output.strip()}")
    return result.output


def _with_ccache(option: str | None, bazel: str | None = None) -> Config:
    return get_config({"cache.ccache": option, "cache.bazel": bazel})


def bazel_layout() -> dict[str, str]:
    """What the recipes keep in the Bazel cache, by name (disk cache, repository cache, ...)."""
    from builder.recipes import RECIPES

    layout: dict[str, str] = {}
    for recipe in RECIPES.values():
        layout.update(recipe.bazel_cache_layout())
    return layout


@cache_app.command("stats")
@handle_errors
def stats_cmd(as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
              ccache: str = typer.Option(None, "--ccache", help="volume:NAME or path:/dir (default: config)."),
              bazel_cache: str = typer.Option(None, "--bazel-cache", help="Bazel cache: volume:NAME or path:/dir "
                                              "(default: config).")) -> None:
    """Size, files and hit/miss figures of the cache (overall and the last build), and the
    sizes of what Bazel keeps in its cache (disk cache, repository cache, output user roots)."""
    cfg = _with_ccache(ccache, bazel_cache)
    engine = Engine()
    bazel = bazel_cache_sizes(engine, cfg, _cache_image(engine, cfg), bazel_layout())
    data = stats_data(cfg, _run_ccache(engine, cfg, "--print-stats"), bazel)
    if as_json:
        out.print_json(json.dumps(data))
        return
    print_stats(data, out)


def stats_data(cfg: Config, print_stats: str, bazel: dict[str, int] | None = None) -> dict:
    """`cache stats --json`: ccache's ``--print-stats`` output, the last build's record
    (``<data_dir>/cache-last.json``, when it is of this cache) and the Bazel trees' sizes."""
    stats = parse_print_stats(print_stats)
    hits = stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)
    misses = stats.get("cache_miss", 0)
    last_path = Path(cfg.data_dir) / "cache-last.json"
    last = json.loads(last_path.read_text()) if last_path.is_file() else None
    return {
        "cache": cfg.cache.ccache,
        "size_bytes": stats.get("cache_size_kibibyte", 0) * 1024,
        "files": stats.get("files_in_cache", 0),
        "overall": {"hits": hits, "direct_hits": stats.get("direct_cache_hit", 0), "misses": misses,
                    "hit_rate": round(hits / (hits + misses), 4) if hits + misses else 0.0,
                    "remote_hits": stats.get("remote_storage_hit", 0),
                    "remote_errors": stats.get("remote_storage_error", 0)},
        "last_build": last if last and last.get("cache") == cfg.cache.ccache else None,
        "bazel": {"cache": cfg.cache.bazel, "sizes_bytes": bazel or {}},
    }


def print_stats(data: dict, console: Console) -> None:
    overall = data["overall"]
    rows = [("size", f"{data['size_bytes'] / 1024 ** 2:.1f} MiB"), ("files", str(data["files"])),
            ("overall", f"{overall['hits']} hits / {overall['misses']} misses ({overall['hit_rate']:.0%})")]
    if data["last_build"]:
        lb = data["last_build"]
        rows += [("last build", f"{lb['hit_rate']:.0%} hits ({lb['direct_hits']} direct, {lb['misses']} misses)"),
                 ("last wheel", lb["wheel"])]
    bazel = data["bazel"]
    rows += [(f"bazel {name}", f"{size / 1024 ** 2:.1f} MiB ({bazel['cache']})")
             for name, size in bazel["sizes_bytes"].items()]
    print_table(console, ("figure", "value"), rows, long="value", title=f"ccache {data['cache']}")


@cache_app.command("path")
@handle_errors
def path_cmd(ccache: str = typer.Option(None, "--ccache", help="volume:NAME or path:/dir (default: config).")) -> None:
    """Where the cache lives on this host (a volume's mount point, or the directory)."""
    cfg = _with_ccache(ccache)
    location = parse_location(cfg.cache.ccache, "cache.ccache")
    if location.kind == "path":
        out.print(location.value, markup=False)
        return
    engine = Engine()
    engine.ensure_volume(location.value)
    out.print(engine.client.volumes.get(location.value).attrs["Mountpoint"], markup=False)


@cache_app.command("clear")
@handle_errors
def clear_cmd(ccache: str = typer.Option(None, "--ccache", help="volume:NAME or path:/dir (default: config).")) -> None:
    """Empty the cache and zero its statistics (the config in it is kept)."""
    cfg = _with_ccache(ccache)
    _run_ccache(Engine(), cfg, "--clear", "--zero-stats")
    last_path = Path(cfg.data_dir) / "cache-last.json"
    last_path.unlink(missing_ok=True)
    out.print(f"cleared {cfg.cache.ccache}", markup=False)
