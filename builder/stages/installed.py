"""Images with wheels already installed: a layer over a stage image holding the wheels a
container needs before its own work starts (the prebuilt torch an extension builds
against, the torch a smoke installs an extension next to), installed from the local index
alone and committed once per key, so later containers start with them instead of
installing the same 200 MB again.

The key hashes the parent image ID, the exact wheel files (by sha256) and the install
script: the same inputs give the same layer, a changed one a new layer. The files are
installed by path, so the layer holds those bytes and no other build of the same version.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from builder.engine import ContainerSpec, Engine, Mount
from builder.errors import BuildError
from builder.files import sha256_file
from builder.mounts import INDEX_MOUNT

INSTALLED_REPOSITORY = "builder/installed"
KEY_LENGTH = 24


def pip_from_local_index(*requirements: str, compile_pyc: bool = False) -> str:
    """Install ``requirements`` from the mounted local index only: the machine's pip config,
    find-links and mirrors are switched off, so nothing else can answer. ``--no-compile``
    unless ``compile_pyc``: most installs live for one container, and byte-compiling
    torch's files (thousands) took 10 of the 17 s of installing the CPU torch 2.13.0
    wheel; an import without .pyc costs about 1 s more instead (measured in the python
    stage, 2 cores). A committed layer compiles once for every container after it."""
    return (f"PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= pip install --no-cache-dir "
            f"--disable-pip-version-check {'' if compile_pyc else '--no-compile '}"
            f"--index-url file://{INDEX_MOUNT}/simple/ "
            + " ".join(shlex.quote(r) for r in requirements))


def install_files_script(filenames: list[str]) -> str:
    """The layer's script: the exact files (by path in the mounted index), their
    dependencies from the index, compiled once; then the installed set, for the log."""
    paths = [f"{INDEX_MOUNT}/files/{name}" for name in sorted(filenames)]
    return ("set -eu\nmkdir -p \"$HOME\"\n" + pip_from_local_index(*paths, compile_pyc=True)
            + "\npip list --format=freeze --disable-pip-version-check\n")


def installed_key(parent_id: str, wheel_sha256s: list[str], script: str) -> str:
    """What is installed into what, and how."""
    payload = json.dumps([parent_id, sorted(wheel_sha256s), script])
    return hashlib.sha256(payload.encode()).hexdigest()[:KEY_LENGTH]


@dataclass(frozen=True)
class Installed:
    tag: str
    reused: bool
    seconds: float


def commit_installed(engine: Engine, index_root: Path, parent_tag: str, script: str, repository: str, key: str,
                     labels: dict[str, str], log: IO[str], what: str) -> Installed:
    """``repository:key``: ``script`` run over ``parent_tag`` with the index mounted
    read-only and no network, committed when it exits 0; reused when the tag exists.
    A failed install raises BuildError naming ``what`` and nothing is tagged."""
    tag = f"{repository}:{key}"
    if engine.image_id(tag) is not None:
        return Installed(tag, True, 0.0)
    started = time.monotonic()
    spec = ContainerSpec(image=parent_tag, command=["sh", "-c", script], environment={"HOME": "/tmp/installed-home"},
                         network="none", mounts=[Mount(str(index_root), INDEX_MOUNT, read_only=True)],
                         labels={"builder.step": "installed-layer", "builder.key": key})
    log.write(f"# {tag} from {parent_tag}: {what}\n")
    result, image_id = engine.run_and_commit(spec, repository, key, log, labels={"builder.installed.key": key,
                                                                                 **labels})
    if result.exit_code != 0 or image_id is None:
        tail = "\n".join(result.output.strip().splitlines()[-5:])
        where = getattr(log, "name", None)  # a file's path; an in-memory log has none
        check = "`builder index check` lists what the index holds"
        raise BuildError(f"installing {what} from the local index failed (exit {result.exit_code}): {tail}",
                         f"see the log {where}; {check}" if where else check)
    return Installed(tag, False, time.monotonic() - started)


def layer_tag(parent_id: str, wheels: list[tuple[str, str]], repository: str = INSTALLED_REPOSITORY) -> str:
    """The tag of the layer with ``wheels`` ((filename, sha256), ...) installed over the
    image ``parent_id``: ``repository:<key>``."""
    script = install_files_script([name for name, _ in wheels])
    return f"{repository}:{installed_key(parent_id, [sha for _, sha in wheels], script)}"


def ensure_installed(engine: Engine, index_root: Path, parent_tag: str, parent_id: str,
                     wheels: list[tuple[str, str]], log: IO[str],
                     repository: str = INSTALLED_REPOSITORY) -> Installed:
    """``repository:<key>`` (``builder/installed`` unless named): ``wheels`` ((filename,
    sha256), ...) and their dependencies installed over ``parent_tag``; built once per key.
    The files are checked against their sha256 only when the layer is made: a layer that
    exists holds the bytes its key names (checked when it was made)."""
    tag = layer_tag(parent_id, wheels, repository)
    if engine.image_id(tag) is not None:
        return Installed(tag, True, 0.0)
    for name, sha in wheels:  # the key names these bytes: the layer must hold them
        if sha256_file(index_root / "files" / name) != sha:
            raise BuildError(f"{name} in the index {index_root} is not the wheel planned (sha256 {sha[:12]}...)",
                             "the index changed under the run: run it again")
    script = install_files_script([name for name, _ in wheels])
    key = tag.rpartition(":")[2]
    return commit_installed(engine, index_root, parent_tag, script, repository, key, {
        "builder.installed.parent": parent_id, "builder.installed.wheels": json.dumps(sorted(n for n, _ in wheels))},
        log, ", ".join(sorted(n for n, _ in wheels)))
