"""builder.report.phases: where a run's time went, by named phase."""

from __future__ import annotations

import pytest

from builder.report.phases import Phases


def test_a_phase_met_twice_adds_up_and_keeps_its_first_place():
    phases = Phases()
    phases.add("resolve", 0.25)
    phases.add("container", 2.0)
    phases.add("resolve", 0.5)
    assert phases.as_dict() == {"resolve": 0.75, "container": 2.0}
    phases.merge({"container": 1.0, "publish": 0.125})
    assert list(phases.as_dict()) == ["resolve", "container", "publish"]
    assert phases.as_dict()["container"] == 3.0


def test_a_block_that_raises_is_timed_too(monkeypatch):
    clock = iter([10.0, 12.5])
    monkeypatch.setattr("builder.report.phases.time.monotonic", lambda: next(clock))
    phases = Phases()
    with pytest.raises(RuntimeError), phases.time("checkout"):
        raise RuntimeError("git failed")
    assert phases.as_dict() == {"checkout": 2.5}


def test_the_summary_ranks_the_largest_with_their_share():
    phases = Phases({"resolve": 0.2, "container": 3.0, "smoke": 1.0, "publish": 0.05})
    assert phases.summary(5.0, top=3) == "container 3.0 s (60%), smoke 1.0 s (20%), resolve 0.2 s (4%)"
    assert phases.summary(0.0, top=1) == "container 3.0 s"
