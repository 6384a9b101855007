"""A PEP 503 package index that is just a directory: pip reads it through file://.

Layout under ``root``::

    files/<wheel>                   the wheels, never rewritten in place
    files/<wheel>.manifest.json     what the caller recorded about it (e.g. the build key)
    simple/index.html               every project (PEP 503), plus index.json (PEP 691)
    simple/<project>/index.html     links ../../files/<wheel>#sha256=<hex>
    .meta/<wheel>.json              cached digest and METADATA, so pages need no re-hash
    .lock                           the mutex: one writer at a time (a filelock.FileLock)

Why this shape: a build pushes a multi-GiB wheel and the next stage installs it with
``pip --index-url file://.../simple``; pip needs nothing but static files, and a copy,
``rsync`` or ``builder index serve`` publishes the same tree. A wheel is copied into a
temporary file beside its final name, fsync'ed and renamed (builder.files), so a reader
sees the old file or the new one, never half of one; pages (builder.index.pages renders
them) are rewritten the same way under the mutex, so two builds adding different wheels
at once both end up listed.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

from builder.errors import BuilderError, ConfigError, PackageIndexError, ValidationError
from builder.files import atomic_write, copy_to_temp, replace_durably
from builder.index.pages import Entry, project_json, render_project_page, render_root_page, root_json, version_key
from builder.index.wheelcheck import check_wheel_contents
from builder.index.wheelmeta import WheelInfo, inspect_wheel, normalize_name, parse_filename, read_metadata

MANIFEST_SUFFIX = ".manifest.json"

AddStatus = Literal["added", "unchanged", "replaced", "repaired"]  # repaired: a corrupt file was replaced


@dataclass(frozen=True)
class AddResult:
    filename: str
    sha256: str
    status: AddStatus


class DirectoryIndex:
    """A directory index rooted at ``root`` (created on the first add)."""

    def __init__(self, root: Path | str, mutex_timeout: float = 600.0) -> None:
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():  # else `index list` says "no wheels" of a file
            raise ConfigError(f"the index directory {self.root} is a file, not a directory",
                              "point [index] dir (or --dir) at a directory; builder creates it when missing")
        self.files_dir = self.root / "files"
        self.simple_dir = self.root / "simple"
        self._meta_dir = self.root / ".meta"
        self._mutex_path = self.root / ".lock"
        self._mutex_timeout = mutex_timeout

    # ----------------------------------------------------------------- URLs
    def simple_url(self) -> str:
        """The ``--index-url`` for pip: ``file:///.../simple/``."""
        return self.simple_dir.as_uri() + "/"

    def project_url(self, name: str) -> str:
        return f"{self.simple_url()}{normalize_name(name)}/"

    def file_url(self, filename: str) -> str:
        parse_filename(filename)
        return (self.files_dir / filename).as_uri()

    # ------------------------------------------------------------- writing
    def add(self, path: Path | str, manifest: dict[str, Any] | None = None,
            replace: bool = False) -> AddResult:
        """Publish a wheel; idempotent for identical bytes, refusing different ones unless ``replace``.

        A wheel's file name is its identity for pip: silently swapping its bytes would
        break every ``--require-hashes`` lock that recorded the old digest. An existing
        manifest is kept when the bytes are unchanged (first publication wins); a
        replaced wheel's old manifest is dropped with it.
        """
        src = Path(path)
        wheel = parse_filename(src.name)
        manifest_text = _manifest_text(manifest)
        if not src.is_file():
            raise PackageIndexError(f"{src}: no such file")
        # Checked on the user's own file, before a byte is copied: errors name it, not a temp copy.
        read_metadata(src, wheel)
        check_wheel_contents(src, wheel)
        self._ensure_dirs()
        tmp, digest = self._copy_to_temp(src, wheel.filename)
        try:
            info = inspect_wheel(tmp, sha256=digest, filename=wheel.filename)
            with self._exclusive():
                status = self._commit(tmp, info, manifest_text, replace)
                self._rewrite_pages()
        finally:
            tmp.unlink(missing_ok=True)
        return AddResult(wheel.filename, digest, status)

    def _commit(self, tmp: Path, info: WheelInfo, manifest_text: str | None,
                replace: bool) -> AddStatus:
        dest = self.files_dir / info.filename
        manifest_path = self.files_dir / (info.filename + MANIFEST_SUFFIX)
        status: AddStatus = "added"
        if dest.exists():
            current = self._record(dest)
            if self._is_corrupt(dest, current):
                status = "repaired"  # its bytes no longer match what was published: not a conflict
            elif current is not None and current["sha256"] == info.sha256:
                if manifest_text is not None and not manifest_path.exists():
                    _publish(manifest_path, manifest_text)
                elif manifest_text is not None:
                    self._note_equivalent_key(manifest_path, json.loads(manifest_text))
                return "unchanged"
            elif not replace:
                old = current["sha256"] if current else "unreadable"
                raise PackageIndexError(
                    f"{info.filename} is already published with different bytes "
                    f"(sha256 {old[:12]}..., new {info.sha256[:12]}...)",
                    "`builder index add --replace` overwrites it; anyone who pinned "
                    "the old hash will then fail to install",
                )
            else:
                status = "replaced"
        replace_durably(tmp, dest)
        self._write_record(dest, info)
        if manifest_text is not None:
            _publish(manifest_path, manifest_text)
        elif status in ("replaced", "repaired"):
            manifest_path.unlink(missing_ok=True)
        return status

    def _is_corrupt(self, dest: Path, current: dict[str, Any] | None) -> bool:
        """Unreadable, or its bytes differ from the sha256 its own manifest recorded."""
        if current is None:
            return True
        try:
            recorded = manifest_sha256(self._read_manifest(dest.name), dest.name)
        except PackageIndexError:
            return False
        return recorded is not None and recorded != current["sha256"]

    def _note_equivalent_key(self, manifest_path: Path, new: dict[str, Any]) -> None:
        """Identical bytes from another build key (e.g. a new image with the same compilers):
        keep the first manifest, and record the key so that build is reused next time."""
        key = new.get("build_key")
        existing = json.loads(manifest_path.read_text())
        keys = existing.setdefault("equivalent_build_keys", [])
        if key and key != existing.get("build_key") and key not in keys:
            keys.append(key)
            _publish(manifest_path, _manifest_text(existing) or "")

    def annotate(self, filename: str, field: str, value: Any) -> None:
        """Record a check's result (e.g. the XLA smoke figures) in a published wheel's
        manifest, under ``field``; the wheel itself is never touched."""
        parse_filename(filename)
        if not (self.files_dir / filename).is_file():
            raise PackageIndexError(f"{filename} is not in the index at {self.root}")
        manifest_path = self.files_dir / (filename + MANIFEST_SUFFIX)
        with self._exclusive():
            existing = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
            existing[field] = value
            _publish(manifest_path, _manifest_text(existing) or "")

    def prune(self, keep: int) -> list[str]:
        """Keep the ``keep`` newest versions of each project; return the removed file names."""
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValidationError(f"keep must be a whole number >= 1, got {keep!r}",
                                  "to empty the index, delete its directory")
        if not self.files_dir.is_dir():
            return []
        removed: list[str] = []
        with self._exclusive():
            by_project: dict[str, list[Entry]] = {}
            for entry in self._scan_entries():
                by_project.setdefault(entry.normalized, []).append(entry)
            for entries in by_project.values():
                versions = sorted({version_key(e.version) for e in entries}, reverse=True)
                doomed = set(versions[keep:])
                for entry in entries:
                    if version_key(entry.version) in doomed:
                        self._remove_files(entry.filename)
                        removed.append(entry.filename)
            self._rewrite_pages()
        return sorted(removed)

    def regenerate(self) -> None:
        """Rewrite every page from the files present (after a manual copy, say)."""
        self._ensure_dirs()
        with self._exclusive():
            self._rewrite_pages()

    # ------------------------------------------------------------- reading
    def entries(self) -> list[Entry]:
        """Every published wheel, sorted by project then version."""
        if not self.files_dir.is_dir():
            return []
        with self._exclusive():
            return self._scan_entries()

    def find_by_key(self, key: str) -> Entry | None:
        """The newest wheel whose manifest records ``"build_key": key``, if any."""
        matches = [e for e in self.entries() if e.manifest and (
            e.manifest.get("build_key") == key or key in e.manifest.get("equivalent_build_keys", []))]
        if not matches:
            return None
        return max(matches, key=lambda e: (version_key(e.version), e.filename))

    def manifest(self, filename: str) -> dict[str, Any] | None:
        """The manifest recorded for a published wheel (None when none was recorded)."""
        parse_filename(filename)  # refuses ../ and anything that is not a bare wheel name
        if not (self.files_dir / filename).is_file():
            raise PackageIndexError(f"{filename} is not in the index at {self.root}",
                                    "see `builder index list`")
        return self._read_manifest(filename)

    # ------------------------------------------------------------ internals
    def _ensure_dirs(self) -> None:
        for d in (self.root, self.files_dir, self.simple_dir, self._meta_dir):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise PackageIndexError(f"cannot create {d}: {exc.strerror or exc}") from None

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the index mutex (one writer at a time); OSErrors inside become one clear PackageIndexError."""
        mutex = FileLock(self._mutex_path, timeout=self._mutex_timeout)
        try:
            mutex.acquire()
        except Timeout:
            raise PackageIndexError(f"the index at {self.root} is held by another process",
                                    f"wait for it, or remove {self._mutex_path} if no builder is running") from None
        except OSError as exc:
            raise PackageIndexError(f"cannot lock the index at {self.root}: {exc.strerror or exc}") from None
        try:
            yield
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise PackageIndexError(f"index at {self.root}: {exc.strerror or exc}{where}") from None
        finally:
            mutex.release()

    def _copy_to_temp(self, src: Path, filename: str) -> tuple[Path, str]:
        """The wheel copied beside its final name, hashed on the way; renamed later, under the mutex."""
        try:
            return copy_to_temp(src, self.files_dir / filename, mode=0o644)
        except OSError as exc:
            raise PackageIndexError(f"cannot copy {src} into {self.files_dir}: {exc.strerror or exc}") from None

    def _record_path(self, filename: str) -> Path:
        return self._meta_dir / f"{filename}.json"

    def _write_record(self, path: Path, info: WheelInfo) -> dict[str, Any]:
        st = path.stat()
        record = {
            "filename": info.filename, "name": info.name, "normalized": info.normalized,
            "version": info.version, "sha256": info.sha256, "requires_python": info.requires_python,
            "metadata_version": info.metadata_version, "size": st.st_size,
            "mtime_ns": st.st_mtime_ns, "ino": st.st_ino,
        }
        self._meta_dir.mkdir(parents=True, exist_ok=True)
        _publish(self._record_path(info.filename), json.dumps(record, indent=1) + "\n")
        return record

    def _record(self, path: Path) -> dict[str, Any] | None:
        """The cached facts about a wheel; re-read (and re-hashed) when the file changed."""
        try:
            st = path.stat()
            record = json.loads(self._record_path(path.name).read_text())
            if (record.get("size"), record.get("mtime_ns"), record.get("ino")) == (
                    st.st_size, st.st_mtime_ns, st.st_ino):
                return record
        except (OSError, ValueError):
            pass
        try:
            info = inspect_wheel(path)
        except BuilderError:
            return None  # a broken file someone dropped into files/: not listed
        return self._write_record(path, info)

    def _read_manifest(self, filename: str) -> dict[str, Any] | None:
        path = self.files_dir / (filename + MANIFEST_SUFFIX)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise PackageIndexError(f"{path}: unreadable manifest ({exc})") from None
        return data if isinstance(data, dict) else {"value": data}

    def _scan_entries(self) -> list[Entry]:
        entries = []
        for path in sorted(self.files_dir.glob("*.whl")):
            if path.name.startswith(".") or not path.is_file():
                continue
            try:
                parse_filename(path.name)
            except BuilderError:
                continue
            record = self._record(path)
            if record is None:
                continue
            entries.append(Entry(
                name=record["name"], version=record["version"], filename=path.name,
                sha256=record["sha256"], requires_python=record.get("requires_python"),
                manifest=self._read_manifest(path.name), normalized=record["normalized"],
                size=record["size"],
            ))
        entries.sort(key=lambda e: (e.normalized, version_key(e.version), e.filename))
        return entries

    def _remove_files(self, filename: str) -> None:
        (self.files_dir / filename).unlink(missing_ok=True)
        (self.files_dir / (filename + MANIFEST_SUFFIX)).unlink(missing_ok=True)
        self._record_path(filename).unlink(missing_ok=True)

    def _rewrite_pages(self) -> None:
        entries = self._scan_entries()
        projects: dict[str, list[Entry]] = {}
        for entry in entries:
            projects.setdefault(entry.normalized, []).append(entry)
        self.simple_dir.mkdir(parents=True, exist_ok=True)
        for normalized, project_entries in projects.items():
            page_dir = self.simple_dir / normalized
            page_dir.mkdir(exist_ok=True)
            _publish(page_dir / "index.html", render_project_page(normalized, project_entries))
            _publish(page_dir / "index.json",
                          json.dumps(project_json(normalized, project_entries), indent=1) + "\n")
        _publish(self.simple_dir / "index.html", render_root_page(sorted(projects)))
        _publish(self.simple_dir / "index.json",
                      json.dumps(root_json(sorted(projects)), indent=1) + "\n")
        for child in self.simple_dir.iterdir():
            if child.is_dir() and child.name not in projects:
                shutil.rmtree(child)  # a project whose last wheel was pruned


# ----------------------------------------------------------------- small helpers
def manifest_sha256(manifest: dict[str, Any] | None, filename: str) -> str | None:
    """The sha256 a wheel's manifest recorded for it (its in-toto subject, or a prebuilt's upstream hash)."""
    if not manifest:
        return None
    for subject in manifest.get("subject") or []:
        if isinstance(subject, dict) and subject.get("name") == filename:
            digest = (subject.get("digest") or {}).get("sha256")
            if isinstance(digest, str):
                return digest
    prebuilt = manifest.get("prebuilt")
    if isinstance(prebuilt, dict) and isinstance(prebuilt.get("upstream_sha256"), str):
        return prebuilt["upstream_sha256"]
    return None


def _manifest_text(manifest: dict[str, Any] | None) -> str | None:
    if manifest is None:
        return None
    if not isinstance(manifest, dict):
        raise ValidationError(f"a manifest must be a JSON object (dict), got {type(manifest).__name__}")
    try:
        return json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"the manifest is not JSON-serializable: {exc}") from None


def _publish(path: Path, text: str) -> None:
    """A page, record or manifest, replaced whole (builder.files), world-readable for a web server."""
    atomic_write(path, text, mode=0o644)
