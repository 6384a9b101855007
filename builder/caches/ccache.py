"""ccache in build containers: where the cache lives, its config, and its statistics.

The config is written into the cache itself (``/ccache/ccache.conf``) so every
container and every teammate using the volume gets the same settings:
- ``base_dir = /src``: sources are mounted under /src, so paths hash relative;
- ``hash_dir = false``: with -g, the cwd is not hashed (hits across checkout paths);
- ``compiler_check = string:...``: the pinned compiler versions, not each binary's mtime,
  which differs between images that hold the same package;
- ``umask = 002``: files stay group-writable for teammates with other uids.
Statistics come from ``ccache --print-stats`` (tab separated), read before and after.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.errors import ConfigError
from builder.mounts import CCACHE_MOUNT, SOURCE_ROOT  # noqa: F401 (re-exported for the build)


@dataclass(frozen=True)
class CacheLocation:
    kind: str  # "volume" or "path"
    value: str  # volume name or absolute host path

    @property
    def docker_source(self) -> str:
        return self.value

    def describe(self) -> str:
        return f"{self.kind}:{self.value}"


def parse_location(text: str, what: str = "cache") -> CacheLocation:
    kind, sep, value = text.partition(":")
    if not sep or kind not in ("volume", "path") or not value:
        raise ConfigError(f"{what} {text!r} must be volume:NAME or path:/absolute/dir")
    if kind == "path" and not value.startswith("/"):
        raise ConfigError(f"{what} {text!r}: the path must be absolute")
    return CacheLocation(kind, value)


def remote_key(version: str) -> str:
    """ccache 4.7 renamed secondary_storage to remote_storage (the old name still works)."""
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    return "remote_storage" if tuple(parts) >= (4, 7) else "secondary_storage"


def config_text(max_size: str, compiler_check: str, remote: str = "", ccache_version: str = "4.7.5") -> str:
    lines = [
        "# written by builder; shared by every build using this cache",
        f"max_size = {max_size}",
        f"base_dir = {SOURCE_ROOT}",
        "hash_dir = false",
        f"compiler_check = {compiler_check}",
        "umask = 002",
        "compression = true",
    ]
    if remote:
        lines.append(f"{remote_key(ccache_version)} = {remote}")
    return "\n".join(lines) + "\n"


def read_only_env(compiler_check: str) -> dict[str, str]:
    """The shared settings as environment, for a cache that cannot take a config file."""
    return {"CCACHE_READONLY": "1", "CCACHE_BASEDIR": SOURCE_ROOT, "CCACHE_NOHASHDIR": "1",
            "CCACHE_COMPILERCHECK": compiler_check, "CCACHE_TEMPDIR": "/tmp/ccache-tmp"}


def parse_print_stats(text: str) -> dict[str, int]:
    stats: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().lstrip("-").isdigit():
            stats[name.strip()] = int(value)
    return stats


@dataclass(frozen=True)
class CacheStats:
    direct_hits: int = 0
    preprocessed_hits: int = 0
    misses: int = 0
    remote_hits: int = 0
    remote_misses: int = 0
    remote_errors: int = 0

    @property
    def hits(self) -> int:
        return self.direct_hits + self.preprocessed_hits

    @property
    def calls(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        return self.hits / self.calls if self.calls else 0.0

    @property
    def direct_rate(self) -> float:
        return self.direct_hits / self.calls if self.calls else 0.0

    @property
    def remote_rate(self) -> float:
        return self.remote_hits / self.calls if self.calls else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {"direct_hits": self.direct_hits, "preprocessed_hits": self.preprocessed_hits,
                "misses": self.misses, "remote_hits": self.remote_hits, "remote_misses": self.remote_misses,
                "remote_errors": self.remote_errors, "hit_rate": round(self.hit_rate, 4)}

    def summary(self) -> str:
        if not self.calls:
            return "no compiler calls"
        text = f"{self.hit_rate:.0%} hits ({self.hits}/{self.calls}, direct {self.direct_hits})"
        if self.remote_hits or self.remote_misses or self.remote_errors:
            text += f", remote {self.remote_hits} hits"
        if self.remote_errors:
            text += f", {self.remote_errors} remote errors"
        return text


def stats_delta(before: dict[str, int], after: dict[str, int]) -> CacheStats:
    def d(name: str) -> int:
        return max(0, after.get(name, 0) - before.get(name, 0))

    return CacheStats(direct_hits=d("direct_cache_hit"), preprocessed_hits=d("preprocessed_cache_hit"),
                      misses=d("cache_miss"), remote_hits=d("remote_storage_hit"),
                      remote_misses=d("remote_storage_miss"), remote_errors=d("remote_storage_error"))
