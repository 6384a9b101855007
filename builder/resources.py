"""How many parallel compile jobs the machine can bear: cores *and* memory.

A C++ compile of PyTorch takes 1-2 GiB per job; with too many jobs the kernel's OOM
killer ends the build after an hour. So jobs = min(usable cores, available memory /
memory per job), never below 1, overridable with --jobs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def available_memory_gib(meminfo: str | None = None) -> float:
    """MemAvailable from /proc/meminfo (what can be used without swapping), in GiB."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:  # pragma: no cover
            return 0.0
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / (1024 * 1024)
    return 0.0


def default_jobs(cores: int, memory_gib: float, memory_per_job_gib: float) -> int:
    if memory_per_job_gib <= 0 or memory_gib <= 0:
        return max(1, cores)
    return max(1, min(cores, int(memory_gib // memory_per_job_gib)))


def choose_jobs(requested: int, memory_per_job_gib: float) -> int:
    if requested > 0:
        return requested
    return default_jobs(usable_cores(), available_memory_gib(), memory_per_job_gib)


def free_disk_gib(path: Path) -> float:
    path.mkdir(parents=True, exist_ok=True)
    return shutil.disk_usage(path).free / (1024 ** 3)


# the plan statuses that compile from source ("after": decided once what it builds against
# exists, so it may compile: counted, the estimate errs on the side of room)
BUILDS = frozenset({"build", "after"})


@dataclass(frozen=True)
class DiskEstimate:
    """What a plan needs free in ``where``: per package built, scaled recipe figures."""

    packages: tuple[tuple[str, float], ...]  # (recipe name, GiB), only packages compiled
    floor_gib: float  # [build] min_free_disk_gib
    free_gib: float
    where: str

    @property
    def total_gib(self) -> float:
        return max(self.floor_gib, sum(g for _, g in self.packages))

    @property
    def enough(self) -> bool:
        return self.free_gib >= self.total_gib

    def describe(self) -> str:
        parts = ", ".join(f"{n} {g:.1f}" for n, g in self.packages) or "nothing compiled"
        return (f"disk: needs {self.total_gib:.1f} GiB in {self.where} ({parts}; floor {self.floor_gib:g}), "
                f"{self.free_gib:.1f} GiB free")


def estimate_disk(planned: Iterable[tuple[str, str, Sequence[tuple[str, float]]]], scale: float,
                  floor_gib: float, free_gib: float, where: str) -> DiskEstimate:
    """``planned``: (recipe name, plan status, the recipe's declared (part, GiB) figures)."""
    packages = tuple((name, scale * sum(g for _, g in figures))
                     for name, status, figures in planned if status in BUILDS)
    return DiskEstimate(packages, floor_gib, free_gib, where)
