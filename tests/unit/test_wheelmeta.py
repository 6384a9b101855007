"""builder.index.wheelmeta: file names, METADATA, digests, and refusing non-wheels."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from builder.errors import PackageIndexError
from builder.index.wheelmeta import (
    inspect_wheel,
    normalize_name,
    parse_filename,
    read_digests,
)
from tests.helpers_wheels import make_wheel


@pytest.mark.parametrize(("raw", "normalized"), [
    ("Foo_Bar", "foo-bar"), ("foo.bar", "foo-bar"), ("FOO--_.bar", "foo-bar"),
    ("torch_xla", "torch-xla"), ("torch", "torch"), ("A1", "a1"),
])
def test_normalize_name_follows_pep_503(raw: str, normalized: str) -> None:
    assert normalize_name(raw) == normalized


def test_parse_filename_splits_tags_and_build() -> None:
    w = parse_filename("torch_xla-2.5.0+cpu-1-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert (w.name, w.normalized, w.version, w.build) == ("torch_xla", "torch-xla", "2.5.0+cpu", "1")
    assert (w.python_tag, w.abi_tag, w.platform_tag) == ("cp311", "cp311", "manylinux_2_28_x86_64")
    w = parse_filename("Foo_Bar-1.0-py3-none-any.whl")
    assert (w.normalized, w.version, w.build, w.python_tag) == ("foo-bar", "1.0", None, "py3")


@pytest.mark.parametrize("bad", [
    "../Foo-1.0-py3-none-any.whl", "a/Foo-1.0-py3-none-any.whl", "..\\Foo-1.0-py3-none-any.whl",
    ".Foo-1.0-py3-none-any.whl", "Foo-1.0.tar.gz", "Foo-1.0-py3-none.whl", "Foo-1.0-py3-none-any.whl\n",
    "Foo-1.0-py3-none-any.whl;rm -rf", "",
])
def test_parse_filename_refuses_paths_and_non_wheels(bad: str) -> None:
    with pytest.raises(PackageIndexError):
        parse_filename(bad)


def test_inspect_wheel_reads_metadata_and_digest(tmp_path: Path) -> None:
    path = make_wheel(tmp_path, "Foo_Bar", "1.0", requires_python=">=3.8", payload=b"x" * 100)
    info = inspect_wheel(path)
    assert info.filename == "Foo_Bar-1.0-py3-none-any.whl"
    assert (info.name, info.normalized, info.version) == ("Foo_Bar", "foo-bar", "1.0")
    assert info.requires_python == ">=3.8"
    assert info.metadata_version == "2.1"
    assert info.python_tag == "py3"
    assert info.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info.size == path.stat().st_size


def test_inspect_wheel_without_requires_python(tmp_path: Path) -> None:
    info = inspect_wheel(make_wheel(tmp_path, "plain", "0.1"))
    assert info.requires_python is None


def test_an_unreadable_file_is_the_index_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone-1.0-py3-none-any.whl"
    with pytest.raises(PackageIndexError, match=f"{missing}: cannot read the file"):
        read_digests(missing, ("sha256", "md5"))


def test_corrupt_zip_is_a_clear_error(tmp_path: Path) -> None:
    good = make_wheel(tmp_path / "src", "Foo", "1.0")
    bad = tmp_path / good.name
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # truncated: no central directory
    with pytest.raises(PackageIndexError, match="not a valid zip file"):
        inspect_wheel(bad)


def test_text_file_named_like_a_wheel_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "Foo-1.0-py3-none-any.whl"
    bad.write_text("this is not a zip\n")
    with pytest.raises(PackageIndexError, match="is not a wheel"):
        inspect_wheel(bad)


def test_zip_without_dist_info_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "Foo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("foo/__init__.py", "")
    with pytest.raises(PackageIndexError, match=r"no top-level \*\.dist-info/METADATA"):
        inspect_wheel(bad)


def test_metadata_name_must_match_file_name(tmp_path: Path) -> None:
    good = make_wheel(tmp_path / "src", "Foo", "1.0")
    renamed = tmp_path / "Bar-1.0-py3-none-any.whl"
    renamed.write_bytes(good.read_bytes())
    # The .dist-info is Foo's, so the lookup by file name finds Foo's METADATA and refuses.
    with pytest.raises(PackageIndexError, match="METADATA names project 'Foo'"):
        inspect_wheel(renamed)


def test_metadata_version_must_match_file_name(tmp_path: Path) -> None:
    good = make_wheel(tmp_path / "src", "Foo", "1.0")
    renamed = tmp_path / "Foo-2.0-py3-none-any.whl"
    renamed.write_bytes(good.read_bytes())
    with pytest.raises(PackageIndexError, match="METADATA says version '1.0'"):
        inspect_wheel(renamed)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PackageIndexError, match="no such file"):
        inspect_wheel(tmp_path / "Foo-1.0-py3-none-any.whl")


def test_remove_stale_work_dir_only_removes_a_child_of_the_work_root(tmp_path):
    from builder.run.wheelstep import remove_stale_work_dir

    root = tmp_path / "work"
    stale = root / "torch-abc"
    stale.mkdir(parents=True)
    (stale / "dist").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert remove_stale_work_dir(root, str(stale)) and not stale.exists()
    assert not remove_stale_work_dir(root, str(outside)) and outside.is_dir()
    assert not remove_stale_work_dir(root, str(root / ".." / "elsewhere")) and outside.is_dir()
    assert not remove_stale_work_dir(root, "")


def test_a_dead_runs_container_is_reaped_from_its_own_data_dir_only(tmp_path):
    """Any run removes a dead run's container without a work dir (a smoke, a name lock); one
    naming a work dir is removed only by a run of the data dir that holds it (the build's
    data_dir/work/..., a verify's data_dir/verify/.../work/...), which removes the work dir
    with it. A run of another data dir leaves both: removed from there, the work dir would stay
    on disk with nothing naming it (a shuffled run saw the other worker reap a killed build's
    container first)."""
    from builder.run.wheelstep import WORK_DIR_LABEL, reaped_here

    data = tmp_path / "data"
    assert reaped_here({}, data) and reaped_here({"builder.step": "smoke"}, data)
    assert reaped_here({WORK_DIR_LABEL: str(data / "work" / "torch-abc")}, data)
    assert reaped_here({WORK_DIR_LABEL: str(data / "verify" / "rebuild-1" / "work" / "torch-abc")}, data)
    assert not reaped_here({WORK_DIR_LABEL: str(tmp_path / "other" / "work" / "torch-abc")}, data)
    assert not reaped_here({WORK_DIR_LABEL: str(tmp_path / "data-2" / "work" / "torch-abc")}, data)
    assert not reaped_here({WORK_DIR_LABEL: str(data)}, data)  # the data dir itself is no work dir in it
