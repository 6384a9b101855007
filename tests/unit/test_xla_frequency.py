"""How often a cost recurs against the steps run, and the severity it gets (pure)."""

from __future__ import annotations

import pytest

from builder.cli.xla import strict_as_flag
from builder.xla.frequency import (
    Frequency,
    Steps,
    at_least,
    of_count,
    of_events,
    ordinal,
    steps_of,
)

SYNC12 = Steps(12, "sync")


def test_steps_come_from_the_scripts_syncs_else_the_loader():
    assert steps_of({"clock": {"syncs": 6, "yields": 6}}) == Steps(6, "sync")
    assert steps_of({"clock": {"syncs": 0, "yields": 6}}) == Steps(6, "loader")
    assert steps_of({"clock": {"syncs": 1, "yields": 6}}) == Steps(6, "loader")  # one sync before the loop
    assert steps_of({}) == Steps(0, "")


def test_step_index_of_an_event():
    # Sync clock: a read before the k-th sync is in step k; after the last sync, step n + 1.
    assert Steps(6, "sync").index([0, 1]) == 1 and Steps(6, "sync").index([6, 6]) == 7
    # Loader clock: batches yielded so far (+1 once the loader is exhausted).
    assert Steps(6, "loader").index([0, 3]) == 3 and Steps(6, "loader").index([0, 0]) == 0


@pytest.mark.parametrize("indices,severity,summary", [
    (range(1, 13), "error", "12 host reads in 12 steps, on every step"),
    ([2, 4, 6, 8, 10, 12], "error", "6 host reads in 12 steps, every 2nd step"),
    ([3, 6, 9, 12], "error", "4 host reads in 12 steps, every 3rd step"),  # more than one step in 4
    ([4, 8, 12], "warning", "3 host reads in 12 steps, every 4th step"),
    ([5, 9, 13], "warning", "3 host reads in 12 steps, every 4th step"),  # read after each 4th sync
    ([1, 2, 7], "warning", "3 host reads in 12 steps, on 3 of 12 steps"),
    ([13], "info", "1 host read in 12 steps, after the last step"),
    ([0], "info", "1 host read in 12 steps, before the first step"),
    ([5], "info", "1 host read in 12 steps, in step 5"),
    ([5, 5, 5], "info", "3 host reads in 12 steps, in step 5"),  # many reads, one step: one-off
])
def test_events_with_their_steps(indices, severity, summary):
    freq = of_events(indices, SYNC12)
    assert freq.severity == severity
    assert freq.describe("host read") == summary


def test_frequency_is_events_per_step():
    assert of_events(range(1, 13), SYNC12).per_step == 1.0
    assert of_events([4, 8, 12], SYNC12).per_step == 0.25
    assert of_events([13], SYNC12).per_step == 0.083
    assert of_events([1, 1], Steps(0, "")).per_step is None


def test_no_steps_means_no_barrier():
    assert of_events([0, 0], Steps(0, "")).severity == "error"
    assert of_events([0], Steps(0, "")).severity == "info"
    assert of_events([0, 0], Steps(0, "")).describe("host read") == "2 host reads (the run had no step boundary)"


@pytest.mark.parametrize("count,steps,severity,summary", [
    (6, 6, "error", "6 compiles in 6 steps, one per step"),
    (12, 6, "error", "12 compiles in 6 steps, 2.0 per step"),
    (3, 12, "warning", "3 compiles in 12 steps"),
    (4, 12, "error", "4 compiles in 12 steps"),
    (1, 12, "info", "1 compile in 12 steps"),
])
def test_counted_events(count, steps, severity, summary):
    freq = of_count(count, Steps(steps, "sync"))
    assert (freq.severity, freq.describe("compile")) == (severity, summary)


def test_a_read_after_each_sync_is_not_moved_when_alone():
    assert of_events([13], SYNC12).after == 1  # a lone read after the last sync stays after the loop
    assert of_events([5, 9, 13], SYNC12).hit == (4, 8, 12)
    assert of_events([5, 9, 13], Steps(12, "loader")).after == 1  # the loader clock is already exact


def test_ordinals_and_levels():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st"]
    assert at_least("error", "error") and not at_least("warning", "error") and at_least("warning", "warning")
    assert not at_least("info", "warning") and at_least("info", "info")
    assert Frequency(3, 12, (4, 8, 12), known=True).period == 4
    assert Frequency(3, 12, (4, 8, 11), known=True).period is None


def test_strict_alone_is_a_flag_before_the_script():
    assert strict_as_flag(["--strict", "train.py"]) == ["--strict=error", "train.py"]
    assert strict_as_flag(["--json", "--strict=warning", "t.py"]) == ["--json", "--strict=warning", "t.py"]
    assert strict_as_flag(["--torch", "2.9.0", "--strict", "t.py", "--strict"]) == \
        ["--torch", "2.9.0", "--strict=error", "t.py", "--strict"]  # after the script: the script's own
    assert strict_as_flag(["--xla", "--strict", "t.py"]) == ["--xla", "--strict", "t.py"]  # a value, not ours
