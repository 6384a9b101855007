"""Where a run's wall time went, by phase (resolve, images, deps layer, container, ...).

A warm rebuild whose compiles all hit the cache still costs seconds that are not
compiling: resolving refs, asking Docker about images, checking out, starting the build
container, normalising and publishing the wheel, the smoke. ``builder wheels --json``
reports them under ``"phases"`` (bench/pipeline.py and bench/real.py print them), so the
fixed cost of a rebuild is a list of named parts, not one number.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Phases:
    seconds: dict[str, float] = field(default_factory=dict)  # by name, in the order first timed

    @contextlib.contextmanager
    def time(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to ``name`` (a phase met twice, e.g. once per
        package, adds up), whether the block returns or raises."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def merge(self, other: dict[str, float]) -> None:
        for name, seconds in other.items():
            self.add(name, seconds)

    def as_dict(self) -> dict[str, float]:
        return {name: round(seconds, 3) for name, seconds in self.seconds.items()}

    def summary(self, total: float, top: int = 6) -> str:
        """The largest phases with their share of ``total``: "container 2.1 s (61 %), ..."."""
        ranked = sorted(self.seconds.items(), key=lambda item: -item[1])[:top]
        return ", ".join(f"{name} {s:.1f} s ({s / total:.0%})" if total > 0 else f"{name} {s:.1f} s"
                         for name, s in ranked)
