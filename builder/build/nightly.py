"""`builder nightly`: build main of torch and torch_xla as dated dev versions.

Versions follow upstream nightlies: ``X.Y.Z.devYYYYMMDD`` (torch from its version.txt,
passed as PYTORCH_BUILD_VERSION; torch_xla the same X.Y.Z through TORCH_XLA_VERSION, so
the pair matches). A second nightly on the same day with new commits gets
``.devYYYYMMDDNN`` (NN = 01, 02, ...), which sorts after the first, so ``pip install
--pre`` picks the newest. When neither SHA moved since the last nightly, nothing is built.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from builder.config import Config
from builder.errors import BuilderError, BuildError
from builder.files import atomic_write
from builder.source.mirror import update_mirror
from builder.source.refs import git_env, resolve_ref

EXIT_BUILT = 0
EXIT_FAILED = 1
EXIT_NOTHING_NEW = 3


@dataclass
class NightlyPlan:
    date: str
    serial: int
    torch_sha: str
    xla_sha: str
    torch_version: str
    xla_version: str
    nothing_new: bool = False


@dataclass
class NightlyState:
    last: dict[str, str] = field(default_factory=dict)  # {"torch": sha, "xla": sha}
    runs: dict[str, int] = field(default_factory=dict)  # date -> nightlies built that day

    @classmethod
    def load(cls, path: Path) -> NightlyState:
        if not path.is_file():
            return cls()
        data = json.loads(path.read_text())
        return cls(last=data.get("last", {}), runs=data.get("runs", {}))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({"last": self.last, "runs": self.runs}, indent=2))


def nightly_version(base: str, date: str, serial: int) -> str:
    """``2.10.0a0`` on 20261203 -> ``2.10.0.dev20261203`` (``...dev2026120301`` for the 2nd)."""
    release = ".".join(str(part) for part in Version(base).release)
    return f"{release}.dev{date}" if serial == 0 else f"{release}.dev{date}{serial:02d}"


def base_version(mirror: Path, sha: str) -> str:
    """torch's ``version.txt`` at ``sha`` (upstream's source of the release number)."""
    done = subprocess.run(["git", "show", f"{sha}:version.txt"], cwd=mirror, capture_output=True, text=True,
                          env=git_env())
    text = done.stdout.strip()
    if done.returncode != 0 or not re.fullmatch(r"[0-9]+(\.[0-9]+)+[A-Za-z0-9.]*", text):
        raise BuildError(f"cannot read version.txt at {sha[:12]}", "a torch tree carries version.txt at its root")
    return text


def plan_nightly(cfg: Config, state: NightlyState, today: dt.date, torch_repo: str, xla_repo: str,
                 ref: str = "main") -> NightlyPlan:
    torch = resolve_ref(torch_repo, ref)
    xla = resolve_ref(xla_repo, ref)
    date = today.strftime("%Y%m%d")
    serial = state.runs.get(date, 0)
    mirror = update_mirror(Path(cfg.data_dir) / "mirrors", torch.url, torch.sha)
    version = nightly_version(base_version(mirror, torch.sha), date, serial)
    nothing_new = state.last == {"torch": torch.sha, "xla": xla.sha}
    return NightlyPlan(date, serial, torch.sha, xla.sha, version, version, nothing_new)


def log_tail(error: BuilderError, lines: int = 50) -> tuple[Path, str] | None:
    """The failing stage's log (named in the error's hint) and its last lines."""
    match = re.search(r"see the log (\S+)", error.hint or "")
    if not match:
        return None
    path = Path(match.group(1))
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return None
    return path, "\n".join(text)


def write_report(report_dir: Path, data: dict[str, Any]) -> Path:
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / "report.json"
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True))
    return path
