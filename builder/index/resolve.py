"""Resolving with pip: which wheel files satisfy some requirements, with their upstream sha256.

``pip install --dry-run --report`` for the python stage's interpreter and platform
(``--python-version/--abi/--platform``, binary only), with the machine's pip
configuration switched off so only the named sources answer. pip reads the wheels'
metadata (PEP 658) rather than the wheels, so resolving costs seconds. The report names
each chosen file's URL and the sha256 the upstream page gave for it (PEP 503
``#sha256=`` fragment or PEP 691 ``hashes``).

An upstream resolution is recorded under ``<cache>/resolved/`` (keyed by the exact
request), so a rerun asks nobody.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from builder import validate
from builder.errors import BuildError, ValidationError
from builder.files import atomic_write
from builder.index.directory import DirectoryIndex
from builder.interpreter import Interpreter, interpreter


@dataclass(frozen=True)
class Sources:
    """Where wheels come from: an index URL (None: no index) and find-links dirs/URLs."""

    index_url: str | None
    find_links: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [self.index_url] if self.index_url else []
        return ", ".join(parts + [f"find-links {link}" for link in self.find_links]) or "nothing"


@dataclass(frozen=True)
class Pin:
    """One file the resolver chose: where it lives upstream and the hash its page gave."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str  # from the upstream page (or pip's hash of a local find-links file)
    requested: bool = False
    requires_dist: tuple[str, ...] = ()  # the file's Requires-Dist, as pip read it (PEP 658 metadata)


# ----------------------------------------------------------------------------- pure parts
def pip_env() -> dict[str, str]:
    """The environment pip runs with: the machine's pip config, mirrors and find-links off
    (only the sources builder names answer); the CA settings (PIP_CERT) kept."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT", "PIP_NO_INDEX")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def resolve_command(requirements: list[str], python: Interpreter | str, sources: Sources, deps: bool,
                    report: Path) -> list[str]:
    """``pip install --dry-run --report`` for the target interpreter: resolves, installs nothing."""
    python = interpreter(python)
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--disable-pip-version-check", "--report", str(report), "--only-binary=:all:",
               "--implementation", "cp", "--python-version", python.series,
               "--abi", python.abi, "--abi", "abi3", "--abi", "none"]
    for platform in python.platforms:
        command += ["--platform", platform]
    command += ["--index-url", sources.index_url] if sources.index_url else ["--no-index"]
    for link in sources.find_links:
        command += ["--find-links", link]
    if not deps:
        command.append("--no-deps")
    return [*command, "--", *requirements]


def parse_report(report: dict[str, Any]) -> list[Pin]:
    """The files of a pip installation report (``--report``), with their upstream sha256."""
    pins = []
    for item in report.get("install", []):
        info = item.get("download_info") or {}
        url = info.get("url", "")
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
        if not filename.endswith(".whl"):
            raise BuildError(f"the resolver chose {url or item}, which is not a wheel")
        meta = item.get("metadata") or {}
        pins.append(Pin(meta.get("name", ""), meta.get("version", ""), filename, url,
                        hashes.get("sha256", ""), bool(item.get("requested")),
                        tuple(meta.get("requires_dist") or ())))
    return pins


def sources_for(source: str | None, index_url: str, find_links: list[str]) -> Sources:
    """``--from``: an http(s) index URL, a file:// or local PEP 503 index (has index.html),
    or a plain directory of wheels (find-links, no index)."""
    if not source:
        return Sources(index_url, tuple(find_links))
    if source.startswith(("http://", "https://")):
        return Sources(validate.http_url(source, "--from"), tuple(find_links))
    path = Path(unquote(urlparse(source).path)) if source.startswith("file://") else Path(source)
    if not path.is_dir():
        raise ValidationError(f"--from {source}: not a URL or an existing directory")
    if (path / "index.html").is_file():
        return Sources(path.absolute().as_uri() + "/", tuple(find_links))
    return Sources(None, (str(path.absolute()), *find_links))


# ------------------------------------------------------------------------------- resolving
def resolve(requirements: list[str], python: Interpreter | str, sources: Sources, deps: bool,
            log: Path | None = None) -> list[Pin]:
    with tempfile.TemporaryDirectory(prefix="builder-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        command = resolve_command(requirements, python, sources, deps, report)
        done = subprocess.run(command, capture_output=True, text=True, env=pip_env())
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as fh:
                fh.write("$ " + " ".join(command) + "\n" + done.stdout + done.stderr)
        if done.returncode != 0:
            reason = next((ln for ln in reversed(done.stderr.splitlines()) if ln.startswith("ERROR")),
                          f"pip exit {done.returncode}")
            raise BuildError(f"resolving {' '.join(requirements)} from {sources.describe()} failed: "
                             f"{reason.removeprefix('ERROR: ')}", f"see {log}" if log else None)
        return parse_report(json.loads(report.read_text()))


def resolve_locally(index: DirectoryIndex, requirements: list[str], python: Interpreter | str, deps: bool,
                    log: Path | None = None) -> list[Pin] | None:
    """The pins when the local index alone satisfies the requirements, else None."""
    if not (index.simple_dir / "index.html").is_file():
        return None
    try:
        return resolve(requirements, python, Sources(index.simple_url()), deps, log)
    except BuildError:
        return None


# ------------------------------------------------------------------------ recorded resolutions
def resolution_path(cache_dir: Path, requirements: list[str], python: Interpreter | str, sources: Sources,
                    deps: bool) -> Path:
    """Where the last upstream resolution of exactly this request is recorded."""
    python = interpreter(python)
    key = json.dumps([sorted(requirements), python.series, python.platforms, sources.describe(), deps])
    return cache_dir / "resolved" / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def read_resolution(path: Path) -> list[Pin] | None:
    try:
        data = json.loads(path.read_text())
        return [Pin(**{**pin, "requires_dist": tuple(pin.get("requires_dist") or ())}) for pin in data["pins"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_resolution(path: Path, requirements: list[str], pins: list[Pin]) -> None:
    """Record a resolution for next time; a shared cache this uid may not write in (a
    teammate's, outside the group) only means upstream is asked again next time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):
        atomic_write(path, json.dumps({"requirements": requirements, "resolved": time.time(),
                                       "pins": [asdict(p) for p in pins]}, indent=1))
