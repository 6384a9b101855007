"""builder.report.profile: ninja's log joined with ccache's stats log, misses explained, the trace."""

from __future__ import annotations

import json

from builder.report import profile as prof

NINJA = """# ninja log v5
0\t1500\t0\tCMakeFiles/torch_cpu.dir/csrc/a.cpp.o\taaaa
10\t900\t0\tCMakeFiles/torch_cpu.dir/csrc/b.cpp.o\tbbbb
950\t1200\t0\tCMakeFiles/torch_cpu.dir/csrc/c.cpp.o\tcccc
1500\t1700\t0\tlibtorch_cpu.so\tdddd
"""
STATS = """# /src/torch/csrc/a.cpp
cache_miss
direct_cache_miss
# /src/torch/csrc/b.cpp
direct_cache_hit
local_storage_hit
# /src/torch/csrc/c.cpp
direct_cache_miss
preprocessed_cache_hit
"""


def test_units_join_ninja_and_ccache():
    p = prof.make_profile("torch", "torch-1.whl", 2, NINJA, STATS)
    units = {u.source: u for u in p.units}
    assert set(units) == {"csrc/a.cpp", "csrc/b.cpp", "csrc/c.cpp"}  # the link is no unit
    assert units["csrc/a.cpp"].result == "miss" and units["csrc/a.cpp"].seconds == 1.5
    assert units["csrc/b.cpp"].result == "direct hit"
    assert units["csrc/c.cpp"].result == "preprocessed hit"
    assert units["csrc/a.cpp"].why.startswith("new unit")
    totals = p.totals()
    assert totals["units"] == 3 and totals["miss"] == 1 and totals["slots"] == 2
    assert totals["wall_seconds"] == 1.5


def test_ccache_paths_relative_to_the_build_dir_match():
    stats = STATS.replace("/src/torch/csrc/", "../csrc/")
    assert {u.result for u in prof.make_profile("torch", "w", 2, NINJA, stats).units} == {
        "miss", "direct hit", "preprocessed hit"}


def test_slots_never_overlap():
    p = prof.make_profile("torch", "w", 2, NINJA, STATS)
    by_slot = {}
    for u in p.units:
        by_slot.setdefault(u.slot, []).append((u.start_ms, u.end_ms))
    for spans in by_slot.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_misses_are_explained_against_the_previous_build():
    before = prof.make_profile("torch", "w1", 2, NINJA, STATS)
    flags = NINJA.replace("\taaaa", "\tffff")
    after = prof.make_profile("torch", "w2", 2, flags, STATS, previous=before)
    [miss] = [u for u in after.units if u.result == "miss"]
    assert "compile command changed" in miss.why
    same = prof.make_profile("torch", "w3", 2, NINJA, STATS, previous=before)
    [miss] = [u for u in same.units if u.result == "miss"]
    assert "an input changed" in miss.why


def test_diff_names_what_newly_missed():
    hits = STATS.replace("cache_miss\ndirect_cache_miss", "direct_cache_hit")
    old = prof.make_profile("torch", "w1", 2, NINJA, hits)
    new = prof.make_profile("torch", "w2", 2, NINJA, STATS, previous=old)
    changes = prof.diff(new, old)
    assert [d["output"] for d in changes["newly_missed"]] == ["CMakeFiles/torch_cpu.dir/csrc/a.cpp.o"]


def test_round_trip_and_latest(tmp_path):
    p = prof.make_profile("torch", "torch-1.whl", 2, NINJA, STATS)
    path = prof.save(tmp_path, p)
    assert prof.load(path).as_dict() == p.as_dict()
    assert prof.latest(tmp_path, "torch").wheel == "torch-1.whl"
    assert prof.latest(tmp_path, "torch_xla") is None


def test_trace_is_chrome_trace_json():
    p = prof.make_profile("torch", "w", 2, NINJA, STATS)
    trace = json.loads(json.dumps(prof.trace_events([("base reused", 0.0, 0.5, True)],
                                                    [("torch", 0.5, 3.0, "built")], {"torch": (0.5, p)})))
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in complete} >= {"stage", "step", "miss", "direct_hit"}
    assert all(isinstance(e["ts"], int) and e["dur"] > 0 for e in complete)


def test_jobs_follow_the_memory_the_last_build_used():
    def choose(requested, gib):  # 8 cores, 16 GiB available
        return requested or max(1, min(8, int(16 // gib)))

    assert prof.memory_aware_jobs(choose, 3, 2.0, None) == (3, "")  # asked for: kept
    assert prof.memory_aware_jobs(choose, 0, 2.0, None) == (8, "")
    light = prof.Profile("torch", "w", 8, peak_memory_bytes=8 * 1024 ** 3)  # 1 GiB per job
    assert prof.memory_aware_jobs(choose, 0, 2.0, light) == (8, "")
    heavy = prof.Profile("torch", "w", 4, peak_memory_bytes=16 * 1024 ** 3)  # 4 GiB per job
    jobs, why = prof.memory_aware_jobs(choose, 0, 2.0, heavy)
    assert jobs == 4 and "peaked at 16.0 GiB with 4 jobs (4.00 GiB per job" in why
