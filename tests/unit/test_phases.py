"""builder.report.phases: where a run's time went, by named phase."""

from __future__ import annotations

import subprocess
import time

import pytest

from builder.mounts import OUT_MOUNT
from builder.recipes.base import MARKS_FILE, container_phases, mark
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


def test_the_build_containers_time_is_split_by_the_scripts_marks():
    marks = "started\t100.5\nprepared\t100.75\nbuilt\t102.0\n"
    assert container_phases(marks, 100.0, 102.5) == {"container start": 0.5, "prepare": 0.25,
                                                     "build command": 1.25, "container end": 0.5}


@pytest.mark.parametrize("marks", ["", "started\t100.5\n", "started\tnot-a-time\nprepared\t1\nbuilt\t2\n",
                                   "started\t101\nprepared\t100.75\nbuilt\t102\n"])
def test_missing_or_garbled_marks_leave_one_container_phase(marks):
    assert container_phases(marks, 100.0, 102.5) == {"container": 2.5}


def test_the_script_marks_start_before_prepare_and_the_build_command_between_its_marks():
    from builder.recipes import RECIPES
    from tests.unit.test_upstream_contract import full_context

    lines = RECIPES["torch"].script(full_context()).splitlines()
    started, prepared, built = (lines.index(mark(n)) for n in ("started", "prepared", "built"))
    assert lines[0] == "set -eu" and started == 1
    assert started < prepared < built == prepared + 2
    assert lines[prepared + 1].startswith("python -m build --wheel --no-isolation")


def test_a_mark_line_run_by_sh_writes_a_line_container_phases_reads(tmp_path):
    line = mark("started").replace(f"{OUT_MOUNT}/", f"{tmp_path}/")
    before = time.time()
    subprocess.run(["sh", "-c", line + "\n" + line.replace("started", "prepared")], check=True)
    text = (tmp_path / MARKS_FILE).read_text()
    assert [row.split("\t")[0] for row in text.splitlines()] == ["started", "prepared"]
    assert before <= float(text.splitlines()[0].split("\t")[1]) <= time.time()
