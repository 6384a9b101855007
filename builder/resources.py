"""How many parallel compile jobs the machine can bear: cores *and* memory.

A C++ compile of PyTorch takes 1-2 GiB per job; with too many jobs the kernel's OOM
killer ends the build after an hour. So jobs = min(usable cores, available memory /
memory per job), never below 1, overridable with --jobs.
"""

from __future__ import annotations

import os
import shutil
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
