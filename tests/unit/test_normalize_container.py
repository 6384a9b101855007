"""builder.repro.normalize where it runs now: in the build container (``python -``, standard
library only) writing normalize.json, and the host's check of the result
(builder.run.wheelstep.checked_normal_form), which reads the central directory and never
re-zips: the bytes are the container's zlib's, not the host's."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import zlib_ng.zlib_ng as zlib_ng

from builder.errors import BuildError
from builder.recipes import get_recipe
from builder.recipes.base import BuildContext, container_phases, normalize_lines
from builder.repro import normalize
from builder.run.wheelstep import checked_normal_form
from tests.unit.test_normalize import FILES, NAME, SDE, write_wheel

SOURCE = Path(normalize.__file__).read_text()


@pytest.fixture
def raw(tmp_path) -> Path:
    return write_wheel(tmp_path / "dist" / NAME, list(reversed(FILES)), (2030, 1, 2, 3, 4, 6), 9)


def test_main_normalises_in_place_and_records_sha_python_and_zlib(raw, tmp_path):
    assert normalize.main([str(raw.parent), str(tmp_path), str(SDE)]) == 0
    record = json.loads((tmp_path / normalize.NORMALIZE_FILE).read_text())
    assert record == {"version": normalize.NORMALIZER_VERSION, **normalize.runtime(),
                      "wheels": {NAME: {"sha256": hashlib.sha256(raw.read_bytes()).hexdigest(),
                                        "entries": len(FILES) + 1}}}
    assert normalize.layout_problems(raw, SDE) == []
    assert normalize.check_record(raw) == []


def test_a_broken_wheel_is_one_error_file_and_exit_3(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / NAME).write_bytes(b"not a zip")
    assert normalize.main([str(dist), str(tmp_path), str(SDE)]) == normalize.FAILED_EXIT == 3
    message, hint = (tmp_path / normalize.ERROR_FILE).read_text().splitlines()
    assert message.startswith(f"{NAME}: not a readable zip") and hint == "is this file a wheel?"
    assert not (tmp_path / normalize.NORMALIZE_FILE).exists()


def test_the_raw_wheel_fails_the_layout_check_by_field(raw):
    problems = normalize.layout_problems(raw, SDE)
    assert "entries are not in normal order" in problems
    assert "demo/: a directory entry" in problems
    assert any(p.startswith("demo/helper.py: date_time (2030, 1, 2, 3, 4, 6), normal form (2024, 1, 1, 0, 0, 0)")
               for p in problems), problems
    assert any(p.startswith("demo/helper.py: comment b'build-specific'") for p in problems), problems


@pytest.mark.parametrize("change", ["date", "mode", "so_mode", "extra", "stored", "order", "system"])
def test_one_field_off_normal_form_is_named(raw, tmp_path, change):
    normalize.normalize_wheel(raw, SDE)
    bent = tmp_path / "bent.whl"
    with zipfile.ZipFile(raw) as src, zipfile.ZipFile(bent, "w") as dst:
        infos = src.infolist()
        if change == "order":
            infos = [infos[1], infos[0], *infos[2:]]
        for info in infos:
            data = src.read(info)
            if info.filename == "demo/helper.py" or (change == "so_mode" and info.filename == "demo/_native.so"):
                if change == "date":
                    info.date_time = (2024, 1, 1, 0, 0, 2)
                elif change == "mode":
                    info.external_attr = (0o100000 | 0o600) << 16
                elif change == "extra":
                    info.extra = b"\x75\x70\x05\x00\x01abcd"
                elif change == "stored":
                    info.compress_type = zipfile.ZIP_STORED
                elif change == "system":
                    info.create_system = 0
            if change == "so_mode" and info.filename == "demo/_native.so":
                info.external_attr = (0o100000 | 0o644) << 16
            dst.writestr(info, data)
    problems = normalize.layout_problems(bent, SDE)
    expected = {"date": "demo/helper.py: date_time", "mode": "demo/helper.py: mode 0o100600",
                "so_mode": "demo/_native.so: mode 0o100644, normal form 0o100755",
                "extra": "demo/helper.py: extra", "stored": "demo/helper.py: compression 0",
                "order": "entries are not in normal order", "system": "demo/helper.py: system 0"}[change]
    assert [p for p in problems if p.startswith(expected)], problems


def test_another_zlib_build_writes_other_bytes_so_the_host_must_not_rezip(raw, tmp_path, monkeypatch):
    """The hazard the container step removes: the same wheel normalised by zlib and by
    zlib-ng (Fedora's python links zlib-ng-compat) gives two sha256s; both are in normal form."""
    digests = {}
    for name, module in (("zlib", zipfile.zlib), ("zlib-ng", zlib_ng)):
        copy = tmp_path / name / NAME
        copy.parent.mkdir()
        copy.write_bytes(raw.read_bytes())
        monkeypatch.setattr(zipfile, "zlib", module)
        digests[name] = normalize.normalize_wheel(copy, SDE).sha256
        assert normalize.layout_problems(copy, SDE) == []
    assert digests["zlib"] != digests["zlib-ng"]


def test_the_host_check_returns_the_sha_and_the_runtime(raw, tmp_path):
    assert normalize.main([str(raw.parent), str(tmp_path), str(SDE)]) == 0
    sha, runtime = checked_normal_form(tmp_path, raw, SDE, tmp_path / "log")
    assert sha == hashlib.sha256(raw.read_bytes()).hexdigest()
    assert runtime == {"version": normalize.NORMALIZER_VERSION, "python": normalize.runtime()["python"],
                       "zlib": normalize.runtime()["zlib"]}


def test_the_host_check_refuses_a_missing_record_a_changed_file_and_a_raw_wheel(raw, tmp_path):
    with pytest.raises(BuildError, match=r"did not record its normalisation \(normalize.json\)") as err:
        checked_normal_form(tmp_path, raw, SDE, tmp_path / "log")
    assert err.value.hint == f"see the log {tmp_path / 'log'}"
    record = {"version": "2", "python": "3.11.2", "zlib": "1.2.13", "wheels": {NAME: {"sha256": "0" * 64}}}
    (tmp_path / normalize.NORMALIZE_FILE).write_text(json.dumps(record))
    with pytest.raises(BuildError, match="not in normal form: demo/: a directory entry; entries are not in normal") \
            as err:
        checked_normal_form(tmp_path, raw, SDE, tmp_path / "log")
    assert err.value.hint == f"see the log {tmp_path / 'log'}"
    normalize.normalize_wheel(raw, SDE)
    with pytest.raises(BuildError, match="changed after the build container normalised it") as err:
        checked_normal_form(tmp_path, raw, SDE, tmp_path / "log")
    assert err.value.hint == f"see the log {tmp_path / 'log'}"
    with pytest.raises(BuildError, match="is not in normal form: .*date_time"):
        checked_normal_form(tmp_path, raw, SDE + 2, tmp_path / "log")


def test_the_script_normalises_after_the_audit_with_the_inlined_source():
    ctx = BuildContext(jobs=1, source_date_epoch=1700000000)
    lines = normalize_lines(ctx.source_date_epoch)
    assert lines == [f"python - /out/dist /out 1700000000 <<'BUILDER_NORMALIZE'\n{SOURCE}BUILDER_NORMALIZE"]
    script = get_recipe("torch").script(ctx)
    assert script.index("BUILDER_AUDIT\n") < script.index(lines[0]) < script.index('"normalised')


def test_the_normalisation_is_a_container_phase():
    marks = "started\t10.5\nprepared\t11\nbuilt\t20\naudited\t21.5\nnormalised\t21.75\n"
    assert container_phases(marks, 10.0, 22.0) == {"container start": 0.5, "prepare": 0.5, "build command": 9.0,
                                                   "audit": 1.5, "normalise": 0.25, "container end": 0.25}


# ---------------------------------------------------------------- the rules, one by one
@pytest.mark.parametrize(("name", "mode", "magic", "expected"), [
    ("pkg-1.0.data/scripts/tool", 0o644, b"\x7fELF", True),
    ("pkg-1.0.data/scripts/tool", 0o644, b"#!/b", True),
    ("pkg-1.0.data/scripts/tool", 0o644, b"text", False),
    ("pkg-1.0.data/scripts/sub/tool", 0o644, b"#!/b", True),
    ("pkg-1.0.data/data/tool", 0o644, b"#!/b", False),  # installed as data, not to bin/
    ("pkg/scripts/tool", 0o644, b"#!/b", False),  # not under .data
    ("pkg-1.0.data/scripts", 0o644, b"#!/b", False),  # a file named scripts
    ("pkg/run.py", 0o001, b"", True),  # any x bit
    ("pkg/run.py", 0o010, b"", True),
    ("pkg/run.py", 0o100, b"", True),
    ("pkg/run.py", 0o002, b"", False),
    ("pkg/run.py", 0o4000, b"", False),
    ("pkg/_c.so", 0o644, b"", True),
])
def test_what_keeps_its_executable_bit(name, mode, magic, expected):
    assert normalize.is_executable(name, mode, magic) is expected


@pytest.mark.parametrize(("name", "expected"), [
    ("x.so", True), ("pkg/_c.cpython-311-x86_64-linux-gnu.so", True), ("pkg/lib/libz.so.1", True),
    ("a/b.so.d/c.txt", False), ("a/b.so/readme", False), ("pkg/so.txt", False), ("pkg/x.sox", False),
])
def test_what_counts_as_a_shared_object(name, expected):
    assert normalize.is_shared_object(name) is expected


def test_the_order_is_package_then_data_then_dist_info_with_record_last():
    names = ["z-1.0.dist-info/WHEEL", "z-1.0.dist-info/RECORD", "z-1.0.dist-info/METADATA",
             "z-1.0.data/scripts/t", "z/b.py", "a/x.py", "z-1.0.data/data/d"]
    assert sorted(names, key=normalize.sort_key) == [
        "a/x.py", "z/b.py", "z-1.0.data/data/d", "z-1.0.data/scripts/t",
        "z-1.0.dist-info/METADATA", "z-1.0.dist-info/WHEEL", "z-1.0.dist-info/RECORD"]


def plain_wheel(path: Path, entries: dict[str, tuple[bytes, int]], record: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, (data, mode) in entries.items():
            info = zipfile.ZipInfo(name, date_time=(2030, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            zf.writestr(info, data)
        if record:
            zf.writestr("d-1.dist-info/RECORD", "")
    return path


def test_an_x_bit_is_kept_on_any_file_and_the_zip_headers_are_fixed(tmp_path):
    wheel = plain_wheel(tmp_path / "d-1-py3-none-any.whl", {
        "d/run.sh": (b"echo hi\n", 0o744), "d/notes.txt": (b"n\n", 0o600), "d/RECORD": (b"a data file\n", 0o644),
        "d-1.dist-info/METADATA": (b"Name: d\n", 0o644)})
    done = normalize.normalize_wheel(wheel, SDE)
    assert done.path == wheel and done.entries == 5
    assert wheel.stat().st_mode & 0o777 == 0o644
    with zipfile.ZipFile(wheel) as zf:
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        versions = {(i.create_version, i.extract_version) for i in zf.infolist()}
        record = zf.read("d-1.dist-info/RECORD")
    assert modes == {"d/RECORD": 0o100644, "d/notes.txt": 0o100644, "d/run.sh": 0o100755,
                     "d-1.dist-info/METADATA": 0o100644, "d-1.dist-info/RECORD": 0o100644}
    assert versions == {(20, 20)}
    assert b"\r" not in record and record.endswith(b"d-1.dist-info/RECORD,,\n")


def test_check_record_names_every_problem(tmp_path):
    wheel = plain_wheel(tmp_path / "d-1-py3-none-any.whl", {
        "d/a.py": (b"a", 0o644), "d/b.py": (b"b", 0o644), "d/c.py": (b"c", 0o644), "d/e.py": (b"e", 0o644)},
        record=False)
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("d-1.dist-info/RECORD", "\n".join([
            "bad row",
            f"d/a.py,{normalize.record_hash(b'x')},1",  # same size, other hash
            f"d/b.py,{normalize.record_hash(b'b')},7",  # right hash, other size
            "d/gone.py,sha256=abc,3",
            "d-1.dist-info/RECORD,,"]) + "\n")
        zf.writestr("d/late.py", b"after RECORD")
    assert normalize.check_record(wheel) == [
        "malformed RECORD row ['bad row']",
        f"d/a.py: RECORD says {normalize.record_hash(b'x')},1, the file is {normalize.record_hash(b'a')},1",
        f"d/b.py: RECORD says {normalize.record_hash(b'b')},7, the file is {normalize.record_hash(b'b')},1",
        "d/c.py: not in RECORD", "d/e.py: not in RECORD", "d/late.py: not in RECORD",
        "d/gone.py: in RECORD, not in the wheel"]
    bare = plain_wheel(tmp_path / "bare" / "d-1-py3-none-any.whl", {"d/a.py": (b"a", 0o644)}, record=False)
    with pytest.raises(normalize.NormalizeError, match="^d-1-py3-none-any.whl: expected one .dist-info/RECORD"):
        normalize.check_record(bare)


def test_layout_problems_name_a_script_a_mode_a_late_record_and_a_comment(tmp_path):
    wheel = plain_wheel(tmp_path / "d-1-py3-none-any.whl", {"d/a.py": (b"a", 0o644)})
    normalize.normalize_wheel(wheel, SDE)
    bent = tmp_path / "bent" / wheel.name
    bent.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(bent, "w") as dst:
        infos = {i.filename: i for i in src.infolist()}
        helper = infos["d/a.py"]
        helper.external_attr = (0o100000 | 0o600) << 16
        dst.writestr(helper, src.read(helper))
        dst.writestr(infos["d-1.dist-info/RECORD"], src.read("d-1.dist-info/RECORD"))
        script = zipfile.ZipInfo("d-1.data/scripts/tool", date_time=zip_time())
        script.external_attr, script.create_system, script.compress_type = (0o100644 << 16), 3, zipfile.ZIP_DEFLATED
        dst.writestr(script, b"#!/bin/sh\n")
        dst.comment = b"made by hand"
    assert normalize.layout_problems(bent, SDE) == [
        "entries are not in normal order",
        "d-1.dist-info/RECORD is not the last entry",
        "d/a.py: mode 0o100600, normal form 0o100644 or 0o100755",
        "d-1.data/scripts/tool: mode 0o100644, normal form 0o100755",
        "the archive has a comment"]


def zip_time() -> tuple[int, int, int, int, int, int]:
    return normalize.zip_date_time(SDE)


def test_layout_problems_of_a_zip_without_record_is_one_line(tmp_path):
    wheel = plain_wheel(tmp_path / "d-1-py3-none-any.whl", {"d/a.py": (b"a", 0o644)}, record=False)
    assert normalize.layout_problems(wheel, SDE) == ["d-1-py3-none-any.whl: expected one .dist-info/RECORD, found 0"]


def test_main_says_what_it_wrote_and_what_failed(raw, tmp_path, capsys):
    assert normalize.main([str(raw.parent), str(tmp_path), str(SDE)]) == 0
    runtime = normalize.runtime()
    sha = hashlib.sha256(raw.read_bytes()).hexdigest()
    assert capsys.readouterr().out == f"normalised with Python {runtime['python']}, zlib {runtime['zlib']}: " \
                                      f"{NAME} {sha[:12]}\n"
    (raw.parent / "b-1-py3-none-any.whl").write_bytes(b"no zip")
    assert normalize.main([str(raw.parent), str(tmp_path), str(SDE)]) == 3
    assert capsys.readouterr().err.startswith("error: b-1-py3-none-any.whl: not a readable zip (")


def test_two_duplicates_are_named_with_the_fix(tmp_path):
    wheel = plain_wheel(tmp_path / "d-1-py3-none-any.whl", {"d/a.py": (b"a", 0o644), "d/b.py": (b"b", 0o644)})
    with zipfile.ZipFile(wheel, "a") as zf, pytest.warns(UserWarning):
        zf.writestr("d/a.py", b"again")
        zf.writestr("d/b.py", b"again")
    with pytest.raises(normalize.NormalizeError) as caught:
        normalize.normalize_wheel(wheel, SDE)
    assert str(caught.value) == "d-1-py3-none-any.whl: duplicate zip entries d/a.py, d/b.py"
    assert caught.value.hint == "the build wrote a file twice into the wheel; fix its packaging"


def test_the_rewrite_lands_by_a_rename_from_beside_the_wheel(tmp_path, monkeypatch):
    wheel = plain_wheel(tmp_path / "w" / "d-1-py3-none-any.whl", {"d/a.py": (b"a", 0o644)})
    renamed = []
    real = normalize.os.replace
    monkeypatch.setattr(normalize.os, "replace", lambda a, b: (renamed.append((Path(a), Path(b))), real(a, b)))
    normalize.normalize_wheel(wheel, SDE)
    assert [(a.parent, b) for a, b in renamed] == [(wheel.parent, wheel)]  # same dir: an atomic rename
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]


def test_main_lists_every_wheel_it_normalised(raw, tmp_path, capsys):
    plain_wheel(raw.parent / "b-1-py3-none-any.whl", {"b/a.py": (b"a", 0o644)})
    assert normalize.main([str(raw.parent), str(tmp_path), str(SDE)]) == 0
    said = capsys.readouterr().out.strip().split(": ", 1)[1]
    assert [part.split(" ")[0] for part in said.split(", ")] == ["b-1-py3-none-any.whl", NAME]
