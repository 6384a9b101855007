"""How often a finding's cost recurs in the steps a script ran, and the severity that gives it.

A finding is only as good as its words: "a host read on every step" for a read every 4th
step is false, and failing a CI gate on it is wrong. So each finding is measured against
the steps the script ran:

- ``error``: the cost hits most steps (more than one step in ``PERIODIC_MIN``), or the
  run had no step at all (no barrier: the whole loop is one graph);
- ``warning``: it recurs, but every ``PERIODIC_MIN``-th step or rarer (periodic logging);
- ``info``: a one-off (a read before the first or after the last step, a single op).

Steps come from the runner's clock (builder.xla.check.RUNNER): the number of sync barriers
the script called (``torch_xla.sync()``, ``xm.mark_step()``, ``xm.optimizer_step(barrier=
True)``; not the ones MpDeviceLoader issues itself), or, when the loader drives the steps,
the batches it yielded. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (INFO, WARNING, ERROR)  # ascending
PERIODIC_MIN = 4  # a cost every 4th step or rarer is periodic; more often is "most steps"
REPEAT_MIN = 2  # the same cost twice: it recurs


@dataclass(frozen=True)
class Steps:
    count: int  # steps the script ran; 0: no step boundary seen
    clock: str  # "sync" (the script's own barriers) | "loader" (MpDeviceLoader batches) | ""

    def index(self, at: list[int]) -> int:
        """The 1-based step of an event noted at ``[syncs so far, batches so far]``
        (``steps + 1``: after the last step; 0: before the first batch)."""
        syncs, batches = int(at[0]), int(at[1])
        return syncs + 1 if self.clock == "sync" else batches


def steps_of(dump: dict[str, Any]) -> Steps:
    clock = dump.get("clock") or {}
    syncs, batches = int(clock.get("syncs", 0)), int(clock.get("yields", 0))
    if syncs and syncs >= batches:
        return Steps(syncs, "sync")
    if batches:
        return Steps(batches, "loader")
    return Steps(0, "")


@dataclass(frozen=True)
class Frequency:
    count: int  # events
    steps: int  # steps run
    hit: tuple[int, ...] = ()  # distinct steps (1..steps) with an event; () when only counted
    before: int = 0  # events before the first step
    after: int = 0  # events after the last step
    known: bool = False  # True when each event's step is known (not only the count)

    @property
    def per_step(self) -> float | None:
        return round(self.count / self.steps, 3) if self.steps else None

    @property
    def period(self) -> int | None:
        """g when the steps hit are exactly every g-th step (g >= 2), else None."""
        if len(self.hit) < 2:
            return None
        gaps = {b - a for a, b in zip(self.hit, self.hit[1:], strict=False)}
        return gaps.pop() if len(gaps) == 1 and min(gaps) >= 2 else None

    @property
    def severity(self) -> str:
        recurring = len(self.hit) if self.known else self.count
        if not self.steps:
            return ERROR if self.count >= REPEAT_MIN else INFO
        if recurring < REPEAT_MIN:
            return INFO
        return ERROR if recurring * PERIODIC_MIN > self.steps else WARNING

    def describe(self, noun: str, plural: str = "") -> str:
        """``3 host reads in 12 steps, every 4th step``: only what was measured."""
        what = f"{self.count} {noun if self.count == 1 else plural or noun + 's'}"
        if not self.steps:
            return f"{what} (the run had no step boundary)"
        where = f"{what} in {self.steps} step{'' if self.steps == 1 else 's'}"
        if not self.known:
            if self.count == self.steps:
                return f"{where}, one per step"
            return f"{where}, {self.count / self.steps:.1f} per step" if self.count > self.steps else where
        parts = []
        if self.hit:
            if len(self.hit) == self.steps:
                parts.append("on every step")
            elif self.period:
                parts.append(f"every {ordinal(self.period)} step")
            elif len(self.hit) == 1:
                parts.append(f"in step {self.hit[0]}")
            else:
                parts.append(f"on {len(self.hit)} of {self.steps} steps")
        if self.before:
            parts.append("before the first step")
        if self.after:
            parts.append("after the last step")
        return ", ".join([where, *parts])


def of_events(indices: Iterable[int], steps: Steps) -> Frequency:
    """The frequency of events noted with their step (see Steps.index)."""
    found = sorted(indices)
    n = steps.count
    if not n:
        return Frequency(len(found), 0, known=True)
    if len(found) >= REPEAT_MIN and found[0] >= 2 and found[-1] == n + 1 and steps.clock == "sync":
        # Each read comes right after a barrier (e.g. logging after torch_xla.sync()): it
        # belongs to the step that barrier closed, the last one included.
        found = [i - 1 for i in found]
    hit = tuple(sorted({i for i in found if 1 <= i <= n}))
    return Frequency(len(found), n, hit, before=sum(i < 1 for i in found), after=sum(i > n for i in found),
                     known=True)


def of_count(count: int, steps: Steps) -> Frequency:
    """The frequency of events only counted (compiles, fallbacks, copies)."""
    return Frequency(int(count), steps.count)


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def at_least(severity: str, level: str) -> bool:
    """Whether a finding of ``severity`` fails a gate set at ``level``."""
    return SEVERITIES.index(severity) >= SEVERITIES.index(level)
