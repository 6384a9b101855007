"""Typed configuration: defaults < builder.toml < BUILDER_* environment < flags.

Loaded once into a frozen :class:`Config` and passed down; no other module reads
builder.toml or BUILDER_* variables. Every pin that can change an image is here.
Errors name the file, the key and (for the file) the line.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import validate
from builder.errors import ConfigError, ValidationError

CONFIG_FILENAME = "builder.toml"
ENV_PREFIX = "BUILDER_"
# BUILDER_* variables that are not settings: the config path and secrets, which are read
# only where needed and never land in the Config (so never in a manifest or a log).
NOT_SETTINGS = frozenset({"BUILDER_CONFIG", "BUILDER_INDEX_PASSWORD", "BUILDER_INDEX_USER"})


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "builder")


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


@dataclass(frozen=True)
class PythonConfig:
    version: str = "3.11"  # python3.X package series
    package_version: str = "3.11.2-6+deb12u8"  # exact Debian version of python3.X(-dev,-venv)
    requirements: list[str] = field(
        # build: the PEP 517 front end every wheel step runs (pypa/build); the packages a
        # commit needs to build come from the commit itself, in the deps layer.
        default_factory=lambda: ["setuptools==80.9.0", "wheel==0.45.1", "packaging==25.0", "build==1.6.1"]
    )
    index_url: str = "https://pypi.org/simple"


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


@dataclass(frozen=True)
class PrebuiltConfig:
    """Where prebuilt wheels (torch by version, their dependencies) are fetched from."""

    index_url: str = "https://pypi.org/simple"
    find_links: list[str] = field(default_factory=list)  # extra dirs/URLs searched first
    download_cache: str = ""  # verified downloads kept for reruns; empty: <data_dir>/downloads


@dataclass(frozen=True)
class IndexConfig:
    dir: str = ""  # empty: <data_dir>/index


@dataclass(frozen=True)
class ReposConfig:
    torch: str = "https://github.com/pytorch/pytorch.git"
    xla: str = "https://github.com/pytorch/xla.git"


@dataclass(frozen=True)
class CacheConfig:
    ccache: str = "volume:builder-ccache"  # volume:NAME or path:/dir
    ccache_max_size: str = "20G"
    ccache_remote: str = ""
    # Use the cache without writing to it (a cache dir the build user cannot write).
    ccache_read_only: bool = False
    bazel: str = "volume:builder-bazel"
    bazel_remote: str = ""


@dataclass(frozen=True)
class Config:
    base: BaseConfig = field(default_factory=BaseConfig)
    toolchain: ToolchainConfig = field(default_factory=ToolchainConfig)
    python: PythonConfig = field(default_factory=PythonConfig)
    ca: CAConfig = field(default_factory=CAConfig)
    build: BuildConfig = field(default_factory=BuildConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    prebuilt: PrebuiltConfig = field(default_factory=PrebuiltConfig)
    repos: ReposConfig = field(default_factory=ReposConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    data_dir: str = field(default_factory=default_data_dir)
    source: str = "<defaults>"  # where the file part came from, for messages
    # Where ca.extra_certificates came from, for the summary: "$SSL_CERT_FILE" (found in
    # the environment), "setting" (builder.toml, BUILDER_CA_*, flags) or "" (none).
    ca_origin: str = ""

    @property
    def index_dir(self) -> Path:
        return Path(self.index.dir or os.path.join(self.data_dir, "index")).expanduser()

    @property
    def logs_dir(self) -> Path:
        return Path(self.data_dir).expanduser() / "logs"

    def replace(self, **sections: Any) -> Config:
        return dataclasses.replace(self, **sections)


# Per-key checks: a value that will reach a shell line, a URL or a tag is validated here.
_CHECKS: dict[str, Callable[[Any, str], Any]] = {
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
    "repos.torch": validate.repo_url,
    "repos.xla": validate.repo_url,
    "cache.ccache": lambda v, f: _match(v, f, r"^(volume:[A-Za-z0-9][A-Za-z0-9_.-]*|path:/.*)$",
                                        "cache location (volume:NAME or path:/dir)"),
    "cache.bazel": lambda v, f: _match(v, f, r"^(volume:[A-Za-z0-9][A-Za-z0-9_.-]*|path:/.*)$",
                                       "cache location (volume:NAME or path:/dir)"),
    "cache.ccache_max_size": lambda v, f: _match(v, f, r"^[0-9]+(\.[0-9]+)?[KMGT]?$", "size like 20G"),
    "cache.ccache_remote": lambda v, f: _match(v, f, r"^((redis|http)://[A-Za-z0-9.:/_@%|=-]+( |$))*$",
                                               "redis://HOST:PORT or http://HOST/PATH (several: space separated)"),
    "cache.bazel_remote": lambda v, f: v and validate.http_url(v, f),
}


def _match(value: Any, field_name: str, pattern: str, what: str) -> Any:
    if not isinstance(value, str) or not re.match(pattern, value) or "\n" in value:
        raise ValidationError(f"{field_name} {value!r} is not a valid {what}")
    return value


def _sections() -> dict[str, type]:
    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config) if dataclasses.is_dataclass(hints[f.name])}


def _line_of(text: str, section: str, key: str | None) -> int | None:
    """Best-effort line number of ``[section] key`` in a TOML text (tomllib gives none)."""
    current = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.match(r"^\[\s*([A-Za-z0-9_.-]+)\s*\]", stripped)
        if header:
            current = header.group(1)
            if key is None and current == section:
                return number
            continue
        if key is not None and current == section and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return number
    return None


def _coerce(value: Any, target: Any, where: str) -> Any:
    """Check a TOML/env/flag value against the annotated type; env strings are parsed."""
    origin = typing.get_origin(target)
    if target is bool:
        if isinstance(value, str):
            low = value.strip().lower()
            if low in {"1", "true", "yes", "on"}:
                return True
            if low in {"0", "false", "no", "off"}:
                return False
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where} must be a boolean (true/false), got {value!r}")
    if target is int:
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    if target is float:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{where} must be a number, got {value!r}")
    if origin is list:
        if isinstance(value, str):
            value = [v for v in re.split(r"[,\s]+", value.strip()) if v]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise ConfigError(f"{where} must be a list of strings, got {value!r}")
    if target is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where} must be a string, got {type(value).__name__} {value!r}")
    raise ConfigError(f"{where}: unsupported type {target!r}")  # pragma: no cover


def _apply(values: dict[str, dict[str, Any]], data: Mapping[str, Any], origin: str,
           text: str | None = None) -> None:
    sections = _sections()
    for section, content in data.items():
        if section == "data_dir":
            values.setdefault("", {})["data_dir"] = _coerce(content, str, f"{origin}: data_dir")
            continue
        if section not in sections:
            line = _line_of(text, section, None) if text else None
            at = f"{origin}:{line}" if line else origin
            raise ConfigError(f"{at}: unknown section [{section}]",
                              f"known sections: {', '.join(sorted(sections))}")
        if not isinstance(content, Mapping):
            raise ConfigError(f"{origin}: [{section}] must be a table")
        hints = typing.get_type_hints(sections[section])
        for key, value in content.items():
            line = _line_of(text, section, key) if text else None
            at = f"{origin}:{line}" if line else origin
            if key not in hints:
                raise ConfigError(f"{at}: unknown key {section}.{key}",
                                  f"known keys in [{section}]: {', '.join(sorted(hints))}")
            coerced = _coerce(value, hints[key], f"{at}: {section}.{key}")
            check = _CHECKS.get(f"{section}.{key}")
            if check is not None:
                try:
                    check(coerced, f"{section}.{key}")
                except ValidationError as exc:
                    raise ConfigError(f"{at}: {exc.message}", exc.hint) from None
            values.setdefault(section, {})[key] = coerced


def _env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """BUILDER_<SECTION>_<KEY>=value, e.g. BUILDER_TOOLCHAIN_GCC or BUILDER_INDEX_DIR."""
    out: dict[str, dict[str, str]] = {}
    sections = _sections()
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name in NOT_SETTINGS:
            continue
        rest = name[len(ENV_PREFIX):].lower()
        if rest == "data_dir":
            out.setdefault("data_dir", value)  # type: ignore[arg-type]
            continue
        for section in sorted(sections, key=len, reverse=True):
            if rest.startswith(section + "_"):
                out.setdefault(section, {})[rest[len(section) + 1:]] = value
                break
        else:
            raise ConfigError(f"environment variable {name}: no such setting",
                              "use BUILDER_<SECTION>_<KEY>, e.g. BUILDER_INDEX_DIR")
    return out


def find_config_file(explicit: str | None, environ: Mapping[str, str]) -> Path | None:
    """--config, else $BUILDER_CONFIG, else ./builder.toml if present. Explicit names must exist."""
    name = explicit or environ.get("BUILDER_CONFIG")
    if name:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"config file {name} not found", "pass an existing file to --config")
        return path
    local = Path(CONFIG_FILENAME)
    return local if local.is_file() else None


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """Build the Config. ``overrides`` maps ``section.key`` (from CLI flags) to values."""
    environ = os.environ if environ is None else environ
    values: dict[str, dict[str, Any]] = {}
    source = "<defaults>"
    if path is not None:
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        _apply(values, data, str(path), text)
        source = str(path)
    _apply(values, _env_overrides(environ), "environment")
    flag_data: dict[str, dict[str, Any]] = {}
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        if not key:
            flag_data[section] = value  # type: ignore[assignment]
        else:
            flag_data.setdefault(section, {})[key] = value
    _apply(values, flag_data, "command line")

    ca_origin = "setting" if values.get("ca", {}).get("extra_certificates") else ""
    if "extra_certificates" not in values.get("ca", {}):
        found = host_ca_bundle(environ)
        if found is not None:
            variable, bundle = found
            values.setdefault("ca", {})["extra_certificates"] = bundle
            ca_origin = f"${variable}"

    sections = _sections()
    kwargs: dict[str, Any] = {name: cls(**values.get(name, {})) for name, cls in sections.items()}
    if "data_dir" in values.get("", {}):
        kwargs["data_dir"] = values[""]["data_dir"]
    return Config(**kwargs, source=source, ca_origin=ca_origin)


def host_ca_bundle(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, path) of the first HOST_CA_VARIABLES entry naming an existing file.

    The host already trusts this bundle (a TLS-intercepting proxy's CA, a private
    index's); the images need the same trust for pip and git to reach the same hosts."""
    for variable in HOST_CA_VARIABLES:
        path = environ.get(variable, "")
        if path and Path(path).expanduser().is_file():
            return variable, path
    return None


def describe_ca(config: Config) -> str:
    """One line for summaries: which CA bundle the images trust, and why."""
    path = config.ca.extra_certificates
    if not path:
        return "CA: Debian's bundle only ([ca] extra_certificates is empty)"
    if config.ca_origin.startswith("$"):
        return (f"CA: {path} (from {config.ca_origin}; set [ca] extra_certificates = \"\" "
                "or pass --no-host-ca to turn it off)")
    return f"CA: {path} ([ca] extra_certificates)"


def as_dict(config: Config) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data.pop("source", None)
    data.pop("ca_origin", None)
    return data
