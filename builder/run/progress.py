"""Progress of a run: timed lines on a non-terminal (with GitHub Actions folds), a live
bar per compile step on a terminal, fed by ninja's ``[N/M]`` status lines in the build log,
and the same for git's clones and fetches of the mirrors (objects, MB, rate: git's own
``--progress`` figures, builder.source.gitprogress)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from builder.source.gitprogress import FetchStatus

_NINJA = re.compile(r"^\[(\d+)/(\d+)\] ", re.M)
_STEP_START = re.compile(r"^(\S+): building in ")
_STEP_END = re.compile(r"^(\S+): (built|reused|prebuilt) ")

StepProgress = Callable[[str, int, int], None]  # (step label, done, total)


def ninja_status(text: str) -> tuple[int, int] | None:
    """The last ``[N/M]`` ninja printed in ``text`` (None when there is none)."""
    found = _NINJA.findall(text)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


class LogTee:
    """A log file that also reports ninja's progress as the output streams in."""

    def __init__(self, log: IO[str], label: str, progress: StepProgress) -> None:
        self.log, self.label, self.progress = log, label, progress
        self._tail = ""

    def write(self, text: str) -> int:
        written = self.log.write(text)
        lines = (self._tail + text).split("\n")
        self._tail = lines[-1]
        status = ninja_status("\n".join(lines[:-1]))
        if status is not None:
            self.progress(self.label, *status)
        return written

    def flush(self) -> None:
        self.log.flush()


class Reporter:
    """``note`` and ``step`` sinks for one run. A terminal gets untimed notes and a live bar
    per compile step; anything else one line per event with the seconds since the start,
    and ``::group::``/``::endgroup::`` around each build step when GITHUB_ACTIONS is set."""

    def __init__(self, console: Console, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.console = console
        self.live = console.is_terminal
        self.github = env.get("GITHUB_ACTIONS") == "true"
        self.started = time.monotonic()
        self._open_group = ""
        self._bar: Progress | None = None
        self._tasks: dict[str, int] = {}
        self._last_line: dict[str, int] = {}
        self._fetch_bar: Progress | None = None
        self._fetch_tasks: dict[tuple[str, str], int] = {}
        self._fetch_shown: dict[str, tuple[str, int]] = {}  # label -> (phase, tenth) last printed

    def note(self, text: str) -> None:
        end = _STEP_END.match(text)
        if self._open_group and end:
            self._print("::endgroup::", timed=False)
            self._open_group = ""
        if end and self._bar is not None and end.group(1) in self._tasks:
            self._bar.stop()
            self._bar, self._tasks = None, {}
        self._print(text)
        start = _STEP_START.match(text)
        if start and self.github and not self.live:
            self._print(f"::group::{start.group(1)} build log", timed=False)
            self._open_group = start.group(1)

    def step(self, label: str, done: int, total: int) -> None:
        if self.live:
            if self._bar is None:
                self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
                                     transient=True)
                self._bar.start()
            if label not in self._tasks:
                self._tasks[label] = self._bar.add_task(f"{label} compile", total=total)
            self._bar.update(self._tasks[label], completed=done, total=total)
            return
        # a non-terminal: a line per tenth of the build, not per compile
        tenth = done * 10 // max(1, total)
        if tenth > self._last_line.get(label, -1):
            self._last_line[label] = tenth
            self._print(f"{label}: compiled {done}/{total}")

    def fetch(self, label: str, status: FetchStatus | None) -> None:
        """One progress line of a clone or fetch (None: it ended). A terminal gets a bar per
        phase (objects, with the MB and the rate git reports); anything else a timed line
        when a phase starts and at each tenth of it."""
        if status is None:
            self._fetch_shown.pop(label, None)
            if self._fetch_bar is not None:
                self._fetch_bar.stop()
                self._fetch_bar, self._fetch_tasks = None, {}
            return
        if self.live:
            if self._fetch_bar is None:
                self._fetch_bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                           TextColumn("{task.fields[transfer]}"), TimeElapsedColumn(),
                                           console=self.console, transient=True)
                self._fetch_bar.start()
            key = (label, status.phase)
            if key not in self._fetch_tasks:
                self._fetch_tasks[key] = self._fetch_bar.add_task(f"{label}: {status.phase.lower()}",
                                                                  total=status.total or None, transfer="")
            transfer = f"{status.size} | {status.rate}" if status.rate else status.size
            self._fetch_bar.update(self._fetch_tasks[key], completed=status.done, total=status.total or None,
                                   transfer=transfer)
            return
        tenth = status.done * 10 // status.total if status.total else 0
        shown = self._fetch_shown.get(label)
        if shown is None or shown[0] != status.phase or tenth > shown[1]:
            self._fetch_shown[label] = (status.phase, tenth)
            self._print(f"{label}: {status.describe()}")

    def close(self) -> None:
        if self._fetch_bar is not None:
            self._fetch_bar.stop()
        if self._bar is not None:
            self._bar.stop()
        if self._open_group:
            self._print("::endgroup::", timed=False)

    def _print(self, text: str, timed: bool = True) -> None:
        prefix = f"[{time.monotonic() - self.started:7.1f}s] " if timed and not self.live else ""
        self.console.print(prefix + text, markup=False, highlight=False, soft_wrap=True)
