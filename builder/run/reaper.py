"""What an interrupted earlier run left behind, removed by the next run.

A run that was SIGKILLed, or whose daemon went away, cannot clean up after itself. What it
makes is marked with its host and pid, so a later run on the same host can tell that its
maker is gone and remove it:

- its containers (label ``builder.pid``) and the work dir a step container names
  (``builder.workdir``), the latter only from the data dir that holds it (``reaped_here``);
- a `builder verify`'s scratch dir (``<data_dir>/verify/rebuild-*``, with an owner file)
  and its empty cache volumes (``Engine.ensure_volume(..., scratch_of=<data dir>)``), both
  only from that data dir, as a step's work dir.

A maker on another host, or one whose pid is alive, is never taken for gone; a pid reused
since only delays the removal to a later run.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

from builder.config import Config
from builder.console import Note
from builder.engine import Engine
from builder.files import pid_gone
from builder.run.wheelstep import WORK_DIR_LABEL, reaped_here, remove_stale_work_dir

OWNER_FILE = ".builder-owner"
SCRATCH_PREFIX = "rebuild-"


def make_scratch_dir(root: Path) -> Path:
    """A new scratch dir under ``root`` holding an owner file (this host and pid)."""
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=root))
    (path / OWNER_FILE).write_text(f"{socket.gethostname()} {os.getpid()}\n")
    return path


def left_behind(path: Path, host: str | None = None) -> bool:
    """Whether the scratch dir ``path`` was made by a process of this host (``host``) that
    is gone. No readable owner file, another host's, or a live pid: not known to be."""
    try:
        owner_host, pid = (path / OWNER_FILE).read_text().split()
    except (OSError, ValueError):
        return False
    return owner_host == (host or socket.gethostname()) and pid_gone(pid)


def reap_scratch(root: Path) -> list[Path]:
    """Remove the scratch dirs under ``root`` whose maker is gone; the ones removed (one
    that cannot be removed whole is left, not an error: the run goes on)."""
    removed = []
    for path in sorted(root.glob(f"{SCRATCH_PREFIX}*")):  # none when root does not exist
        if path.is_dir() and left_behind(path):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed


def verify_root(data_dir: Path) -> Path:
    """Where `builder verify` keeps its scratch dirs (and a rebuilt wheel that differed)."""
    return Path(data_dir) / "verify"


def reap(engine: Engine, cfg: Config, note: Note) -> None:
    """Containers (and their work dirs) an interrupted earlier run left behind: any dead
    run's on this host, but one naming a work dir of another data dir only from there;
    then this data dir's dead verify scratch dirs and scratch volumes (after the
    containers, which may have mounted them)."""
    data_dir = Path(cfg.data_dir)
    work_root = data_dir / "work"
    for name, labels in engine.reap_orphans(lambda labels: reaped_here(labels, data_dir)):
        note(f"removed container {name} left behind by an interrupted earlier run")
        if remove_stale_work_dir(work_root, labels.get(WORK_DIR_LABEL, "")):
            note(f"removed its work dir {labels[WORK_DIR_LABEL]}")
    for path in reap_scratch(verify_root(data_dir)):
        note(f"removed the scratch dir {path} of an interrupted `builder verify`")
    for name in engine.reap_volumes(str(data_dir)):
        note(f"removed volume {name} left behind by an interrupted earlier run")
