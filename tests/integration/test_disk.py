"""A plan whose disk estimate is above the free space (issue #29 item 6) is refused at
planning time: one error line, exit 1, nothing written to the index. The fixture repos
run under BUILDER_BUILD_DISK_ESTIMATE_SCALE=0 (tests/conftest.py); this test raises it
so that the recipes' declared figures exceed any disk."""

from __future__ import annotations

import re

from builder.examples import write_example_repos
from tests.conftest import run_builder, write_config


def test_dry_run_refuses_a_plan_above_free_space(tmp_path):
    repos = write_example_repos(tmp_path / "repos")
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "builder.toml", data, f'[repos]\ntorch = "file://{repos["faketorch"]}"\n')
    # torch's figures (20 GiB) x 1024: 20480 GiB, above any disk this suite runs on
    done = run_builder("wheels", "--torch", "main", "--dry-run", config=cfg,
                       env={"BUILDER_BUILD_DISK_ESTIMATE_SCALE": "1024", "COLUMNS": "400"})
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert [ln for ln in lines if ln.startswith("error:")] == lines[-1:], done.stderr
    assert re.fullmatch(
        rf"error: the plan needs 20480\.0 GiB free in {re.escape(str(data))} \(torch 20480\.0 GiB; "
        r"\[build\] min_free_disk_gib 5\) but [0-9]+\.[0-9] GiB are free; free some space, point data_dir at a "
        r"larger disk, or lower \[build\] disk_estimate_scale if these builds are smaller than the recipes' figures",
        lines[-1]), lines[-1]
    assert re.search(rf"^# disk: needs 20480\.0 GiB in {re.escape(str(data))} \(torch 20480\.0; floor 5\), "
                     r"[0-9]+\.[0-9] GiB free$", done.stdout, re.M), done.stdout
    assert "FROM " not in done.stdout  # refused before the Dockerfiles of a dry run
    index = data / "index"
    assert not index.exists() or not any(index.rglob("*.whl"))
    # with the suite's scale (0) the same plan goes on, the estimate shown
    ok = run_builder("wheels", "--torch", "main", "--dry-run", config=cfg)
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"^# disk: needs 5\.0 GiB in .* \(torch 0\.0; floor 5\), ", ok.stdout, re.M), ok.stdout
