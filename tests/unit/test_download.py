"""builder.index.download with file:// pins (no network): checked, renamed whole, recorded,
at its content path in the user's download cache (builder.store)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from builder.errors import BuildError
from builder.files import TEMP_PREFIX
from builder.index.download import cached, cached_sha256, download, remove_stale_parts
from builder.index.resolve import Pin
from builder.store import SHARED_DIR_MODE, DownloadStore, download_cache, user_cache_dir


def pin_for(path, sha256=None) -> Pin:
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if sha256 is None else sha256
    return Pin("demo", "1.0", "demo-1.0-py3-none-any.whl", path.as_uri(), digest)


def test_a_download_lands_whole_with_its_record(tmp_path):
    upstream = tmp_path / "up" / "demo-1.0-py3-none-any.whl"
    upstream.parent.mkdir()
    upstream.write_bytes(b"wheel" * 300_000)  # more than one chunk
    cache = tmp_path / "cache"
    seen = []
    pin = pin_for(upstream)
    done = download(pin, DownloadStore(cache), lambda name, done, total: seen.append((done, total)))
    dest = cache / "sha256" / pin.sha256 / "demo-1.0-py3-none-any.whl"
    assert done.path == dest and done.size == upstream.stat().st_size and dest.read_bytes() == upstream.read_bytes()
    assert seen[-1] == (done.size, done.size)
    record = json.loads((dest.parent / (dest.name + ".sha256")).read_text())
    assert record["sha256"] == hashlib.sha256(dest.read_bytes()).hexdigest() and record["url"] == upstream.as_uri()
    assert cached_sha256(dest) == record["sha256"] and cached(pin, DownloadStore(cache)) == dest
    assert [p.name for p in cache.rglob("*") if p.name.startswith(TEMP_PREFIX)] == []
    assert dest.stat().st_mode & 0o777 == 0o644


def test_a_hash_mismatch_discards_the_file(tmp_path):
    upstream = tmp_path / "demo-1.0-py3-none-any.whl"
    upstream.write_bytes(b"tampered")
    cache = tmp_path / "cache"
    with pytest.raises(BuildError, match="the upstream page says 0000"):
        download(pin_for(upstream, "0" * 64), DownloadStore(cache))
    assert [p for p in cache.rglob("*") if p.is_file()] == []


def test_stale_partial_downloads_are_removed_fresh_ones_kept(tmp_path):
    stale, fresh = tmp_path / f"{TEMP_PREFIX}a.whl.x1.part", tmp_path / f"{TEMP_PREFIX}b.whl.x2.part"
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    old = time.time() - 2 * 24 * 3600
    os.utime(stale, (old, old))
    remove_stale_parts(DownloadStore(tmp_path))
    assert not stale.exists() and fresh.exists()


def test_the_cache_is_the_users_not_the_data_dirs():
    assert user_cache_dir({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}) == Path("/x/cache/builder")
    # the spec: a relative XDG_CACHE_HOME is ignored, as is an empty one
    assert user_cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/builder")
    assert user_cache_dir({"XDG_CACHE_HOME": "", "HOME": "/h"}) == Path("/h/.cache/builder")
    assert download_cache("", {"HOME": "/h"}) == Path("/h/.cache/builder/downloads")
    assert download_cache("/srv/team-downloads", {"HOME": "/h"}) == Path("/srv/team-downloads")


def test_a_pin_is_found_by_its_content_and_a_flat_cache_file_moves_in(tmp_path):
    upstream = tmp_path / "demo-1.0-py3-none-any.whl"
    upstream.write_bytes(b"the wheel")
    pin, store = pin_for(upstream), DownloadStore(tmp_path / "cache")
    assert cached(pin, store) is None
    # the layout before content addressing: <cache>/<filename>, checked against the pin
    flat = store.root / pin.filename
    flat.parent.mkdir()
    flat.write_bytes(b"the wheel")
    assert cached(pin, store) == store.path(pin.sha256, pin.filename) and not flat.exists()
    # same name, other bytes: not this pin's file
    flat.write_bytes(b"another wheel")
    other = Pin("demo", "1.0", pin.filename, upstream.as_uri(), hashlib.sha256(b"another wheel").hexdigest())
    store.path(pin.sha256, pin.filename).unlink()
    assert cached(pin, store) is None and flat.exists()
    assert cached(other, store) == store.path(other.sha256, pin.filename)
    # no upstream hash: nothing to look up by, always downloaded
    assert cached(Pin("demo", "1.0", pin.filename, upstream.as_uri(), ""), store) is None


def test_directories_are_shared_with_the_group_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        store = DownloadStore(tmp_path / "cache")
        made = store.make_dir(store.path("ab" * 32, "x.whl").parent)
    finally:
        os.umask(old)
    for directory in (store.root, store.root / "sha256", made):
        assert directory.stat().st_mode & 0o7777 == SHARED_DIR_MODE, directory
    # a directory that was there is not changed (it may be a teammate's)
    os.chmod(made, 0o755)
    store.make_dir(made)
    assert made.stat().st_mode & 0o7777 == 0o755


def test_a_record_this_uid_cannot_write_is_skipped_not_fatal(tmp_path, monkeypatch):
    """A teammate's directory this uid may not write (a cache shared across groups): the
    file is used, its record is simply not written (root writes anywhere, so the refusal
    is the write's own)."""
    import builder.index.download as module

    upstream = tmp_path / "demo-1.0-py3-none-any.whl"
    upstream.write_bytes(b"the wheel")
    pin, store = pin_for(upstream), DownloadStore(tmp_path / "cache")
    path = download(pin, store).path
    (path.parent / (path.name + ".sha256")).unlink()

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(module, "atomic_write", refused)
    assert cached(pin, store) == path
    assert not (path.parent / (path.name + ".sha256")).exists()
