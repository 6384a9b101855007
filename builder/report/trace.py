"""The Chrome trace of a run: image stages in order, the wheel steps, and each compiled
step's translation units per ninja job slot (builder.report.profile)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from builder.config import Config
from builder.files import atomic_write
from builder.report import profile


class _Stage(Protocol):
    name: str
    reused: bool
    seconds: float


class _Step(Protocol):
    project: str
    profile: Path | None
    started: float


class RunRecord(Protocol):
    """What a trace needs of a run (builder.run.pipeline.RunReport has it)."""

    stages: Sequence[_Stage]
    timeline: Sequence[tuple[str, float, float, str]]
    steps: Sequence[_Step]


def write_trace(cfg: Config, report: RunRecord, run_started: float) -> Path:
    """``<logs>/trace.json`` (and a copy per run under logs/traces/): stages in order, the
    wheel steps, and each compiled step's translation units per ninja job slot."""
    stages, offset = [], 0.0
    for stage in report.stages:
        stages.append((f"{stage.name} {'reused' if stage.reused else 'built'}", offset, stage.seconds, stage.reused))
        offset += stage.seconds
    steps = [(label, start - run_started, seconds, status) for label, start, seconds, status in report.timeline]
    profiles = {}
    for outcome in report.steps:
        if outcome.profile is not None and outcome.profile.is_file():
            profiles[outcome.project] = (outcome.started - run_started, profile.load(outcome.profile))
    text = json.dumps(profile.trace_events(stages, steps, profiles))
    runs = cfg.logs_dir / "traces"
    runs.mkdir(parents=True, exist_ok=True)
    path = runs / f"trace-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(run_started))}.json"
    atomic_write(path, text)
    atomic_write(cfg.logs_dir / "trace.json", text)
    return path
