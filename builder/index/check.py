"""`builder index check`: every published file against the sha256 recorded for it.

A wheel can rot on disk (a truncated copy, a disk error, a hand edit). Pages that still
advertise its old hash make pip fail with a hash mismatch far from the cause; pages that
name files no longer there make it fail with a 404. This walks the files and the pages,
compares each file's bytes with its manifest's and its pages' sha256, and (with repair)
moves corrupt files aside and rewrites the pages from what is left. A wheel whose file
name's tags disagree with its WHEEL file's Tag lines is named too (pip installs by the
name, so such a wheel lands where its own metadata says it cannot run); repair leaves it.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import BuilderError
from builder.index.directory import MANIFEST_SUFFIX, DirectoryIndex, manifest_sha256
from builder.index.wheelcheck import filename_tags, tag_mismatch
from builder.index.wheelmeta import inspect_wheel, normalize_name, parse_filename, read_digests

CORRUPT_DIR = "corrupt"  # under the index root, outside files/ and simple/: never served


@dataclass
class IndexCheckReport:
    checked: int = 0
    corrupt: dict[str, str] = field(default_factory=dict)  # file name -> why
    missing: list[str] = field(default_factory=list)  # listed on a page, absent from files/
    orphan_pages: list[str] = field(default_factory=list)  # project pages with none of their files present
    # file name -> how its file name's tags and its WHEEL file's Tag lines disagree (kept in place by
    # --repair: the bytes are what was published, the labels are wrong; a rebuild or a retag fixes it)
    mistagged: dict[str, str] = field(default_factory=dict)
    moved: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.corrupt or self.missing or self.orphan_pages or self.mistagged)

    def problems(self) -> list[str]:
        return ([f"corrupt {name}: {why}" for name, why in sorted(self.corrupt.items())]
                + [f"missing {name}" for name in sorted(self.missing)]
                + [f"orphan page {page}" for page in sorted(self.orphan_pages)]
                + [f"mistagged {name}: {why}" for name, why in sorted(self.mistagged.items())])


def page_hashes(simple_dir: Path) -> dict[str, dict[str, str]]:
    """project page -> {file name: sha256} from each simple/<project>/index.json."""
    pages: dict[str, dict[str, str]] = {}
    if not simple_dir.is_dir():
        return pages
    for page in sorted(simple_dir.glob("*/index.json")):
        try:
            data = json.loads(page.read_text())
            files = {f["filename"]: (f.get("hashes") or {}).get("sha256", "") for f in data.get("files", [])}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            files = {}
        pages[page.parent.name] = files
    return pages


def check_index(index: DirectoryIndex, repair: bool = False) -> IndexCheckReport:
    report = IndexCheckReport()
    pages = page_hashes(index.simple_dir)
    listed = {name: sha for files in pages.values() for name, sha in files.items()}
    present = sorted(p for p in index.files_dir.glob("*.whl") if p.is_file() and not p.name.startswith(".")) \
        if index.files_dir.is_dir() else []
    names = {p.name for p in present}
    for path in present:
        report.checked += 1
        why = _corruption(index, path, listed.get(path.name))
        if why:
            report.corrupt[path.name] = why
            continue
        mismatch = _tag_mismatch(path)
        if mismatch:
            report.mistagged[path.name] = mismatch
    report.missing = sorted(name for name in listed if name not in names)
    report.orphan_pages = sorted(page for page, files in pages.items() if files and not set(files) & names)
    if repair and not report.ok:
        aside = index.root / CORRUPT_DIR
        for name in sorted(report.corrupt):
            aside.mkdir(exist_ok=True)
            for moved in (name, name + MANIFEST_SUFFIX):
                src = index.files_dir / moved
                if src.exists():
                    shutil.move(str(src), str(aside / moved))
            report.moved.append(str(aside / name))
        index.regenerate()
    return report


def _tag_mismatch(path: Path) -> str | None:
    """How a readable wheel's file-name tags and WHEEL Tag lines disagree, or None."""
    wheel = parse_filename(path.name)
    with zipfile.ZipFile(path) as zf:
        dist_infos = [n.split("/", 1)[0] for n in zf.namelist()
                      if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")
                      and normalize_name(n.split("-", 1)[0]) == wheel.normalized]
        if len(dist_infos) != 1:
            return f"file name tags {', '.join(filename_tags(wheel))} but it has no single .dist-info/WHEEL"
        return tag_mismatch(zf, dist_infos[0], wheel)


def _corruption(index: DirectoryIndex, path: Path, page_sha: str | None) -> str | None:
    try:
        parse_filename(path.name)
        actual = read_digests(path)["sha256"]
        inspect_wheel(path, sha256=actual)
    except BuilderError as exc:
        return f"unreadable ({exc})"
    try:
        recorded = manifest_sha256(index.manifest(path.name), path.name)
    except BuilderError as exc:
        return f"manifest unreadable ({exc})"
    if recorded and recorded != actual:
        return f"sha256 {actual[:12]}... but its manifest records {recorded[:12]}..."
    if page_sha and page_sha != actual:
        return f"sha256 {actual[:12]}... but its page lists {page_sha[:12]}..."
    return None
