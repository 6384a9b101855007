"""The wheel plan without Docker: prebuilt found or to fetch, source builds waiting for
their images, and how a run's statuses are held against the plan."""

from __future__ import annotations

from builder.config import Config
from builder.index.directory import DirectoryIndex
from builder.recipes.base import PackageSource, PlanInputs
from builder.run.graph import Resolved
from builder.run.pipeline import RunReport, planned_statuses_match
from builder.run.wheelplan import AFTER, BUILD, FETCH, PREBUILT, REUSE, PlannedWheel, WheelPlan, plan_wheels
from builder.run.wheelstep import StepOutcome
from builder.source.buildreqs import BuildRequirements
from builder.source.refs import ResolvedRef
from tests.helpers_wheels import make_wheel

INPUTS = PlanInputs(specs={}, repo_url=lambda name: f"file:///{name}", mirrors=None)  # type: ignore[arg-type]


def test_plan_without_docker(tmp_path, monkeypatch):
    index = DirectoryIndex(tmp_path / "index")
    index.add(make_wheel(tmp_path, "torch", "2.13.0", tag="cp311-cp311-linux_x86_64"))
    monkeypatch.setattr("builder.run.wheelplan.source_requirements",
                        lambda cfg, recipe, source: BuildRequirements("setuptools.build_meta", ("setuptools",), ()))
    cfg = Config(data_dir=str(tmp_path))
    resolved = Resolved((PackageSource("torch", version="2.13.0"),
                         PackageSource("xla", ref=ResolvedRef("file:///xla", "main", "a" * 40))), INPUTS)
    torch, xla = plan_wheels(None, cfg, resolved, index, lambda _: None).wheels
    assert (torch.status, torch.filename) == (PREBUILT, "torch-2.13.0-cp311-cp311-linux_x86_64.whl")
    assert xla.status == BUILD and xla.key is None and xla.why == "no Docker engine"
    data = plan_wheels(None, cfg, resolved, index, lambda _: None).as_dict()["wheels"]
    assert data[1]["sha"] == "a" * 40 and data[1]["build_requirements"] == ["setuptools"]
    assert data[0]["version"] == "2.13.0" and data[0]["sha"] is None
    missing = Resolved((PackageSource("torch", version="2.9.0"),), INPUTS)
    [fetch] = plan_wheels(None, cfg, missing, index, lambda _: None).wheels
    assert fetch.status == FETCH and not fetch.filename


def outcome(name: str, status: str) -> StepOutcome:
    return StepOutcome(name, name, status, f"{name}.whl", "1", "0" * 64)


def test_the_run_is_held_against_its_plan():
    source = PackageSource("a", ref=ResolvedRef("u", "main", "a" * 40))
    plan = WheelPlan((), (PlannedWheel("a", "a", source, REUSE), PlannedWheel("b", "b", source, AFTER),
                          PlannedWheel("c", "c", source, BUILD)), Resolved((), INPUTS))
    assert planned_statuses_match(plan, RunReport(steps=[outcome("a", "reused"), outcome("b", "built"),
                                                          outcome("c", "built")])) == []
    assert planned_statuses_match(plan, RunReport(steps=[outcome("a", "built"), outcome("b", "reused"),
                                                          outcome("c", "built")])) == ["a: planned reuse, was built"]
