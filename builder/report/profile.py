"""Where a wheel step's compile time went, and why its cache missed.

Every CMake build in a wheel step runs ninja, which writes ``.ninja_log`` in the build
directory (one line per output: start and end in ms since the build began, the output
path and a hash of its full command line); ccache writes one record per compilation to
its ``stats_log`` (``# SOURCE`` then the counters it bumped: ``direct_cache_hit``,
``preprocessed_cache_hit``, ``cache_miss``, ``remote_storage_hit``...). Joined per
translation unit they give the profile stored for each built wheel: wall time, cache
result, the command hash, and totals (critical path, CPU time, jobs).

A miss is explained against the previous profile of the same package: the command hash
changed (flags, defines, compiler or its path), or it did not (an input changed: the
source or a header it includes), or the unit is new (cold cache, new file). Pure logic;
builder.run.wheelstep collects the files and builder.cli.profile shows them.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builder.files import atomic_write

RESULTS = ("remote hit", "direct hit", "preprocessed hit", "miss", "uncached")
PROFILE_VERSION = 1


@dataclass
class Unit:
    output: str  # ninja's output path (relative to the build dir)
    source: str  # the source ccache compiled, relative to the source root (empty: ccache did not see it)
    start_ms: int
    end_ms: int
    cmdhash: str
    result: str  # one of RESULTS
    why: str = ""  # for a miss: what changed (see explain)
    slot: int = 0  # the ninja job slot it ran in (for the trace)

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000


@dataclass
class Profile:
    package: str
    wheel: str
    jobs: int
    units: list[Unit] = field(default_factory=list)
    version: int = PROFILE_VERSION
    peak_memory_bytes: int = 0  # the build container's peak (cgroup), 0: unknown
    dist: dict[str, Any] = field(default_factory=dict)  # sccache-dist counts when compiles were distributed

    def totals(self) -> dict[str, Any]:
        counts = {r: sum(1 for u in self.units if u.result == r) for r in RESULTS}
        wall = max((u.end_ms for u in self.units), default=0) - min((u.start_ms for u in self.units), default=0)
        return {"units": len(self.units), **{k.replace(" ", "_"): v for k, v in counts.items()},
                "wall_seconds": wall / 1000, "cpu_seconds": sum(u.seconds for u in self.units),
                "longest_unit_seconds": max((u.seconds for u in self.units), default=0.0),
                "slots": len({u.slot for u in self.units})}

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "package": self.package, "wheel": self.wheel, "jobs": self.jobs,
                "peak_memory_bytes": self.peak_memory_bytes, "dist": self.dist, "totals": self.totals(),
                "units": [asdict(u) for u in self.units]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        return cls(data["package"], data["wheel"], data["jobs"], [Unit(**u) for u in data["units"]],
                   data.get("version", PROFILE_VERSION), data.get("peak_memory_bytes", 0), data.get("dist", {}))

    @property
    def memory_per_job_gib(self) -> float:
        """Observed peak memory per job (0.0 when unknown)."""
        return self.peak_memory_bytes / max(1, self.jobs) / 1024 ** 3


def parse_ninja_log(text: str) -> list[tuple[int, int, str, str]]:
    """(start ms, end ms, output, command hash) per output, the last record of each
    (ninja appends; a restarted build repeats outputs). Formats v5 and v6."""
    last: dict[str, tuple[int, int, str, str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 5 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        last[parts[3]] = (int(parts[0]), int(parts[1]), parts[3], parts[4])
    return sorted(last.values())


def parse_stats_log(text: str) -> dict[str, str]:
    """Source path -> cache result from ccache's stats_log (the last compilation of each)."""
    out: dict[str, str] = {}
    source, counters = "", set()

    def flush() -> None:
        if source:
            out[source] = classify(counters)

    for line in text.splitlines():
        if line.startswith("# "):
            flush()
            source, counters = line[2:].strip(), set()
        elif line.strip():
            counters.add(line.strip())
    flush()
    return out


