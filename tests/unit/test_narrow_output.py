"""Tables for people at 80 and 200 columns (builder.console.print_table): below 100 columns
one line per row with the long field (a wheel file name, advice) last and whole, or on its
own line under its row when the row would not fit; at 200 a table only where every row fits
it; ``--json`` the same bytes at any width.

The commands that need Docker (wheels, cache stats, xla-check) are fed recorded data: real
wheels in an index (tests/helpers_wheels.py), a profile saved as a build saves it, ccache's
``--print-stats`` output and the ``cache-last.json`` a build writes, xla-check's captured logs.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from builder.console import print_table, table_lines
from builder.index.directory import DirectoryIndex
from tests.conftest import run_builder
from tests.helpers_wheels import make_wheel

DATA = Path(__file__).resolve().parents[1] / "data"
TORCH = ("torch", "2.99.0a0+git049b1d9", "cp311-cp311-linux_x86_64")
XLA = ("torch_xla", "2.99.0+git1cb1889a2b3c4d5e6f", "cp311-cp311-manylinux_2_28_x86_64")
BOX = "┃"  # a rich table's header separator: there only when a table is drawn


def check_lines(text: str, width: int, longs: list[str]) -> None:
    """No line is wider than ``width`` unless it ends with a long field, and every long
    field is whole on one line."""
    lines = text.splitlines()
    for line in lines:
        assert cell_len(line) <= width or any(line.endswith(long) for long in longs), (width, line)
    for long in longs:
        assert any(long in line for line in lines), (long, text)


def printed(width: int, show) -> str:  # noqa: ANN001
    buffer = io.StringIO()
    show(Console(file=buffer, width=width, highlight=False, soft_wrap=True, markup=False, emoji=False))
    return buffer.getvalue()


# ------------------------------------------------------------------ the shared helper
def test_narrow_lines_put_the_long_field_last_and_drop_empty_columns():
    rows = [("a", "", "torch-1.whl"), ("bbb", "", "x.whl")]
    assert table_lines(("step", "note", "wheel"), rows, "wheel", 80) == [
        "step  wheel", "a     torch-1.whl", "bbb   x.whl"]


def test_the_long_fields_go_below_their_rows_when_a_row_would_not_fit():
    advice = " ".join(["advice"] * 10)  # 69 characters, after 54 of the short fields
    rows = [("x" * 30, "y" * 20, advice), ("x", "y", "short")]
    assert table_lines(("a", "b", "hint"), rows, "hint", 123) == [
        "a" + " " * 31 + "b" + " " * 21 + "hint",
        "x" * 30 + "  " + "y" * 20 + "  " + advice,
        "x" + " " * 31 + "y" + " " * 21 + "short"]
    assert table_lines(("a", "b", "hint"), rows, "hint", 122) == [
        "a" + " " * 31 + "b", "    hint",
        "x" * 30 + "  " + "y" * 20, "    " + advice,
        "x" + " " * 31 + "y", "    short"]


def test_a_wide_terminal_gets_a_table_only_when_every_row_fits():
    fits = printed(120, lambda c: print_table(c, ("file", "sha256"), [("f" * 60, "0" * 12)], long="file"))
    assert BOX in fits and "│ " + "f" * 60 + " │" in fits
    long_name = "f" * 130
    spills = printed(120, lambda c: print_table(c, ("file", "sha256"), [(long_name, "0" * 12)], long="file"))
    assert BOX not in spills and spills.splitlines() == ["sha256", "    file", "000000000000", "    " + long_name]
    narrow = printed(99, lambda c: print_table(c, ("file", "sha256"), [("f" * 10, "0" * 12)], long="file",
                                               title="t", notes=["n"]))
    assert narrow.splitlines() == ["t", "sha256        file", "000000000000  ffffffffff", "n"]
    assert printed(80, lambda c: print_table(c, ("a", "b"), [], long="b", title="none")) == "none\n"


# ------------------------------------------------------------------ builder index list (real CLI)
@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> DirectoryIndex:
    root = tmp_path_factory.mktemp("narrow")
    index = DirectoryIndex(root / "index")
    for name, version, tag in (TORCH, XLA):
        index.add(make_wheel(root / "src", name, version, requires_python=">=3.10", tag=tag),
                  manifest={"build_key": "ab" * 32})
    index.add(make_wheel(root / "src", "typing_extensions", "4.15.0"))
    return index


def cli(*args: str, columns: int) -> str:
    done = run_builder(*args, env={"COLUMNS": str(columns)}, check=True)
    return done.stdout


@pytest.mark.parametrize("columns", [80, 200])
def test_index_list_never_cuts_a_file_name(index_dir, columns):
    names = [e.filename for e in index_dir.entries()]
    assert max(map(len, names)) == len("torch_xla-2.99.0+git1cb1889a2b3c4d5e6f-cp311-cp311-manylinux_2_28_x86_64.whl")
    text = cli("index", "list", "--dir", str(index_dir.root), columns=columns)
    check_lines(text, columns, names)
    if columns == 80:
        assert BOX not in text
        lines = text.splitlines()  # 45 columns of hashes and the version range, then 77 of file name
        assert lines[:2] == ["sha256        requires-python  build key", "    file"]
        assert lines[3::2] == [f"    {name}" for name in names]
        assert [line.split()[0] for line in lines[2::2]] == [e.sha256[:12] for e in index_dir.entries()]
    else:
        assert BOX in text and all(f"│ {name} " in text for name in names)


def test_index_list_json_is_the_same_bytes_at_any_width(index_dir):
    narrow, wide = (cli("index", "list", "--json", "--dir", str(index_dir.root), columns=c) for c in (80, 200))
    assert narrow == wide
    assert [e["filename"] for e in json.loads(narrow)] == [e.filename for e in index_dir.entries()]
    assert narrow == json.dumps([e.as_dict() for e in index_dir.entries()], indent=2) + "\n"


# ------------------------------------------------------------------ builder profile (real CLI)
NINJA = "# ninja log v5\n" + "".join(
    f"{i * 10}\t{i * 10 + 900 + i}\t0\tCMakeFiles/torch_cpu.dir/aten/src/ATen/native/cpu/kernel_{i:03}.cpp.o\t{i:04x}\n"
    for i in range(12))
STATS = "".join(f"# /src/torch/aten/src/ATen/native/cpu/kernel_{i:03}.cpp\n"
                + ("cache_miss\n" if i % 3 else "direct_cache_hit\n") for i in range(12))


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> dict:
    from builder.report import profile as prof

    root = tmp_path_factory.mktemp("profiles")
    quicker = NINJA.replace("\t1021\t", "\t521\t")  # kernel_011 took 0.41 s there, 0.91 s now
    before = prof.make_profile("torch", "torch-2.99.0a0+git0000001-cp311-cp311-linux_x86_64.whl", 4,
                               quicker, STATS.replace("cache_miss", "direct_cache_hit"))
    prof.save(root / "data", before)
    after = prof.make_profile("torch", "torch-2.99.0a0+git049b1d9-cp311-cp311-linux_x86_64.whl", 4,
                              NINJA.replace("\t0004\n", "\tffff\n"), STATS, previous=before)
    prof.save(root / "data", after)
    config = root / "builder.toml"
    config.write_text(f'data_dir = "{root / "data"}"\n')
    return {"config": config, "before": before, "after": after}


def profile_cli(profiles: dict, *args: str, columns: int) -> str:
    return run_builder("profile", *args, config=profiles["config"], env={"COLUMNS": str(columns)},
                       check=True).stdout


@pytest.mark.parametrize("columns", [80, 200])
def test_profile_lists_whole_paths_and_reasons(profiles, columns):
    after = profiles["after"]
    text = profile_cli(profiles, "torch", "--diff", profiles["before"].wheel, "--top", "20", columns=columns)
    sources = [u.source for u in after.units]
    whys = sorted({u.why for u in after.units if u.result == "miss"})
    assert len(sources) == 12 and len(whys) == 2  # a changed command (kernel_004) and changed inputs
    lines = text.splitlines()
    # two sentences of figures, each a long field of its own, the wheel's name at the start
    sentences = [line for line in lines if line.startswith((f"{after.wheel}: ", "against "))]
    assert sentences == [lines[0], f"against {profiles['before'].wheel}: 8 missed (8 of them hit there), 1 slower, "
                                   "0 new units"]
    slower = "CMakeFiles/torch_cpu.dir/aten/src/ATen/native/cpu/kernel_011.cpp.o"  # diff lists objects
    check_lines(text, columns, sources + whys + sentences + [slower])
    assert lines[0].startswith(f"{after.wheel}: 12 units, 8 missed")
    changed = "aten/src/ATen/native/cpu/kernel_004.cpp"
    if columns == 80:  # a unit and its reason do not fit 80 columns: the reason on the line below
        assert BOX not in text
        rows = [i for i, line in enumerate(lines) if line == changed]
        assert len(rows) == 2 and all(lines[i + 1] == f"    {whys[1]}" for i in rows)  # misses, and the diff's
        assert lines[-4:] == ["before  now", "    slower", "0.41 s  0.91 s", f"    {slower}"]
        assert lines[lines.index("slowest 12:") + 1:][:2] == [
            "seconds  result      unit", "0.91 s   miss        aten/src/ATen/native/cpu/kernel_011.cpp"]
    else:
        assert BOX in text
        assert sum(1 for line in lines if f"│ {changed} │ {whys[1]} │" in line) == 2
        assert any(f"│ 0.41 s │ 0.91 s │ {slower} │" in line for line in lines)
        assert max(map(cell_len, lines[1:])) <= 200


def test_profile_json_is_the_same_bytes_at_any_width(profiles):
    narrow, wide = (profile_cli(profiles, "torch", "--json", columns=c) for c in (80, 200))
    assert narrow == wide
    data = json.loads(narrow)
    assert data["wheel"] == profiles["after"].wheel and data["totals"]["miss"] == 8
    assert len(data["slowest"]) == 10


# ------------------------------------------------------------------ builder wheels summary
def wheels_report(index: DirectoryIndex):
    from builder.caches.ccache import CacheStats
    from builder.run.pipeline import RunReport
    from builder.run.wheelstep import StepOutcome
    from builder.stages.images import StageResult

    by_project = {e.name: e for e in index.entries()}
    stages = [StageResult(name, "c0ffee" * 10 + "abcd", f"builder/{name}:x", "sha256:" + "1" * 64, name == "base", 1.5)
              for name in ("base", "toolchain", "python")]
    torch, xla = by_project["torch"], by_project["torch_xla"]
    steps = [StepOutcome("torch", "torch", "built", torch.filename, torch.version, torch.sha256, key="d" * 64,
                         seconds=812.4, ccache=CacheStats(direct_hits=5510, preprocessed_hits=3, misses=41,
                                                          remote_hits=12)),
             StepOutcome("xla", "torch_xla", "reused", xla.filename, xla.version, xla.sha256, key="e" * 64,
                         dist={"dist_compiles": 410, "dist_servers": {"10.0.0.7:10501": 300, "10.0.0.8:10501": 110},
                               "local_compiles": 3, "dist_failed": 1, "cache_hits": 7, "cache_misses": 406})]
    return RunReport(stages=stages, steps=steps, smoke="passed", jobs=8, seconds=900.25,
                     smoke_figures={"summary": "1 graph compiled once, executed 3 times"},
                     trace=Path("/home/me/.local/share/builder/traces/wheels-20250101-120000.json"))


@pytest.mark.parametrize("columns", [80, 200])
def test_wheels_summary_keeps_every_wheel_name_whole(index_dir, columns):
    from builder.cli.wheels import print_report

    report = wheels_report(index_dir)
    text = printed(columns, lambda console: print_report(report, console))
    names = [step.filename for step in report.steps]
    notes = ["torch: ccache 99% hits (5513/5554, direct 5510), remote 12 hits",
             "torch_xla: sccache-dist: 410 distributed (10.0.0.7:10501 300, 10.0.0.8:10501 110), 3 local "
             "(fallbacks 1), cache hits 7, misses 406",
             "smoke (passed): 1 graph compiled once, executed 3 times",
             f"trace: {report.trace} (open in https://ui.perfetto.dev)"]
    check_lines(text, columns, names + notes)
    lines = text.splitlines()
    assert lines[0] == "builder wheels: 900.2 s, 8 jobs, smoke passed" and lines[-4:] == notes
    if columns == 80:
        assert BOX not in text
        sha = [step.sha256[:12] for step in report.steps]
        assert lines[1:10] == [
            "step             key           status  seconds  ccache  sha256",
            "    wheel",
            "image base       c0ffeec0ffee  reused  1.5",
            "image toolchain  c0ffeec0ffee  built   1.5",
            "image python     c0ffeec0ffee  built   1.5",
            f"torch            dddddddddddd  built   812.4    99%     {sha[0]}",
            f"    {names[0]}",
            f"torch_xla        eeeeeeeeeeee  reused  0.0              {sha[1]}",
            f"    {names[1]}"]
    else:
        assert BOX in text and all(f"│ {name} " in text for name in names)
        assert max(map(cell_len, lines)) <= 200


def test_wheels_json_does_not_depend_on_the_width(index_dir, monkeypatch):
    import builder.cli.wheels as cli_wheels

    report = wheels_report(index_dir)
    dumped = {c: printed(c, lambda console: console.print_json(json.dumps(cli_wheels.report_json(report))))
              for c in (80, 200)}
    assert dumped[80] == dumped[200]
    assert [w["filename"] for w in json.loads(dumped[80])["wheels"]] == [s.filename for s in report.steps]


# ------------------------------------------------------------------ builder cache stats
PRINT_STATS = ("direct_cache_hit\t5510\npreprocessed_cache_hit\t3\ncache_miss\t41\nremote_storage_hit\t12\n"
               "files_in_cache\t11046\ncache_size_kibibyte\t1843200\n")


@pytest.mark.parametrize("columns", [80, 200])
def test_cache_stats_keeps_the_last_wheel_whole(tmp_path, columns):
    from builder.caches.ccache import CacheStats
    from builder.caches.volumes import record_last_build
    from builder.cli.cache import print_stats, stats_data
    from builder.config import Config

    cfg = Config(data_dir=str(tmp_path))
    wheel = "-".join(TORCH[:2]) + f"-{TORCH[2]}.whl"
    record_last_build(cfg, "torch", wheel, CacheStats(direct_hits=5510, preprocessed_hits=3, misses=41))
    data = stats_data(cfg, PRINT_STATS, {"disk": 3 * 1024 ** 2})
    assert data == {"cache": cfg.cache.ccache, "size_bytes": 1843200 * 1024, "files": 11046,
                    "overall": {"hits": 5513, "direct_hits": 5510, "misses": 41, "hit_rate": 0.9926,
                                "remote_hits": 12, "remote_errors": 0},
                    "last_build": json.loads((tmp_path / "cache-last.json").read_text()),
                    "bazel": {"cache": cfg.cache.bazel, "sizes_bytes": {"disk": 3 * 1024 ** 2}}}
    text = printed(columns, lambda console: print_stats(data, console))
    check_lines(text, columns, [wheel])
    lines = text.splitlines()
    assert lines[0] == f"ccache {cfg.cache.ccache}"
    if columns == 80:
        assert lines[1:] == ["figure      value", "size        1800.0 MiB", "files       11046",
                             "overall     5513 hits / 41 misses (99%)",
                             "last build  99% hits (5510 direct, 41 misses)", f"last wheel  {wheel}",
                             f"bazel disk  3.0 MiB ({cfg.cache.bazel})"]
    else:
        assert BOX in text and f"│ last wheel │ {wheel} │" in text


# ------------------------------------------------------------------ builder xla-check findings
LOGS = sorted((DATA / "xla_check").glob("*.log")) + [DATA / "xla_readme" / "train.log"]


@pytest.mark.parametrize("columns", [80, 200])
def test_xla_findings_keep_each_hint_whole_on_its_own_line(monkeypatch, tmp_path, columns):
    import builder.cli.xla as cli_xla
    from builder.xla.check import check_output

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_xla, "err", Console(file=io.StringIO(), width=columns))
    seen = tables = 0
    for log in LOGS:
        report = check_output(log.read_text(), str(tmp_path))
        monkeypatch.setattr(cli_xla, "out", Console(file=io.StringIO(), width=columns, highlight=False,
                                                    soft_wrap=True, markup=False, emoji=False))
        cli_xla.print_findings(report, Path("train.py"))
        text = cli_xla.out.file.getvalue()
        hints = [f.hint for f in report.findings]
        check_lines(text, columns, hints + [f.summary for f in report.findings])
        seen += len(hints)
        lines = text.splitlines()
        if BOX in text:  # a table, at 200 columns, for a log whose every finding fits on a line of it
            assert columns == 200 and max(map(cell_len, lines)) <= 200, text
            tables += 1
        elif hints:  # title, header, then each finding's row with its hint on the line below it
            assert lines[2] == "    hint" and lines[4::2] == ["    " + f.hint for f in report.findings]
            assert [line.split()[0] for line in lines[3::2]] == [f.severity for f in report.findings]
    assert seen >= 12 and (tables > 0) == (columns == 200)


def test_readme_shows_index_list_at_80_columns():
    """README's "Output for people" example is what `index list` prints for those two wheels."""
    import builder.cli.index as cli_index

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    shown = readme.split("columns (`COLUMNS=80 builder index list`):\n\n```\n", 1)[1].split("```", 1)[0]
    rows = [("torch-2.99.0a0+git049b1d9-cp311-cp311-manylinux_2_24_x86_64.whl", "8fcd072fc790", ">=3.10",
             "5d1c9a0e77b2", "GLIBCXX_3.4.21"),
            ("typing_extensions-4.15.0-py3-none-any.whl", "ec07af48c9b4", "", "", "")]
    assert cli_index.INDEX_COLUMNS == ("file", "sha256", "requires-python", "build key", "limited by")
    assert printed(80, lambda console: print_table(console, cli_index.INDEX_COLUMNS, rows, long="file")) == shown


