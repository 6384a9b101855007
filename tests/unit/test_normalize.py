"""builder.repro.normalize: equal contents give equal bytes, RECORD matches, the wheel still installs."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from builder.repro.normalize import (
    NormalizeError,
    check_record,
    layout_problems,
    normalize_wheel,
    record_hash,
    zip_date_time,
)

NAME = "demo-1.0-py3-none-any.whl"
SDE = 1704067200  # 2024-01-01T00:00:00Z

FILES: dict[str, tuple[bytes, int]] = {
    "demo/__init__.py": (b"from demo import helper\nVALUE = 42\n", 0o664),
    "demo/helper.py": (b"def f():\n    return 1\n", 0o644),
    "demo/_native.so": (b"\x7fELF fake shared object" * 50, 0o775),
    "demo/lib/libdemo.so.1": (b"\x7fELF versioned" * 20, 0o644),
    "demo/data.txt": (b"payload " * 1000, 0o600),
    "demo-1.0.data/scripts/demo-tool": (b"#!python\nprint('tool')\n", 0o644),
    "demo-1.0.dist-info/METADATA": (b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n", 0o644),
    "demo-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                                 0o644),
    "demo-1.0.dist-info/top_level.txt": (b"demo\n", 0o644),
}


def write_wheel(path: Path, order: list[str], date_time: tuple[int, ...], level: int,
                record_rows: list[str] | None = None, extra: dict[str, bytes] | None = None) -> Path:
    """A wheel as a build tool might write it: its own order, times, modes and compression."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        for name in order:
            data, mode = FILES[name]
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.comment = b"build-specific"
            zf.writestr(info, data)
        zf.writestr(zipfile.ZipInfo("demo/", date_time=date_time), b"")  # a directory entry
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
        rows = record_rows if record_rows is not None else [f"{n},,"for n in reversed(order)]
        zf.writestr("demo-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
    return path


@pytest.fixture
def two_wheels(tmp_path):
    names = list(FILES)
    a = write_wheel(tmp_path / "a" / NAME, names, (2024, 5, 6, 7, 8, 10), 9)
    b = write_wheel(tmp_path / "b" / NAME, list(reversed(names)), (2031, 1, 2, 3, 4, 6), 1,
                    extra={"demo-1.0.dist-info/RECORD.jws": b"{}"})
    return a, b


def test_same_content_different_times_and_order_normalize_to_identical_bytes(two_wheels):
    a, b = two_wheels
    assert a.read_bytes() != b.read_bytes()
    ra, rb = normalize_wheel(a, SDE), normalize_wheel(b, SDE)
    assert ra.changed and rb.changed
    assert a.read_bytes() == b.read_bytes()
    assert ra.sha256 == rb.sha256


def test_normalizing_is_idempotent(two_wheels):
    a, _ = two_wheels
    first = normalize_wheel(a, SDE)
    again = normalize_wheel(a, SDE)
    assert not again.changed and again.sha256 == first.sha256


def test_another_source_date_epoch_gives_other_bytes(two_wheels):
    a, b = two_wheels
    assert normalize_wheel(a, SDE).sha256 != normalize_wheel(b, SDE + 3600).sha256


def test_entries_sorted_record_last_fixed_times_and_modes(two_wheels):
    a, _ = two_wheels
    normalize_wheel(a, SDE)
    with zipfile.ZipFile(a) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert names[-1] == "demo-1.0.dist-info/RECORD"
    package = [n for n in names if not n.startswith("demo-1.0.")]
    assert package == sorted(package) and names.index("demo-1.0.data/scripts/demo-tool") > len(package) - 1
    assert all(n.startswith("demo-1.0.dist-info/") for n in names[-4:])
    assert "demo/" not in names and "demo-1.0.dist-info/RECORD.jws" not in names  # dirs, stale signatures
    assert {i.date_time for i in infos} == {zip_date_time(SDE)} == {(2024, 1, 1, 0, 0, 0)}
    modes = {i.filename: (i.external_attr >> 16) & 0o7777 for i in infos}
    assert modes["demo/_native.so"] == 0o755 and modes["demo/lib/libdemo.so.1"] == 0o755
    assert modes["demo-1.0.data/scripts/demo-tool"] == 0o755
    assert modes["demo/__init__.py"] == 0o644 and modes["demo/data.txt"] == 0o644
    assert all(i.comment == b"" and i.extra == b"" and i.create_system == 3 for i in infos)
    assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in infos)


@pytest.fixture
def time_zone():
    """Switch the process's time zone (TZ + tzset), restoring the suite's afterwards."""
    before = os.environ["TZ"]

    def switch(tz: str) -> None:
        os.environ["TZ"] = tz
        time.tzset()

    yield switch
    switch(before)


