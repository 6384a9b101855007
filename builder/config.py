"""Typed configuration: defaults < builder.toml < BUILDER_* environment < flags.

Loaded once into a frozen :class:`Config` and passed down; no other module reads
builder.toml or BUILDER_* variables. Every pin that can change an image is here.
Errors name the file, the key and (for the file) the line.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import validate
from builder.errors import ConfigError, ValidationError
from builder.settings import (  # noqa: F401 (re-exported: builder.config is where callers import settings from)
    CHECKS,
    HOST_CA_VARIABLES,
    MAX_JOBS,
    PATH_KEYS,
    PATH_PREFIXED_KEYS,
    RANGES,
    BaseConfig,
    BazelConfig,
    BuildConfig,
    CacheConfig,
    CAConfig,
    DistConfig,
    GitConfig,
    IndexConfig,
    PackageConfig,
    PrebuiltConfig,
    PythonConfig,
    Repos,
    ToolchainConfig,
    WheelsConfig,
    check_table_name,
    did_you_mean,
    parse_package,
)

CONFIG_FILENAME = "builder.toml"
ENV_PREFIX = "BUILDER_"
# BUILDER_* variables that are not settings: the config path and secrets, which are read
# only where needed and never land in the Config (so never in a manifest or a log).
# Variables outside the known sections (BUILDER_DEBUG, a test suite's own) are ignored.
NOT_SETTINGS = frozenset({"BUILDER_CONFIG", "BUILDER_INDEX_PASSWORD", "BUILDER_INDEX_USER", "BUILDER_DIST_TOKEN"})
# The free tables: [repos] NAME = URL, and [packages.NAME] (builder.settings checks them).
TABLES = ("repos", "packages")


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "builder")


@dataclass(frozen=True)
class Config:
    base: BaseConfig = field(default_factory=BaseConfig)
    toolchain: ToolchainConfig = field(default_factory=ToolchainConfig)
    python: PythonConfig = field(default_factory=PythonConfig)
    ca: CAConfig = field(default_factory=CAConfig)
    build: BuildConfig = field(default_factory=BuildConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    prebuilt: PrebuiltConfig = field(default_factory=PrebuiltConfig)
    repos: Repos = field(default_factory=Repos)  # recipe name -> git URL, only what was set
    packages: dict[str, PackageConfig] = field(default_factory=dict)  # [packages.NAME]
    cache: CacheConfig = field(default_factory=CacheConfig)
    bazel: BazelConfig = field(default_factory=BazelConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    git: GitConfig = field(default_factory=GitConfig)
    wheels: WheelsConfig = field(default_factory=WheelsConfig)
    data_dir: str = field(default_factory=default_data_dir)
    source: str = "<defaults>"  # where the file part came from, for messages
    # Where ca.extra_certificates came from, for the summary: "$SSL_CERT_FILE" (found in
    # the environment), "setting" (builder.toml, BUILDER_CA_*, flags) or "" (none).
    ca_origin: str = ""

    @property
    def index_dir(self) -> Path:
        return Path(self.index.dir or os.path.join(self.data_dir, "index"))

    @property
    def logs_dir(self) -> Path:
        return Path(self.data_dir) / "logs"

    def replace(self, **sections: Any) -> Config:
        return dataclasses.replace(self, **sections)


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


def _plain(value: str, where: str) -> str:
    """No setting holds a control character (NUL, ESC, a newline): refused before any check."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{where} contains a control character: {value[:200]!r}")
    return value


def _resolve_path(value: str, base: Path, where: str) -> str:
    """``~`` and ``$VAR`` expanded, then absolute (relative to ``base``) and normalized."""
    if not value:
        return value
    expanded = os.path.expandvars(os.path.expanduser(value))
    unset = re.search(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)", expanded)
    if unset:
        raise ConfigError(f"{where} {value!r} names {unset.group(0)}, which is not set in the environment")
    if expanded.startswith("~"):
        raise ConfigError(f"{where} {value!r}: no such user's home directory")
    return os.path.normpath(os.path.join(base, expanded))


def _check_range(value: Any, key: str, where: str) -> None:
    low, high = RANGES[key]
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{where} must be between {low:g} and {high:g}, got {value!r}")


def _paths(key: str, value: Any, base: Path, where: str) -> Any:
    """The value of ``key`` with its path(s) resolved; other keys unchanged."""
    if key in PATH_KEYS:
        return _resolve_path(value, base, where)
    if key in PATH_PREFIXED_KEYS and isinstance(value, str) and value.startswith("path:"):
        return "path:" + _resolve_path(value[len("path:"):], base, where)
    if key == "prebuilt.find_links":
        return [x if re.match(r"^[a-z][a-z0-9+.-]*://", x) else _resolve_path(x, base, where) for x in value]
    return value


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
            return [_plain(v, where) for v in value]
        raise ConfigError(f"{where} must be a list of strings, got {value!r}")
    if target is str:
        if isinstance(value, str):
            return _plain(value, where)
        raise ConfigError(f"{where} must be a string, got {type(value).__name__} {value!r}")
    raise ConfigError(f"{where}: unsupported type {target!r}")  # pragma: no cover


