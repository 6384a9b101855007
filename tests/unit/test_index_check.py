"""`builder index check`: corrupt and missing files and orphan pages are named (exit 1);
--repair moves corrupt files aside and rewrites the pages; a corrupt published wheel is
replaced by a rebuilt one ("repaired"), not refused as a conflict."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import PackageIndexError
from builder.index.check import check_index
from builder.index.directory import DirectoryIndex
from tests.helpers_wheels import make_wheel


def check(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", "index", "check", "--dir", str(root), *extra],
                          capture_output=True, text=True)


def published(tmp_path: Path) -> tuple[DirectoryIndex, Path]:
    index = DirectoryIndex(tmp_path / "index")
    wheel = make_wheel(tmp_path / "src", "demo", "1.0", payload=b"x" * 4096)
    digest = index.add(wheel).sha256
    index.annotate(wheel.name, "subject", [{"name": wheel.name, "digest": {"sha256": digest}}])
    index.add(make_wheel(tmp_path / "src", "other", "2.0"))
    return index, wheel


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_clean_index_passes(tmp_path: Path):
    index, _ = published(tmp_path)
    done = check(index.root)
    assert done.returncode == 0, done.stderr
    assert "2 files match" in done.stderr


def test_truncated_wheel_is_named_then_repaired(tmp_path: Path):
    index, wheel = published(tmp_path)
    truncate(index.files_dir / wheel.name)
    done = check(index.root)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"corrupt {wheel.name}" in errors[0], done.stderr
    assert "Traceback" not in done.stderr

    repaired = check(index.root, "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert (index.root / "corrupt" / wheel.name).is_file()
    assert not (index.files_dir / wheel.name).exists()
    assert not (index.simple_dir / "demo").exists()  # its page went with it
    assert check(index.root).returncode == 0


def test_missing_file_and_orphan_page_are_named(tmp_path: Path):
    index, wheel = published(tmp_path)
    (index.files_dir / wheel.name).unlink()
    found = check_index(index)
    assert found.missing == [wheel.name] and found.orphan_pages == ["demo"]
    done = check(index.root)
    assert done.returncode == 1 and f"missing {wheel.name}" in done.stderr and "orphan page demo" in done.stderr


def test_bytes_differing_from_the_manifest_are_corrupt(tmp_path: Path):
    index, wheel = published(tmp_path)
    other = make_wheel(tmp_path / "v2", "demo", "1.0", payload=b"y" * 4096)  # valid wheel, other bytes
    shutil.copy(other, index.files_dir / wheel.name)
    found = check_index(index)
    assert list(found.corrupt) == [wheel.name] and "manifest records" in found.corrupt[wheel.name]


def test_add_replaces_a_corrupt_published_wheel_saying_repaired(tmp_path: Path):
    index, wheel = published(tmp_path)
    truncate(index.files_dir / wheel.name)
    result = index.add(wheel)
    assert result.status == "repaired"
    assert check_index(index).ok


def test_conflict_hint_names_a_real_flag(tmp_path: Path):
    index, _ = published(tmp_path)
    published_bytes = (index.files_dir / "other-2.0-py3-none-any.whl").read_bytes()
    other = make_wheel(tmp_path / "v2", "other", "2.0", payload=b"different")
    with pytest.raises(PackageIndexError) as caught:
        index.add(other)
    old, new = hashlib.sha256(published_bytes).hexdigest(), hashlib.sha256(other.read_bytes()).hexdigest()
    assert caught.value.message == (f"other-2.0-py3-none-any.whl is already published with different bytes "
                                    f"(sha256 {old[:12]}..., new {new[:12]}...)")
    assert caught.value.hint == ("`builder index add --replace` overwrites it; anyone who pinned the old hash "
                                 "will then fail to install")
    assert (index.files_dir / other.name).read_bytes() == published_bytes  # the published file stays
    assert check_index(index).ok


def mistag(tmp_path: Path, index: DirectoryIndex) -> str:
    """Put a wheel whose file name says manylinux_2_28 but whose WHEEL says linux_x86_64 into
    the index's files (as a hand rename would) and regenerate the pages."""
    built = make_wheel(tmp_path / "mistag", "native", "1.0", tag="cp311-cp311-linux_x86_64")
    name = built.name.replace("linux_x86_64", "manylinux_2_28_x86_64")
    shutil.copy(built, index.files_dir / name)
    index.regenerate()
    return name


def test_mistagged_wheel_is_one_finding_naming_both_tags(tmp_path: Path):
    index, _ = published(tmp_path)
    name = mistag(tmp_path, index)
    found = check_index(index)
    assert found.corrupt == {} and found.missing == [] and not found.ok
    assert found.mistagged == {name: "file name tags cp311-cp311-manylinux_2_28_x86_64 but its "
                                     "native-1.0.dist-info/WHEEL says cp311-cp311-linux_x86_64"}
    done = check(index.root)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"mistagged {name}" in errors[0], done.stderr
    assert "auditwheel addtag" in done.stderr and "Traceback" not in done.stderr
    # --repair leaves it (its bytes are what was published) and still fails
    again = check(index.root, "--repair")
    assert again.returncode == 1 and (index.files_dir / name).is_file()


def test_matching_compressed_tag_set_passes(tmp_path: Path):
    index = DirectoryIndex(tmp_path / "index")
    tag = "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"
    index.add(make_wheel(tmp_path / "src", "multi", "1.0", tag=tag))
    found = check_index(index)
    assert found.ok and found.mistagged == {}


def test_publishing_a_mistagged_wheel_is_refused(tmp_path: Path):
    built = make_wheel(tmp_path / "mistag", "native", "1.0", tag="cp311-cp311-linux_x86_64")
    renamed = built.with_name(built.name.replace("linux_x86_64", "manylinux_2_28_x86_64"))
    built.rename(renamed)
    index = DirectoryIndex(tmp_path / "index")
    with pytest.raises(PackageIndexError) as caught:
        index.add(renamed)
    assert caught.value.message == (f"{renamed}: file name tags cp311-cp311-manylinux_2_28_x86_64 but its "
                                    "native-1.0.dist-info/WHEEL says cp311-cp311-linux_x86_64")
    assert not index.files_dir.exists() or not list(index.files_dir.glob("*.whl"))
