"""git's network commands (clone, fetch, submodule update) under a stall timeout, their
``--progress`` output parsed for the run's display.

One wall-clock timeout cannot fit both a small fixture and a pytorch clone on an
ordinary link (several GB): a timeout long enough for the second lets a dead connection
hang for as long. A stall is what is wrong: no output for ``stall_timeout`` seconds.
git prints a progress line about once a second while bytes arrive (progress.c's
one-second timer), so silence means nothing moves; then the whole process group
(git and its remote helper, index-pack, a local upload-pack) is ended.

How long the stall may last and where the progress goes are set once per command
(``set_fetch_options``: the CLI, from ``[git] stall_timeout``, and the run's display);
they travel in a context variable so the many callers of ``update_mirror`` (planning,
checkouts, recipes) need not pass them along.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import select
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from builder.errors import FetchStalled, RefError
from builder.source.refs import git_env

DEFAULT_STALL_TIMEOUT = 600.0  # seconds without any output from git: [git] stall_timeout

# "Receiving objects:  45% (1234/2742), 12.34 MiB | 3.21 MiB/s", "remote: Counting objects: 100% (10/10), done.",
# "remote: Enumerating objects: 278957, done."
_LINE = re.compile(
    r"^(?:remote: )?(?P<phase>[A-Z][a-z]+(?: [a-z]+)*):\s+"
    r"(?:(?P<pct>\d+)% \((?P<done>\d+)/(?P<total>\d+)\)|(?P<count>\d+))"
    r"(?:, (?P<size>[\d.]+ (?:bytes|[KMGT]iB))(?: \| (?P<rate>[\d.]+ (?:bytes|[KMGT]iB)/s))?)?")


@dataclass(frozen=True)
class FetchStatus:
    """One progress line of git: the phase, how far (``total`` 0: a count without an end),
    and for the transfer the bytes received so far and the rate, as git prints them."""

    phase: str  # "Receiving objects", "Resolving deltas", "Counting objects", ...
    done: int
    total: int = 0
    size: str = ""  # "12.34 MiB"
    rate: str = ""  # "3.21 MiB/s"

    def describe(self) -> str:
        amount = f"{self.done * 100 // self.total}% ({self.done}/{self.total})" if self.total else str(self.done)
        transfer = f", {self.size}" + (f" | {self.rate}" if self.rate else "") if self.size else ""
        return f"{self.phase} {amount}{transfer}"


# (label, status); status None: that fetch is over (a live display closes its bar)
FetchProgress = Callable[[str, "FetchStatus | None"], None]


@dataclass(frozen=True)
class FetchOptions:
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    progress: FetchProgress | None = None


_OPTIONS: ContextVar[FetchOptions] = ContextVar("builder_fetch_options", default=FetchOptions())  # noqa: B039 (frozen)


def fetch_options_now() -> FetchOptions:
    return _OPTIONS.get()


def set_fetch_options(**changes: object) -> None:
    """For the rest of this command (the CLI calls it once the config is loaded)."""
    _OPTIONS.set(dataclasses.replace(_OPTIONS.get(), **changes))  # type: ignore[arg-type]


@contextlib.contextmanager
def fetch_options(**changes: object) -> Iterator[FetchOptions]:
    """Within the block only (a run's display, a test's short timeout)."""
    token = _OPTIONS.set(dataclasses.replace(_OPTIONS.get(), **changes))  # type: ignore[arg-type]
    try:
        yield _OPTIONS.get()
    finally:
        _OPTIONS.reset(token)


def parse_progress(segment: str) -> FetchStatus | None:
    """One ``\\r``- or ``\\n``-separated piece of git's stderr as a status (pure: unit tested)."""
    match = _LINE.match(segment.strip())
    if match is None:
        return None
    if match.group("count") is not None:
        return FetchStatus(match.group("phase"), int(match.group("count")))
    return FetchStatus(match.group("phase"), int(match.group("done")), int(match.group("total")),
                       match.group("size") or "", match.group("rate") or "")


def _end(proc: subprocess.Popen) -> None:
    """End git and everything it started (its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def run_network_git(args: list[str], cwd: Path | None, what: str, label: str) -> str:
    """Run ``git ARGS`` (a command that talks to a remote), ended when it prints nothing for
    the stall timeout; each progress line goes to the run's display. Returns its output."""
    options = _OPTIONS.get()
    proc = subprocess.Popen(["git", *args], cwd=cwd, env=git_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    assert proc.stdout is not None
    lines: deque[str] = deque(maxlen=200)
    pending = b""
    last = time.monotonic()
    try:
        fd = proc.stdout.fileno()
        while True:
            ready, _, _ = select.select([fd], [], [], min(1.0, options.stall_timeout))
            if not ready:
                if time.monotonic() - last >= options.stall_timeout:
                    _end(proc)
                    raise FetchStalled(f"{what} stalled: git printed nothing for {options.stall_timeout:g} s",
                                       "check the network and the repository URL, or raise [git] stall_timeout "
                                       "(BUILDER_GIT_STALL_TIMEOUT) for a slow link")
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            last = time.monotonic()
            pieces = re.split(rb"[\r\n]", pending + chunk)
            pending = pieces.pop()
            for piece in pieces:
                text = piece.decode("utf-8", errors="replace")
                if not text.strip():
                    continue
                status = parse_progress(text)
                if status is None:
                    lines.append(text)
                elif options.progress is not None:
                    options.progress(label, status)
        if pending.strip():
            lines.append(pending.decode("utf-8", errors="replace"))
        code = proc.wait()
    except BaseException:
        _end(proc)  # interrupted (SIGINT, SIGTERM) or stalled: nothing keeps running
        raise
    finally:
        proc.stdout.close()
        if options.progress is not None:
            options.progress(label, None)
    if code != 0:
        reason = next((ln for ln in reversed(lines) if ln.startswith(("fatal:", "error:"))),
                      lines[-1] if lines else f"exit {code}")
        raise RefError(f"{what} failed: {reason.removeprefix('fatal: ')}")
    return "\n".join(lines)
