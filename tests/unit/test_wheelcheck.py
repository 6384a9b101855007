"""Wheels are checked before the index copies them: unsafe entry names, symlinks,
another project's .dist-info, RECORD mismatches and METADATA/file-name disagreement
are refused with an error naming the user's file and the entry; nothing is written."""

from __future__ import annotations

import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from builder.errors import PackageIndexError
from builder.index.directory import DirectoryIndex
from builder.index.wheelcheck import entry_name_problem
from tests.helpers_wheels import make_wheel


def rewrite(wheel: Path, extra: list[zipfile.ZipInfo | tuple[str, bytes]] = (), drop: str = "",
            replace: dict[str, bytes] | None = None) -> Path:
    """A copy of ``wheel`` (same name, in a sub-directory) with entries added, dropped or replaced."""
    out = wheel.parent / "hostile" / wheel.name
    out.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename == drop:
                continue
            dst.writestr(info, (replace or {}).get(info.filename, src.read(info)))
        for item in extra:
            if isinstance(item, tuple):
                dst.writestr(item[0], item[1])
            else:
                dst.writestr(item, b"target")
    return out


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "src", "demo", "1.0")


def symlink_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


CASES = {
    "parent": lambda w: rewrite(w, [("../../../../tmp/evil.py", b"x")]),
    "absolute": lambda w: rewrite(w, [("/etc/cron.d/evil", b"x")]),
    "symlink": lambda w: rewrite(w, [symlink_entry("demo/link")]),
    "not-normalized": lambda w: rewrite(w, [("demo//x.py", b"x")]),
    "other-dist-info": lambda w: rewrite(w, [("pip-1.0.dist-info/METADATA", b"x")]),
    "unrecorded": lambda w: rewrite(w, [("demo/extra.py", b"x")]),
    "hash-mismatch": lambda w: rewrite(w, replace={"demo/data.bin": b"tampered"}),
    "no-record": lambda w: rewrite(w, drop="demo-1.0.dist-info/RECORD"),
}
ENTRY = {"parent": "../../../../tmp/evil.py", "absolute": "/etc/cron.d/evil", "symlink": "demo/link",
         "not-normalized": "demo//x.py", "other-dist-info": "pip-1.0.dist-info/METADATA",
         "unrecorded": "demo/extra.py", "hash-mismatch": "demo/data.bin", "no-record": "RECORD"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_wheel_is_refused_naming_the_file_and_entry(case: str, good: Path, tmp_path: Path):
    hostile = CASES[case](good)
    index = DirectoryIndex(tmp_path / "index")
    with pytest.raises(PackageIndexError) as caught:
        index.add(hostile)
    message = str(caught.value)
    assert str(hostile) in message and ENTRY[case] in message, message
    assert ".part" not in message and ".tmp-" not in message
    files = tmp_path / "index" / "files"
    assert not files.exists() or list(files.iterdir()) == []  # nothing copied, not even a temp file


def test_metadata_disagreeing_with_the_file_name_names_the_users_file(good: Path, tmp_path: Path):
    renamed = good.with_name("other-1.0-py3-none-any.whl")
    good.rename(renamed)
    with pytest.raises(PackageIndexError) as caught:
        DirectoryIndex(tmp_path / "index").add(renamed)
    assert str(renamed) in str(caught.value) and ".part" not in str(caught.value)
    assert not (tmp_path / "index" / "files").exists() or list((tmp_path / "index" / "files").iterdir()) == []


def test_good_wheel_is_added(good: Path, tmp_path: Path):
    assert DirectoryIndex(tmp_path / "index").add(good).status == "added"


def test_cli_index_add_refuses_with_one_error_line(good: Path, tmp_path: Path):
    hostile = CASES["parent"](good)
    done = subprocess.run([sys.executable, "-m", "builder", "index", "add", str(hostile),
                           "--dir", str(tmp_path / "index"), "--no-deps"], capture_output=True, text=True)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "../../../../tmp/evil.py" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("name", "ok"), [
    ("demo/__init__.py", True), ("demo-1.0.data/scripts/x", True), ("a/../b", False), ("/x", False),
    ("./x", False), ("a//b", False), ("C:/x", False), ("a\\b", False), ("a\x00b", False), ("", False),
])
def test_entry_name_problem(name: str, ok: bool):
    assert (entry_name_problem(name) is None) == ok


def test_a_wheel_file_without_tag_lines_is_no_mismatch():
    """Nothing to disagree with (old bdist_wheel wrote none): pip goes by the name alone."""
    import io
    import zipfile

    from builder.index.wheelcheck import tag_mismatch
    from builder.index.wheelmeta import parse_filename

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("old-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        zf.writestr("mixed-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\nTag: py2-none-any\n")
    with zipfile.ZipFile(buf) as zf:
        assert tag_mismatch(zf, "old-1.0.dist-info", parse_filename("old-1.0-py3-none-any.whl")) is None
        assert tag_mismatch(zf, "mixed-1.0.dist-info", parse_filename("mixed-1.0-py2.py3-none-any.whl")) is None
        assert tag_mismatch(zf, "mixed-1.0.dist-info", parse_filename("mixed-1.0-py3-none-any.whl")) == (
            "file name tags py3-none-any but its mixed-1.0.dist-info/WHEEL says py3-none-any, py2-none-any")