def classify(counters: set[str]) -> str:
    if "remote_storage_hit" in counters and "local_storage_hit" not in counters:
        return "remote hit"
    if "direct_cache_hit" in counters:
        return "direct hit"
    if "preprocessed_cache_hit" in counters:
        return "preprocessed hit"
    if "cache_miss" in counters:
        return "miss"
    return "uncached"  # ccache ran but could not cache it (e.g. a link, unsupported flags)


_OBJ = re.compile(r"^(?:.*/)?CMakeFiles/[^/]+\.dir/(?P<rel>.+)\.o$")


def source_of(output: str) -> str | None:
    """``CMakeFiles/torch_cpu.dir/csrc/ops.cpp.o`` -> ``csrc/ops.cpp`` (CMake's object naming)."""
    match = _OBJ.match(output)
    return match.group("rel") if match else None


def source_key(source: str) -> str:
    """ccache's source path relative to the source root: builder mounts sources at
    /src/<name> and ccache's base_dir makes paths relative to the build dir (``../x.cpp``)."""
    source = re.sub(r"^/src/[^/]+/", "", source)
    while source.startswith("../"):
        source = source[3:]
    return source


def assign_slots(units: list[Unit]) -> None:
    """Greedy interval colouring in start order: each unit gets the lowest free slot, so
    no two units of one slot overlap (what a job-slot track in the trace needs)."""
    ends: list[int] = []
    for unit in sorted(units, key=lambda u: (u.start_ms, u.end_ms)):
        for slot, end in enumerate(ends):
            if end <= unit.start_ms:
                ends[slot] = unit.end_ms
                unit.slot = slot
                break
        else:
            unit.slot = len(ends)
            ends.append(unit.end_ms)


def make_profile(package: str, wheel: str, jobs: int, ninja_log: str, stats_log: str,
                 previous: Profile | None = None) -> Profile:
    """Join ninja's and ccache's records; only compile outputs (objects) are units."""
    results = {source_key(source): result for source, result in parse_stats_log(stats_log).items()}
    units = []
    for start, end, output, cmdhash in parse_ninja_log(ninja_log):
        rel = source_of(output)
        if rel is None:
            continue
        result = results.get(rel)
        units.append(Unit(output, rel if result else "", start, end, cmdhash, result or "uncached"))
    assign_slots(units)
    profile = Profile(package, wheel, jobs, units)
    explain(profile, previous)
    return profile


def explain(profile: Profile, previous: Profile | None) -> None:
    """Say why each miss missed, from what the previous build of the package recorded."""
    before = {u.output: u for u in previous.units} if previous else {}
    for unit in profile.units:
        if unit.result == "miss":
            unit.why = explain_one(unit, before.get(unit.output))


def explain_one(unit: Unit, old: Unit | None) -> str:
    if old is None:
        return "new unit (no earlier build of it in the profiles: a cold cache or a new file)"
    if old.cmdhash != unit.cmdhash:
        return "its compile command changed (flags, defines, compiler or environment the build passes)"
    return "an input changed (the same command: the source or a header it includes)"


def diff(new: Profile, old: Profile, threshold: float = 0.25) -> dict[str, list[dict[str, Any]]]:
    """Against ``old``: every miss of ``new`` with why (explained against ``old``), those
    that hit in ``old`` (newly missed), and what got slower (by ``threshold``, >= 0.1 s)."""
    before = {u.output: u for u in old.units}
    missed, newly_missed, slower = [], [], []
    for unit in new.units:
        prev = before.get(unit.output)
        if unit.result == "miss":
            why = explain_one(unit, prev)
            missed.append({"output": unit.output, "source": unit.source, "why": why})
            if prev is None or prev.result != "miss":
                newly_missed.append({"output": unit.output, "why": why})
        if prev is not None and unit.seconds - prev.seconds >= max(0.1, threshold * prev.seconds):
            slower.append({"output": unit.output, "seconds": unit.seconds, "before": prev.seconds})
    added = [u.output for u in new.units if u.output not in before]
    return {"missed": missed, "newly_missed": newly_missed, "slower": sorted(slower, key=lambda d: -d["seconds"]),
            "added": added}


