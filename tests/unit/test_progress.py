"""builder.run.progress: ninja's [N/M] parsed from the streamed log; timed lines and GitHub
Actions folds on a non-terminal."""

from __future__ import annotations

import io
import re

from rich.console import Console

from builder.run.progress import LogTee, Reporter, ninja_status


def test_ninja_status_is_the_last_counter():
    text = "[1/60] Building CXX object a.o\n[2/60] Building CXX object b.o\nsome other line [9/9]\n"
    assert ninja_status(text) == (2, 60)
    assert ninja_status("no counters here\n") is None


def test_tee_writes_the_log_and_reports_lines_split_across_chunks():
    seen = []
    log = io.StringIO()
    tee = LogTee(log, "torch", lambda label, done, total: seen.append((label, done, total)))
    tee.write("[1/4] Building a.o\n[2/")
    tee.write("4] Building b.o\n")
    assert log.getvalue() == "[1/4] Building a.o\n[2/4] Building b.o\n"
    assert seen == [("torch", 1, 4), ("torch", 2, 4)]


def test_non_terminal_lines_are_timed_and_folded_on_github():
    buffer = io.StringIO()
    reporter = Reporter(Console(file=buffer, force_terminal=False, width=80), {"GITHUB_ACTIONS": "true"})
    reporter.note("stage base: reused")
    reporter.note("torch: building in builder/deps:abc with 2 jobs ...")
    for done in range(1, 61):
        reporter.step("torch", done, 60)
    reporter.note("torch: built torch-2.99.0-cp311-cp311-linux_x86_64.whl")
    reporter.close()
    lines = buffer.getvalue().splitlines()
    assert re.fullmatch(r"\[\s*[0-9.]+s\] stage base: reused", lines[0])
    assert lines[2] == "::group::torch build log"
    assert lines[-2] == "::endgroup::" and lines[-1].endswith("torch: built torch-2.99.0-cp311-cp311-linux_x86_64.whl")
    progress = [line for line in lines if "compiled" in line]
    assert 5 <= len(progress) <= 11 and progress[-1].endswith("torch: compiled 60/60")  # a tenth at a time


def test_no_folds_off_github():
    buffer = io.StringIO()
    reporter = Reporter(Console(file=buffer, force_terminal=False, width=80), {})
    reporter.note("torch: building in x ...")
    reporter.note("torch: built t.whl")
    reporter.close()
    assert "::group::" not in buffer.getvalue()
