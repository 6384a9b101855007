"""`builder nightly`: build main of a package set (torch and torch_xla by default) as dated dev versions.

Versions follow upstream nightlies: ``X.Y.Z.devYYYYMMDD`` (torch from its version.txt,
passed as PYTORCH_BUILD_VERSION; torch_xla the same X.Y.Z through TORCH_XLA_VERSION, so
the pair matches). A second nightly on the same day with new commits gets
``.devYYYYMMDDNN`` (NN = 01, 02, ...), which sorts after the first, so ``pip install
--pre`` picks the newest. When neither SHA moved since the last nightly, nothing is built.

A prebuilt-only member of the set (torch_tpu) has no head to build: each nightly lists
the versions on offer (each with the torch its Requires-Dist admits), says which appeared
since the last nightly, and takes the newest that pairs with the nightly torch; a new
pairing version is something new (the set is built again). When none pairs (torch main is
usually ahead of every torch_tpu's range), the rest is built without it and the report
says why.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from builder.config import Config
from builder.errors import BuilderError, BuildError
from builder.files import atomic_write
from builder.recipes import get_recipe
from builder.recipes.base import NightlyOffer
from builder.source.mirror import update_mirror
from builder.source.refs import resolve_ref

EXIT_BUILT = 0
EXIT_FAILED = 1
EXIT_NOTHING_NEW = 3


@dataclass
class NightlyPlan:
    date: str
    serial: int
    shas: dict[str, str]  # recipe name -> the head commit built
    versions: dict[str, str]  # recipe name -> its dated dev version
    nothing_new: bool = False
    offers: dict[str, NightlyOffer] = field(default_factory=dict)  # prebuilt-only members: what is on offer
    new: dict[str, list[str]] = field(default_factory=dict)  # ... and which versions appeared since the last

    @property
    def picked(self) -> dict[str, str]:
        """Prebuilt-only member -> the version tonight takes ("" none pairs)."""
        return {name: offer.picked for name, offer in self.offers.items()}

    @property
    def heads(self) -> dict[str, str]:
        """What decides whether anything is new: the SHAs and the picked prebuilt versions."""
        return {**self.shas, **self.picked}

    def offers_json(self) -> dict[str, Any]:
        return {name: {"picked": offer.picked or None, "why": offer.why, "new": self.new.get(name, []),
                       "offered": [{"version": v, "supports": s} for v, s in offer.offered]}
                for name, offer in self.offers.items()}

    @property
    def version(self) -> str:
        """The run's version: the first package's (the one the others build against)."""
        return next(iter(self.versions.values()))


@dataclass
class NightlyState:
    last: dict[str, str] = field(default_factory=dict)  # recipe name -> the sha the last nightly built
    runs: dict[str, int] = field(default_factory=dict)  # date -> nightlies built that day
    seen: dict[str, list[str]] = field(default_factory=dict)  # prebuilt-only member -> versions seen on offer

    @classmethod
    def load(cls, path: Path) -> NightlyState:
        if not path.is_file():
            return cls()
        data = json.loads(path.read_text())
        return cls(last=data.get("last", {}), runs=data.get("runs", {}), seen=data.get("seen", {}))

    def save(self, path: Path) -> None:
        atomic_write(path, json.dumps({"last": self.last, "runs": self.runs, "seen": self.seen}, indent=2))

    def saw(self, plan: NightlyPlan) -> None:
        """Remember what tonight found on offer (the next report's "new" starts from it)."""
        for name, offer in plan.offers.items():
            self.seen[name] = sorted({*self.seen.get(name, []), *(v for v, _ in offer.offered)}, key=Version)


def nightly_version(base: str, date: str, serial: int) -> str:
    """``2.10.0a0`` on 20261203 -> ``2.10.0.dev20261203`` (``...dev2026120301`` for the 2nd)."""
    release = ".".join(str(part) for part in Version(base).release)
    return f"{release}.dev{date}" if serial == 0 else f"{release}.dev{date}{serial:02d}"


def plan_nightly(cfg: Config, state: NightlyState, today: dt.date, names: list[str], repos: dict[str, str],
                 ref: str = "main") -> NightlyPlan:
    """Heads of ``names`` (build order) and their versions: a package whose recipe names
    a release number (``Recipe.release_base``: torch's version.txt) takes it; the others
    take the first one's, so a pair built together pairs (torch_xla X.Y.Z with torch X.Y.Z).
    A prebuilt-only member is picked once the others' versions are known (``offers``)."""
    date = today.strftime("%Y%m%d")
    serial = state.runs.get(date, 0)
    shas, versions, first = {}, {}, ""
    prebuilt = [name for name in names if get_recipe(name, cfg).prebuilt_only]
    for name in names:
        if name in prebuilt:
            continue
        resolved = resolve_ref(repos[name], ref)
        shas[name] = resolved.sha
        mirror = update_mirror(Path(cfg.data_dir) / "mirrors", resolved.url, resolved.sha)
        base = get_recipe(name, cfg).release_base(mirror, resolved.sha) or first
        if not base:
            raise BuildError(f"{name}: no release number to date a nightly from", "put a package whose recipe reads "
                             "one (e.g. the one the others build against) first")
        first = first or base
        versions[name] = nightly_version(base, date, serial)
    offers, new = {}, {}
    for name in prebuilt:
        offer = get_recipe(name, cfg).nightly_offer(cfg, versions)
        if offer is None:
            raise BuildError(f"{name} is taken prebuilt and has nothing to pair with in this nightly set",
                             "put what it runs with in the set (e.g. --pkg torch)")
        offers[name] = offer
        new[name] = [v for v, _ in offer.offered if v not in state.seen.get(name, [])]
    plan = NightlyPlan(date, serial, shas, versions, offers=offers, new=new)
    plan.nothing_new = state.last == plan.heads
    return plan


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
    path = report_dir / "report.json"
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True))
    return path