# ------------------------------------------------------------------ storage
def profiles_dir(data_dir: str | Path) -> Path:
    return Path(data_dir) / "profiles"


def save(data_dir: str | Path, profile: Profile) -> Path:
    """``<data_dir>/profiles/<wheel>.json``, and the package's latest pointer."""
    root = profiles_dir(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{profile.wheel}.json"
    atomic_write(path, json.dumps(profile.as_dict(), indent=1) + "\n")
    atomic_write(root / f"latest-{profile.package}.json", json.dumps({"wheel": profile.wheel}) + "\n")
    return path


def load(path: Path) -> Profile:
    return Profile.from_dict(json.loads(path.read_text()))


def latest(data_dir: str | Path, package: str) -> Profile | None:
    pointer = profiles_dir(data_dir) / f"latest-{package}.json"
    try:
        wheel = json.loads(pointer.read_text())["wheel"]
        return load(profiles_dir(data_dir) / f"{wheel}.json")
    except (OSError, ValueError, KeyError):
        return None


# ------------------------------------------------------------------ trace
def trace_events(stages: list[tuple[str, float, float, bool]], steps: list[tuple[str, float, float, str]],
                 profiles: dict[str, tuple[float, Profile]]) -> dict[str, Any]:
    """Chrome trace event JSON (opens in Perfetto and chrome://tracing): pid 1 holds the
    run (a track of stages, a track of wheel steps); each profiled step is a process with
    one track per ninja job slot. Times are microseconds from the run's start.
    ``stages``: (name, start s, seconds, reused); ``steps``: (label, start s, seconds, status);
    ``profiles``: label -> (step start s, profile)."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "builder run"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "stages"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "wheel steps"}},
    ]
    for name, start, seconds, reused in stages:
        events.append({"ph": "X", "pid": 1, "tid": 1, "name": f"stage {name}", "cat": "stage",
                       "ts": int(start * 1e6), "dur": max(1, int(seconds * 1e6)),
                       "args": {"reused": reused}})
    for label, start, seconds, status in steps:
        events.append({"ph": "X", "pid": 1, "tid": 2, "name": label, "cat": "step", "ts": int(start * 1e6),
                       "dur": max(1, int(seconds * 1e6)), "args": {"status": status}})
    for pid, (label, (start, profile)) in enumerate(sorted(profiles.items()), start=2):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"{label} compile"}})
        for slot in sorted({u.slot for u in profile.units}):
            events.append({"ph": "M", "pid": pid, "tid": slot + 1, "name": "thread_name",
                           "args": {"name": f"job slot {slot}"}})
        for unit in profile.units:
            events.append({"ph": "X", "pid": pid, "tid": unit.slot + 1, "name": unit.source or unit.output,
                           "cat": unit.result.replace(" ", "_"), "ts": int(start * 1e6) + unit.start_ms * 1000,
                           "dur": max(1, (unit.end_ms - unit.start_ms) * 1000),
                           "args": {"result": unit.result, **({"why": unit.why} if unit.why else {})}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def memory_aware_jobs(choose, requested: int, configured_gib: float, previous: Profile | None
                      ) -> tuple[int, str]:
    """Jobs for a build: ``requested`` when set; else ``choose(0, GiB per job)`` with the
    larger of the configured GiB per job and what the package's last build used per job
    (so a build that nearly ran out of memory does not run as wide again). Returns
    (jobs, why) with ``why`` empty when the configured figure decided."""
    if requested > 0:
        return requested, ""
    observed = previous.memory_per_job_gib if previous else 0.0
    if observed <= configured_gib:
        return choose(0, configured_gib), ""
    jobs = choose(0, observed)
    return jobs, (f"{jobs} jobs: its last build peaked at {previous.peak_memory_bytes / 1024 ** 3:.1f} GiB with "
                  f"{previous.jobs} jobs ({observed:.2f} GiB per job > [build] memory_per_job_gib {configured_gib:g})")