@pytest.mark.parametrize("columns", [80, 200])
def test_images_summary(monkeypatch, columns):
    import builder.cli.images as cli_images
    from builder.stages.images import StageResult

    results = [StageResult("toolchain", "f3ba6d1fcf57d81010588443", "builder/toolchain:f3ba6d1fcf57d81010588443",
                           "sha256:" + "2" * 64, True, 0.4),
               StageResult("python", "6aa4b02ffbd9091eb9624c1b", "builder/python:6aa4b02ffbd9091eb9624c1b",
                           "sha256:" + "3" * 64, False, 95.25, pulled=True)]
    text = printed(columns, lambda console: (monkeypatch.setattr(cli_images, "err", console),
                                             cli_images.print_summary(results, 95.7)))
    check_lines(text, columns, [r.key for r in results])
    if columns == 80:
        assert text.splitlines() == ["stages (95.7 s)", "stage      image         status  seconds  key",
                                     "toolchain  222222222222  reused  0.4      f3ba6d1fcf57d81010588443",
                                     "python     333333333333  pulled  95.2     6aa4b02ffbd9091eb9624c1b"]
    else:
        assert BOX in text and "│ python    │ 333333333333 │ pulled │ 95.2    │ 6aa4b02ffbd9091eb9624c1b │" in text
