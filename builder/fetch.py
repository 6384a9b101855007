"""Fetch prebuilt wheels (e.g. torch by version, with its dependencies) into the local index.

pip does the resolving and downloading on the host, for the python stage's interpreter
and platform (``--python-version/--abi/--platform``, binary only), with the machine's
pip configuration switched off so that only the configured sources answer. pip checks
each file against the ``#sha256=`` of the page it came from. Downloads land in a cache
dir first, so a second run (or CI on the same machine) downloads nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from builder.errors import BuildError
from builder.index import AddResult, DirectoryIndex

# manylinux tags a cp311 x86_64 Debian bookworm (glibc 2.36) interpreter accepts.
PLATFORMS = ["manylinux_2_36_x86_64", "manylinux_2_35_x86_64", "manylinux_2_34_x86_64",
             "manylinux_2_31_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64", "any"]


@dataclass(frozen=True)
class FetchResult:
    requirements: list[str]
    added: list[AddResult]


def pip_download_command(requirements: list[str], dest: Path, python_series: str, index_url: str,
                         find_links: list[str], deps: bool) -> list[str]:
    abi = "cp" + python_series.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-cache-dir",
               "--only-binary=:all:", "--implementation", "cp", "--python-version", python_series,
               "--abi", abi, "--abi", "abi3", "--abi", "none", "--dest", str(dest), "--index-url", index_url]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    for link in find_links:
        command += ["--find-links", link]
    if not deps:
        command.append("--no-deps")
    return [*command, "--", *requirements]


def fetch(requirements: list[str], index: DirectoryIndex, cache_dir: Path, python_series: str,
          index_url: str, find_links: list[str], deps: bool = True, log: Path | None = None) -> FetchResult:
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT")}
    env["PIP_CONFIG_FILE"] = os.devnull
    before = set(cache_dir.glob("*.whl"))
    command = pip_download_command(requirements, cache_dir, python_series, index_url, find_links, deps)
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("$ " + " ".join(command) + "\n" + done.stdout + done.stderr)
    if done.returncode != 0:
        reason = next((ln for ln in reversed(done.stderr.splitlines()) if ln.startswith("ERROR")),
                      f"pip exit {done.returncode}")
        raise BuildError(f"fetching {' '.join(requirements)} failed: {reason.removeprefix('ERROR: ')}",
                         f"see {log}" if log else None)
    wanted = _downloaded(done.stdout, cache_dir) or sorted(set(cache_dir.glob("*.whl")) - before)
    return FetchResult(requirements, [index.add(path) for path in wanted])


def _downloaded(pip_output: str, cache_dir: Path) -> list[Path]:
    """Files pip reports as saved or already present (``File was already downloaded``)."""
    paths = []
    for line in pip_output.splitlines():
        line = line.strip()
        for prefix in ("Saved ", "File was already downloaded "):
            if line.startswith(prefix):
                path = Path(line[len(prefix):].strip())
                if path.suffix == ".whl":
                    paths.append(path if path.is_absolute() else cache_dir / path.name)
    return sorted(set(paths))
