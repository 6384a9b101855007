"""builder.index.download with file:// pins (no network): checked, renamed whole, recorded."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from builder.errors import BuildError
from builder.files import TEMP_PREFIX
from builder.index.download import cached_sha256, download, remove_stale_parts
from builder.index.resolve import Pin


def pin_for(path, sha256=None) -> Pin:
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if sha256 is None else sha256
    return Pin("demo", "1.0", "demo-1.0-py3-none-any.whl", path.as_uri(), digest)


def test_a_download_lands_whole_with_its_record(tmp_path):
    upstream = tmp_path / "up" / "demo-1.0-py3-none-any.whl"
    upstream.parent.mkdir()
    upstream.write_bytes(b"wheel" * 300_000)  # more than one chunk
    cache = tmp_path / "cache"
    cache.mkdir()
    seen = []
    size = download(pin_for(upstream), cache, lambda name, done, total: seen.append((done, total)))
    dest = cache / "demo-1.0-py3-none-any.whl"
    assert size == upstream.stat().st_size and dest.read_bytes() == upstream.read_bytes()
    assert seen[-1] == (size, size)
    record = json.loads((cache / (dest.name + ".sha256")).read_text())
    assert record["sha256"] == hashlib.sha256(dest.read_bytes()).hexdigest() and record["url"] == upstream.as_uri()
    assert cached_sha256(dest) == record["sha256"]
    assert [p.name for p in cache.iterdir() if p.name.startswith(TEMP_PREFIX)] == []


def test_a_hash_mismatch_discards_the_file(tmp_path):
    upstream = tmp_path / "demo-1.0-py3-none-any.whl"
    upstream.write_bytes(b"tampered")
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(BuildError, match="the upstream page says 0000"):
        download(pin_for(upstream, "0" * 64), cache)
    assert list(cache.iterdir()) == []


def test_stale_partial_downloads_are_removed_fresh_ones_kept(tmp_path):
    stale, fresh = tmp_path / f"{TEMP_PREFIX}a.whl.x1.part", tmp_path / f"{TEMP_PREFIX}b.whl.x2.part"
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    old = time.time() - 2 * 24 * 3600
    os.utime(stale, (old, old))
    remove_stale_parts(tmp_path)
    assert not stale.exists() and fresh.exists()
