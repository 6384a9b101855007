"""The plan's disk estimate (issue #29 item 6): the recipes' declared figures for each
package compiled, scaled by [build] disk_estimate_scale, at least [build]
min_free_disk_gib, refused before any work when above the free space."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from builder.config import Config
from builder.errors import EXIT_FAILED, NotEnoughDisk
from builder.recipes import get_recipe
from builder.resources import estimate_disk
from builder.run import pipeline

TORCH = (("source", 4.0), ("build tree", 12.0), ("ccache", 4.0))
XLA = (("source", 5.0), ("bazel", 28.0))


def test_only_packages_compiled_count():
    disk = estimate_disk([("torch", "reuse", TORCH), ("xla", "build", XLA), ("torchvision", "prebuilt", TORCH),
                          ("torch_tpu", "fetch", TORCH)], 1.0, 5.0, 100.0, "/data")
    assert disk.packages == (("xla", 33.0),)
    assert disk.total_gib == 33.0


def test_after_counts_and_scale_applies():
    disk = estimate_disk([("torch", "build", TORCH), ("xla", "after", XLA)], 0.5, 5.0, 30.0, "/data")
    assert disk.packages == (("torch", 10.0), ("xla", 16.5))
    assert (disk.total_gib, disk.enough) == (26.5, True)
    assert disk.describe() == "disk: needs 26.5 GiB in /data (torch 10.0, xla 16.5; floor 5), 30.0 GiB free"


def test_floor_when_nothing_or_little_is_compiled():
    disk = estimate_disk([("torch", "reuse", TORCH)], 1.0, 5.0, 4.0, "/data")
    assert (disk.packages, disk.total_gib, disk.enough) == ((), 5.0, False)
    zero = estimate_disk([("torch", "build", TORCH)], 0.0, 5.0, 6.0, "/data")
    assert (zero.total_gib, zero.enough) == (5.0, True)


def test_refusal_names_the_numbers_and_exits_1():
    disk = estimate_disk([("torch", "build", TORCH), ("xla", "build", XLA)], 1.0, 5.0, 40.25, "/data")
    with pytest.raises(NotEnoughDisk) as caught:
        pipeline.check_plan_disk(disk)
    assert caught.value.exit_code == EXIT_FAILED == 1
    assert str(caught.value) == (
        "the plan needs 53.0 GiB free in /data (torch 20.0 GiB, xla 33.0 GiB; [build] min_free_disk_gib 5) "
        "but 40.2 GiB are free; free some space, point data_dir at a larger disk, or lower "
        "[build] disk_estimate_scale if these builds are smaller than the recipes' figures")


def test_enough_room_passes():
    pipeline.check_plan_disk(estimate_disk([("torch", "build", TORCH)], 1.0, 5.0, 20.0, "/data"))


def test_plan_disk_reads_the_recipes_figures(monkeypatch, tmp_path):
    cfg = Config(data_dir=str(tmp_path))
    cfg = replace(cfg, build=replace(cfg.build, disk_estimate_scale=1.0, min_free_disk_gib=5.0))
    monkeypatch.setattr(pipeline, "free_disk_gib", lambda path: 7.5)
    plan = SimpleNamespace(wheels=[SimpleNamespace(name="torch", status="build"),
                                   SimpleNamespace(name="xla", status="after")])
    disk = pipeline.plan_disk(cfg, plan)
    torch_gib = sum(g for _, g in get_recipe("torch", cfg).disk_gib)
    xla_gib = sum(g for _, g in get_recipe("xla", cfg).disk_gib)
    assert (torch_gib, xla_gib) == (20.0, 33.0)  # the declared figures (README "Disk")
    assert disk.packages == (("torch", 20.0), ("xla", 33.0))
    assert (disk.free_gib, disk.where) == (7.5, str(tmp_path))


def test_scale_is_a_checked_setting():
    from builder.settings import RANGES

    assert RANGES["build.disk_estimate_scale"] == (0, 1024)


def test_run_wheels_refuses_before_any_image(monkeypatch, tmp_path):
    """The real run checks the estimate right after planning: no image, checkout or publish."""
    cfg = Config(data_dir=str(tmp_path))
    plan = SimpleNamespace(wheels=[SimpleNamespace(name="torch", status="build")])
    monkeypatch.setattr(pipeline, "resolve", lambda cfg, request: SimpleNamespace(notes=()))
    monkeypatch.setattr(pipeline, "Engine", lambda: None)
    monkeypatch.setattr(pipeline, "reap", lambda *a: None)
    monkeypatch.setattr(pipeline, "plan_wheels", lambda *a, **k: plan)
    monkeypatch.setattr(pipeline, "free_disk_gib", lambda path: 1.0)

    def no_images(*a, **k):
        raise AssertionError("images brought up despite the refusal")

    monkeypatch.setattr(pipeline, "bring_up", no_images)
    with pytest.raises(NotEnoughDisk, match=r"^the plan needs 20\.0 GiB free in .* but 1\.0 GiB are free"):
        pipeline.run_wheels(cfg, SimpleNamespace(lock_file="", jobs=0), lambda _: None)
