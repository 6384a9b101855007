"""Parsing real torch_xla 2.9.0 output into findings and smoke figures (no Docker).

The logs in tests/data/xla_check/ were captured from `builder xla-check` runs (the
container's merged output: the scripts' own lines, PT_XLA_DEBUG_LEVEL=2 analysis blocks
and the runner's metrics marker), with the scripts mounted at /xla-check/src.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from builder.index.download import cache_record_valid
from builder.index.resolve import Sources, parse_report, resolve_command, sources_for
from builder.recipes.xla_smoke import SmokeFigures, parse_figures, result_key, verdict
from builder.xla.check import (
    CONTAINER_ROOT,
    Block,
    Frame,
    analyse,
    check_output,
    host_site,
    is_noise,
    parse_blocks,
    parse_dump,
    user_frame,
)
from builder.xla.runtime import LiveOutput

DATA = Path(__file__).resolve().parent.parent / "data"
CAPTURED = DATA / "xla_check"
HOST = "/home/me/project"


def captured(name: str) -> str:
    return (CAPTURED / f"{name}.log").read_text()


def findings(name: str) -> list[tuple[str, str, int, str]]:
    report = check_output(captured(name), HOST)
    return [(f.kind, f.location, f.count, f.detail) for f in report.findings]


def measured(name: str) -> list[tuple[str, int, float | None, str]]:
    """(kind, steps, frequency, severity) of each finding."""
    return [(f.kind, f.steps, f.frequency, f.severity) for f in check_output(captured(name), HOST).findings]


# ------------------------------------------------------------------- analysis blocks
def test_parse_blocks_of_a_clean_loop():
    blocks = parse_blocks(captured("clean"))
    assert [b.kind for b in blocks] == ["compilation"] + ["execution"] * 6
    first = blocks[0]
    assert first.cause == "user torch_xla.sync"
    assert first.graph_hash == "b58676167258febf14f2014651803e51"
    assert (first.inputs, first.outputs) == (5, 7)
    assert first.frames[0].function == "sync" and first.frames[0].file.endswith("torch_xla/torch_xla.py")
    assert user_frame(first.frames) == Frame("<module>", f"{CONTAINER_ROOT}/clean.py", 19)
    assert {b.graph_hash for b in blocks} == {first.graph_hash}


def test_parse_blocks_cause_of_a_host_read():
    blocks = parse_blocks(captured("item_in_loop"))
    reads = [b for b in blocks if "access tensor value" in b.cause]
    assert len(reads) == 6 + 1  # 6 executions and the one compilation of the read's graph
    assert reads[0].cause == "most likely user code trying to access tensor value before torch_xla.sync"
    assert {user_frame(b.frames).line for b in reads} == {20}


def test_parse_blocks_ignores_other_lines_and_unfinished_blocks():
    text = ("hello\nExecution Analysis: Execution Cause\nExecution Analysis:   user mark_step\n"
            "Execution Analysis: Python Frame Triggered Execution: \n"
            "Execution Analysis:   <module> (/xla-check/src/a.py:3)\nComputation hash: 00\n")
    (block,) = parse_blocks(text)
    assert block.cause == "user mark_step" and block.frames == [Frame("<module>", "/xla-check/src/a.py", 3)]


def test_parse_dump_reads_the_marker_line():
    dump = parse_dump(captured("clean"))
    assert dump["metrics"]["CompileTime"]["samples"] == 1
    assert dump["metrics"]["ExecuteTime"]["samples"] == 6
    assert dump["counters"]["UncachedCompile"] == 1 and dump["counters"]["CachedCompile"] == 5
    assert parse_dump("no marker here") is None


# ------------------------------------------------------------------------- findings
def test_clean_loop_has_no_finding():
    report = check_output(captured("clean"), HOST)
    assert report.findings == []
    assert report.figures["compiles"] == 1 and report.figures["executions"] == 6
    assert report.figures["transfers_from_device"] == 0 and report.figures["aten_counters"] == {}


def test_item_in_the_loop_is_a_host_sync_at_its_line():
    assert findings("item_in_loop") == [("host-sync", f"{HOST}/item_in_loop.py:20", 6,
                                         "TransferFromDeviceTime 6 samples")]
    (finding,) = check_output(captured("item_in_loop"), HOST).findings
    assert (finding.steps, finding.frequency, finding.severity) == (6, 1.0, "error")
    assert finding.summary == "6 host reads in 6 steps, on every step"
    assert ".item()" in finding.hint and "xm.add_step_closure" in finding.hint


def test_read_every_4th_step_is_a_periodic_warning_and_says_so():
    report = check_output(captured("read_every_4th"), HOST)
    (finding,) = report.findings
    assert (finding.kind, finding.location, finding.count) == ("host-sync", f"{HOST}/read_every_4th.py:21", 3)
    assert (finding.steps, finding.frequency, finding.severity) == (12, 0.25, "warning")
    assert finding.summary == "3 host reads in 12 steps, every 4th step"
    assert "every step" not in finding.summary + finding.hint
    assert "consider xm.add_step_closure" in finding.hint and "every N steps" not in finding.hint
    assert report.failing("error") == [] and report.failing("warning") == [finding]


def test_read_once_after_the_loop_is_info():
    report = check_output(captured("read_after_loop"), HOST)
    (finding,) = report.findings
    assert (finding.kind, finding.location, finding.count) == ("host-sync", f"{HOST}/read_after_loop.py:20", 1)
    assert (finding.steps, finding.severity) == (6, "info")
    assert finding.summary == "1 host read in 6 steps, after the last step"
    assert report.failing("error") == report.failing("warning") == []
    assert report.failing("info") == [finding]
    assert report.figures["steps"] == 6 and report.figures["step_clock"] == "sync"


def test_changing_batch_shapes_is_recompilation():
    assert findings("changing_shapes") == [("recompilation", f"{HOST}/changing_shapes.py:19", 6, "")]
    assert measured("changing_shapes") == [("recompilation", 6, 1.0, "error")]


def test_op_without_lowering_is_a_named_cpu_fallback():
    found = findings("no_lowering")
    assert ("cpu-fallback", f"{HOST}/no_lowering.py:18", 6, "aten::linalg_eig") in found
    assert {f[0] for f in found} == {"cpu-fallback"}  # its forced reads are not reported twice
    assert all(f[1].endswith("no_lowering.py:18") for f in found)
    assert {m[1:] for m in measured("no_lowering")} == {(6, 1.0, "error")}


def test_loop_without_sync_and_without_loader():
    found = findings("no_sync")
    assert [f[0] for f in found] == ["host-sync", "no-sync", "no-mpdeviceloader"]
    assert found[0][:3] == ("host-sync", f"{HOST}/no_sync.py:17", 1)  # the final read, after the loop
    assert found[1][1] == f"{HOST}/no_sync.py:12" and found[1][3] == f"graph executed at {HOST}/no_sync.py:17"
    assert found[2] == ("no-mpdeviceloader", f"{HOST}/no_sync.py:12", 12, "")
    # No barrier at all: no steps to measure against, and an error whatever the count.
    assert measured("no_sync") == [("host-sync", 0, None, "info"), ("no-sync", 0, None, "error"),
                                   ("no-mpdeviceloader", 0, None, "warning")]


def test_batches_moved_by_hand_with_a_sync_is_only_the_loader_finding():
    assert findings("no_loader") == [("no-mpdeviceloader", f"{HOST}/no_loader.py:12", 12, "")]
    (finding,) = check_output(captured("no_loader"), HOST).findings
    assert (finding.steps, finding.frequency, finding.severity) == (6, 2.0, "warning")  # a copy cost, no stall
    assert finding.summary == "12 host-to-device copies in 6 steps, 2.0 per step"


def test_printing_a_tensor_is_a_host_sync():
    (finding,) = check_output(captured("print_tensor"), HOST).findings
    assert (finding.kind, finding.location, finding.count) == ("host-sync", f"{HOST}/print_tensor.py:7", 4)
    assert "printing a tensor" in finding.hint
    assert (finding.steps, finding.frequency, finding.severity) == (4, 1.0, "error")


def test_thresholds_once_is_not_a_loop():
    one_read = {"metrics": {"ExecuteTime": {"samples": 1}}, "counters": {"MarkStep": 1},
                "reads": {f"{CONTAINER_ROOT}/a.py:9": {"kinds": {".item()": 1}, "at": [[1, 0]]}},
                "transfers": {}, "clock": {"syncs": 1, "yields": 0}}
    (finding,) = analyse(one_read, [])
    assert (finding.severity, finding.summary) == ("info", "1 host read in 1 step, after the last step")
    old_dump = {**one_read, "reads": {f"{CONTAINER_ROOT}/a.py:9": {".item()": 1}}}  # counts only
    assert [f.severity for f in analyse(old_dump, [])] == ["info"]
    frame = Frame("<module>", f"{CONTAINER_ROOT}/a.py", 5)
    two_graphs = [Block("compilation", "user torch_xla.sync", h, frames=[frame]) for h in ("a", "b")]
    assert analyse({"metrics": {}, "counters": {}}, two_graphs) == []  # warm-up: a second graph is common


def test_metrics_only_fallbacks_when_debug_output_is_missing():
    dump = {"metrics": {"ExecuteTime": {"samples": 6}}, "counters": {"MarkStep": 6, "UncachedCompile": 5,
                                                                    "aten::_local_scalar_dense": 6}}
    kinds = [(f.kind, f.location, f.count, f.severity) for f in analyse(dump, [])]
    assert kinds == [("recompilation", "", 5, "error"), ("host-sync", "", 6, "error")]  # no steps counted


def test_sites_map_back_to_the_users_dir():
    assert host_site(f"{CONTAINER_ROOT}/sub/train.py:4", "/w") == "/w/sub/train.py:4"
    assert host_site("/opt/venv/x.py:1", "/w") == "/opt/venv/x.py:1"


def test_live_output_hides_the_analysis_wall_but_logs_everything():
    log, shown = io.StringIO(), []
    sink = LiveOutput(log, shown.append)
    text = captured("item_in_loop")
    for start in range(0, len(text), 97):  # docker delivers arbitrary chunks
        sink.write(text[start:start + 97])
    assert log.getvalue() == text
    assert shown == ["# /work/wt/i21/tests/data/xla_scripts/item_in_loop.py  in builder/smoke:eba8d640d57199c0597e2b36",
                     "mean loss 0.9117128203312556"]
    assert is_noise("Execution Analysis: x") and is_noise("Computation hash: 1") and not is_noise("loss 1.0")


# ----------------------------------------------------------------------- smoke figures
def test_smoke_figures_from_the_real_run_pass():
    figures = parse_figures(captured("smoke"))
    assert figures is not None
    assert (figures.compiles, figures.executions, figures.transfers_from_device) == (1, 6, 0)
    assert (figures.uncached_compiles, figures.cached_compiles, figures.fallbacks) == (1, 5, {})
    assert figures.torch == "2.9.0+cu128" and figures.torch_xla == "2.9.0"
    assert verdict(figures) == []


@pytest.mark.parametrize("change,expected", [
    ({"compiles": 6, "uncached_compiles": 6, "cached_compiles": 0}, "compiled 6 times"),
    ({"executions": 12}, "12 graph executions"),
    ({"transfers_from_device": 6}, "6 device->host transfer"),
    ({"fallbacks": {"aten::linalg_eig": 6}}, "aten::linalg_eig x6"),
    ({"steps": 5}, "ran 5 steps"),
])
def test_smoke_verdict_names_what_is_wrong(change, expected):
    good = dict(steps=6, compiles=1, executions=6, uncached_compiles=1, cached_compiles=5)
    problems = verdict(SmokeFigures(**{**good, **change}))
    assert any(expected in p for p in problems), problems


def test_smoke_result_key_changes_with_the_program_steps():
    assert result_key("builder/smoke:x") == result_key("builder/smoke:x", steps=6)
    assert result_key("builder/smoke:y") != result_key("builder/smoke:x")
    assert result_key("builder/smoke:x") != result_key("builder/smoke:x", steps=7)


# ------------------------------------------------------------------------------- fetch
def test_parse_pip_report_keeps_the_upstream_hashes():
    pins = parse_report(json.loads((DATA / "fetch" / "pip-report.json").read_text()))
    by_name = {p.name: p for p in pins}
    torch = by_name["torch"]
    assert torch.filename == "torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert torch.sha256 == "51de31219c97c51cf4bf2be94d622e3deb5dcc526c6dc00e97c17eaec0fc1d67"
    assert torch.requested and not by_name["sympy"].requested
    assert by_name["torch-xla"].url.startswith("https://files.pythonhosted.org/")


def test_resolve_command_targets_the_python_stage_and_only_named_sources():
    command = resolve_command(["torch==2.9.0"], "3.11", Sources("https://pypi.org/simple", ("/w",)), False,
                              Path("/r.json"))
    assert command[command.index("--python-version") + 1] == "3.11"
    assert "cp311" in command and "--dry-run" in command and "--no-deps" in command
    assert command[command.index("--index-url") + 1] == "https://pypi.org/simple"
    assert command[-2:] == ["--", "torch==2.9.0"]
    offline = resolve_command(["x==1"], "3.11", Sources(None, ("/w",)), True, Path("/r.json"))
    assert "--no-index" in offline and "--no-deps" not in offline


def test_sources_for_from(tmp_path):
    assert sources_for(None, "https://pypi.org/simple", []) == Sources("https://pypi.org/simple", ())
    assert sources_for("https://example.org/simple", "https://pypi.org/simple", []).index_url == \
        "https://example.org/simple"
    assert sources_for(str(tmp_path), "https://pypi.org/simple", []) == Sources(None, (str(tmp_path),))
    (tmp_path / "index.html").write_text("<html></html>")
    assert sources_for(tmp_path.as_uri(), "x", []).index_url == tmp_path.as_uri() + "/"


def test_cache_record_valid_tracks_size_and_mtime(tmp_path):
    path = tmp_path / "a.whl"
    path.write_bytes(b"abc")
    stat = path.stat()
    assert cache_record_valid(path, {"size": 3, "mtime_ns": stat.st_mtime_ns})
    assert not cache_record_valid(path, {"size": 4, "mtime_ns": stat.st_mtime_ns})
    assert not cache_record_valid(tmp_path / "missing.whl", {"size": 3, "mtime_ns": 0})


# ------------------------------------------------------------- smoke of other wheels
def test_wheel_smoke_of_an_extension_built_by_the_xla_recipe(tmp_path):
    from builder.config import Config
    from builder.index.directory import DirectoryIndex
    from builder.recipes.xla_smoke import is_real_torch_xla, real_xla_wheels
    from builder.run.smoke import top_level_packages, wheel_smoke
    from builder.run.wheelstep import StepOutcome
    from tests.helpers_wheels import make_wheel

    index = DirectoryIndex(tmp_path / "index")
    ext = make_wheel(tmp_path, "torch_xla_real_ext", "2.99.0+git1cb1889", tag="cp311-cp311-linux_x86_64")
    fake = make_wheel(tmp_path, "torch_xla", "2.99.0", tag="cp311-cp311-linux_x86_64")
    index.add(ext)
    index.add(fake)
    assert top_level_packages(ext) == ["torch_xla_real_ext"]
    built = StepOutcome("xla", "torch_xla", "built", ext.name, "2.99.0+git1cb1889", "0" * 64)
    requirement, code = wheel_smoke(Config(), index, built)
    assert requirement == "torch_xla_real_ext==2.99.0+git1cb1889"
    assert code.startswith("import torch\n")  # what the xla recipe builds against, first
    assert "import torch_xla_real_ext\n" in code and "import torch_xla\n" not in code
    same = StepOutcome("xla", "torch_xla", "built", fake.name, "2.99.0", "0" * 64)
    from builder.recipes import get_recipe

    assert wheel_smoke(Config(), index, same) == ("torch_xla==2.99.0", get_recipe("xla").smoke_code())
    assert not is_real_torch_xla(fake)  # named torch_xla, but no metrics / parallel_loader modules
    assert real_xla_wheels(index, [(built.filename, built.sha256), (same.filename, same.sha256)]) == []


def test_readme_shows_the_exact_table_of_its_example(monkeypatch, tmp_path):
    """README's xla-check example (tests/data/xla_readme/train.py, captured as train.log):
    the findings it shows are what print_findings prints for that run on an 80-column terminal."""
    from rich.console import Console

    import builder.cli.xla as cli_xla

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    report = check_output((DATA / "xla_readme" / "train.log").read_text(), str(tmp_path))
    assert [(f.severity, f.location.rsplit("/", 1)[1]) for f in report.findings] == \
        [("error", "train.py:16"), ("warning", "train.py:20"), ("info", "train.py:21")]
    printed = io.StringIO()
    monkeypatch.setattr(cli_xla, "out", Console(file=printed, width=80, highlight=False, soft_wrap=True))
    monkeypatch.setattr(cli_xla, "err", Console(file=io.StringIO(), width=80))
    monkeypatch.chdir(tmp_path)
    cli_xla.print_findings(report, Path("train.py"))
    assert f"```\n{printed.getvalue()}```" in readme


def test_steps_counted_by_the_loader_when_the_script_never_syncs():
    report = check_output(captured("loader_only"), HOST)
    assert (report.figures["steps"], report.figures["step_clock"]) == (12, "loader")
    (finding,) = report.findings
    assert (finding.location, finding.severity, finding.frequency) == (f"{HOST}/loader_only.py:21", "warning", 0.25)
    assert finding.summary == "3 host reads in 12 steps, every 4th step"


def test_no_sync_is_found_when_the_last_execute_time_sample_has_not_landed():
    """The flaky --strict case: torch_xla records ExecuteTime from PJRT's OnReady callback
    on another thread, so a dump at exit can hold ExecuteComputation 1 and no ExecuteTime
    sample yet. The same run must give the same error either way."""
    from builder.xla.check import MARKER
    text = captured("no_sync")
    head, _, rest = text.partition(MARKER)
    line, _, tail = rest.partition("\n")
    dump = json.loads(line)
    del dump["metrics"]["ExecuteTime"]
    assert dump["counters"]["ExecuteComputation"] == 1
    raced = check_output(head + MARKER + json.dumps(dump) + "\n" + tail, HOST)
    assert [(f.kind, f.severity) for f in raced.findings] == [("host-sync", "info"), ("no-sync", "error"),
                                                              ("no-mpdeviceloader", "warning")]
    assert raced.figures["executions"] == 1
    dump["counters"].pop("ExecuteComputation")  # neither figure: no execution seen, no finding
    neither = check_output(head + MARKER + json.dumps(dump) + "\n" + tail, HOST)
    assert "no-sync" not in [f.kind for f in neither.findings]