# UTC, UTC+5:45 (no DST), and Berlin's rule and Santiago's (the suite's own, DST on at SDE):
# any of them shifting the date or the hour of a timestamp would change the bytes.
ZONES = ["UTC0", "<+0545>-5:45", "CET-1CEST,M3.5.0,M10.5.0/3", "<-04>4<-03>,M9.1.6/24,M4.1.6/24"]


def test_normalized_bytes_do_not_depend_on_the_time_zone(two_wheels, tmp_path, time_zone):
    a, _ = two_wheels
    digests = {}
    for n, tz in enumerate(ZONES):
        time_zone(tz)
        copy = tmp_path / f"tz{n}" / NAME
        copy.parent.mkdir()
        shutil.copy(a, copy)
        digests[tz] = normalize_wheel(copy, SDE).sha256
        with zipfile.ZipFile(copy) as zf:
            assert {i.date_time for i in zf.infolist()} == {(2024, 1, 1, 0, 0, 0)}, tz  # UTC, whatever the zone
    assert len(set(digests.values())) == 1, digests
    assert time.localtime(SDE).tm_hour != 0  # the zone really moved local time off UTC


def test_an_odd_second_epoch_is_written_and_checked_as_the_even_second_below(two_wheels):
    """A zip entry stores seconds / 2: an sdist whose newest member has an odd mtime
    (torchsort 0.1.10's: 17:12:13) gave a wheel written at :12 and then refused by the
    host's check, which wanted :13."""
    a, _ = two_wheels
    odd = SDE + 13
    assert zip_date_time(odd) == (2024, 1, 1, 0, 0, 12) and zip_date_time(odd - 1) == zip_date_time(odd)
    normalize_wheel(a, odd)
    with zipfile.ZipFile(a) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2024, 1, 1, 0, 0, 12)}
    assert layout_problems(a, odd) == []
    assert layout_problems(a, odd + 1) != []  # :14 is another time: still checked to the second


def test_zip_cannot_go_below_1980():
    assert zip_date_time(0) == (1980, 1, 1, 0, 0, 0)
    assert zip_date_time(-5) == (1980, 1, 1, 0, 0, 0)


def test_record_lists_every_entry_with_sha256_and_size(two_wheels):
    a, _ = two_wheels
    assert check_record(a)  # the tool's RECORD had no hashes
    normalize_wheel(a, SDE)
    assert check_record(a) == []
    with zipfile.ZipFile(a) as zf:
        rows = list(csv.reader(io.StringIO(zf.read("demo-1.0.dist-info/RECORD").decode())))
        names = [i.filename for i in zf.infolist()]
        assert [r[0] for r in rows] == names  # same order as the zip, RECORD last
        assert rows[-1] == ["demo-1.0.dist-info/RECORD", "", ""]
        for name, digest, size in rows[:-1]:
            data = zf.read(name)
            assert digest == record_hash(data) and size == str(len(data))
    assert record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


def test_contents_are_untouched(two_wheels):
    a, _ = two_wheels
    normalize_wheel(a, SDE)
    with zipfile.ZipFile(a) as zf:
        for name, (data, _) in FILES.items():
            assert zf.read(name) == data


def test_normalized_wheel_installs_with_pip(two_wheels, tmp_path):
    a, _ = two_wheels
    normalize_wheel(a, SDE)
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir",
                           "--disable-pip-version-check", "--target", str(target), str(a)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (target / "demo" / "__init__.py").read_text().endswith("VALUE = 42\n")
    assert (target / "demo" / "_native.so").stat().st_mode & 0o111
    assert (target / "bin" / "demo-tool").is_file()
    check = subprocess.run([sys.executable, "-c", "import demo; print(demo.VALUE)"], capture_output=True,
                           text=True, env={"PYTHONPATH": str(target)})
    assert check.stdout.strip() == "42", check.stderr


def test_a_wheel_without_record_or_with_duplicates_is_refused(tmp_path):
    bad = tmp_path / NAME
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("demo/__init__.py", b"")
    with pytest.raises(NormalizeError, match="RECORD"):
        normalize_wheel(bad, SDE)
    dup = tmp_path / "dup" / NAME
    write_wheel(dup, list(FILES), (2024, 1, 1, 0, 0, 0), 6)
    with zipfile.ZipFile(dup, "a") as zf, pytest.warns(UserWarning):
        zf.writestr("demo/helper.py", b"other")
    with pytest.raises(NormalizeError, match="duplicate zip entries demo/helper.py"):
        normalize_wheel(dup, SDE)
    not_zip = tmp_path / "nz" / NAME
    not_zip.parent.mkdir()
    not_zip.write_bytes(b"not a zip")
    with pytest.raises(NormalizeError, match="not a readable zip"):
        normalize_wheel(not_zip, SDE)