def _apply(values: dict[str, dict[str, Any]], data: Mapping[str, Any], origin: str,
           text: str | None = None, base: Path | None = None) -> None:
    """Check ``data`` (one source: the file, the environment or the flags) into ``values``;
    relative paths in it are taken relative to ``base`` (default: the working directory)."""
    sections = _sections()
    base = Path(os.path.abspath(base or os.getcwd()))
    for section, content in data.items():
        if section == "data_dir":
            where = f"{origin}: data_dir"
            values.setdefault("", {})["data_dir"] = _resolve_path(_coerce(content, str, where), base, where)
            continue
        if section not in sections and section not in TABLES:
            line = _line_of(text, section, None) if text else None
            at = f"{origin}:{line}" if line else origin
            known = [*sections, *TABLES]
            raise ConfigError(f"{at}: unknown section [{section}]",
                              f"{did_you_mean(section, known, lambda s: f'[{s}]')}"
                              f"known sections: {', '.join(sorted(known))}")
        if not isinstance(content, Mapping):
            raise ConfigError(f"{origin}: [{section}] must be a table")
        if section in TABLES:
            _apply_table(values, section, content, origin, text)
            continue
        hints = typing.get_type_hints(sections[section])
        for key, value in content.items():
            line = _line_of(text, section, key) if text else None
            at = f"{origin}:{line}" if line else origin
            if key not in hints:
                raise ConfigError(f"{at}: unknown key {section}.{key}",
                                  f"{did_you_mean(key, hints)}known keys in [{section}]: {', '.join(sorted(hints))}")
            where = f"{at}: {section}.{key}"
            coerced = _paths(f"{section}.{key}", _coerce(value, hints[key], where), base, where)
            if f"{section}.{key}" in RANGES:
                _check_range(coerced, f"{section}.{key}", where)
            check = CHECKS.get(f"{section}.{key}")
            if check is not None:
                try:
                    check(coerced, f"{section}.{key}")
                except ValidationError as exc:
                    raise ConfigError(f"{at}: {exc.message}", exc.hint) from None
            values.setdefault(section, {})[key] = coerced


def _apply_table(values: dict[str, dict[str, Any]], section: str, content: Mapping[str, Any], origin: str,
                 text: str | None) -> None:
    """[repos] NAME = URL (any recipe name) and [packages.NAME] tables."""
    for name, value in content.items():
        def at(key: str | None, table: str = f"{section}.{name}" if section == "packages" else section,
               name: str = name) -> str:
            line = _line_of(text, table, key if section == "packages" else (key or name)) if text else None
            return f"{origin}:{line}" if line else origin
        if section == "packages":
            values.setdefault(section, {})[name] = parse_package(name, value, at)
            continue
        check_table_name(name, at(None), "[repos] key")
        url = _coerce(value, str, f"{at(None)}: repos.{name}")
        try:
            validate.repo_url(url, f"repos.{name}")
        except ValidationError as exc:
            raise ConfigError(f"{at(None)}: {exc.message}", exc.hint) from None
        values.setdefault(section, {})[name] = url


def _env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """BUILDER_<SECTION>_<KEY>=value, e.g. BUILDER_TOOLCHAIN_GCC or BUILDER_INDEX_DIR.

    A variable naming a known section but no key of it is a typo, refused with the
    closest key (as cibuildwheel does for CIBW_*); BUILDER_ variables outside the known
    sections (BUILDER_DEBUG, a test suite's own) are not settings and are ignored."""
    out: dict[str, dict[str, str]] = {}
    sections = _sections()
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name in NOT_SETTINGS:
            continue
        rest = name[len(ENV_PREFIX):].lower()
        if rest == "data_dir":
            out.setdefault("data_dir", value)  # type: ignore[arg-type]
            continue
        section = next((s for s in sorted([*sections, *TABLES], key=len, reverse=True) if rest.startswith(s + "_")),
                       None)
        if section is None:
            continue
        key = rest[len(section) + 1:]
        if section == "packages":
            raise ConfigError(f"environment variable {name}: [packages.NAME] tables are set in builder.toml only")
        if section == "repos":  # BUILDER_REPOS_<NAME>: a free table, any recipe name
            out.setdefault(section, {})[key] = value
            continue
        hints = typing.get_type_hints(sections[section])
        if key not in hints:
            def variable(k: str, section: str = section) -> str:
                return f"{ENV_PREFIX}{section.upper()}_{k.upper()}"
            raise ConfigError(f"environment variable {name}: no setting {section}.{key}",
                              f"{did_you_mean(key, hints, variable)}"
                              f"known keys in [{section}]: {', '.join(sorted(hints))}")
        out.setdefault(section, {})[key] = value
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
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                              "TOML files are UTF-8; save it as UTF-8") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        _apply(values, data, str(path), text, base=Path(os.path.abspath(path)).parent)
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
    kwargs["repos"] = Repos(values.get("repos", {}))
    kwargs["packages"] = dict(values.get("packages", {}))
    kwargs["data_dir"] = values.get("", {}).get("data_dir") or _resolve_path(default_data_dir(), Path.cwd(),
                                                                              "data_dir")
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
