"""One download cache shared by two uids of one group (builder.store), as a team shares
the ccache volume: a teammate's fresh data dir takes what the first uid downloaded, adds
files of its own the first uid then reads, and neither needs the other's permission.

The second uid is real: a forked child drops to nobody:nogroup (setresuid) and runs
builder's fetch and download in-process (the interpreter lives under /root, which that
uid cannot read, so no new process is started as it). Needs root, as `make test` is run.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from builder.index.directory import DirectoryIndex
from builder.index.download import cached, download
from builder.index.fetch import fetch
from builder.index.resolve import Pin
from builder.store import SHARED_DIR_MODE, DownloadStore
from tests.helpers_wheels import make_wheel

TEAMMATE = 65534  # nobody:nogroup, present on every Debian


def as_teammate(work) -> dict:  # noqa: ANN001 - a callable returning JSON-able data
    """Run ``work()`` in a forked child as uid/gid 65534 with no other group; its result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        code = 0
        try:
            os.setgroups([])
            os.setresgid(TEAMMATE, TEAMMATE, TEAMMATE)
            os.setresuid(TEAMMATE, TEAMMATE, TEAMMATE)
            payload = {"ok": work()}
        except BaseException as exc:  # reported to the parent, which fails the test
            payload, code = {"error": f"{type(exc).__name__}: {exc}"}, 1
        with os.fdopen(write, "w") as out:
            out.write(json.dumps(payload))
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as incoming:
        data = json.loads(incoming.read() or "{}")
    os.waitpid(pid, 0)
    assert "error" not in data, data.get("error")
    return data["ok"]


@pytest.fixture()
def team():
    if os.geteuid() != 0:
        pytest.fail("this test acts as a second uid (setresuid): run it as root, as `make test` runs")
    root = Path(tempfile.mkdtemp(prefix="builder-test-team-"))  # not under pytest's 0700 tmp dirs
    os.chmod(root, 0o755)
    upstream = DirectoryIndex(root / "upstream")  # the teammate reads its files too
    for name, version in (("six", "1.17.0"), ("absl_py", "2.3.1")):
        upstream.add(make_wheel(root / "src", name, version))
    cache = root / "downloads"  # the team's directory: group nogroup, setgid, group-writable
    cache.mkdir()
    os.chown(cache, 0, TEAMMATE)
    os.chmod(cache, SHARED_DIR_MODE)
    mine = root / "teammate"
    mine.mkdir()
    os.chown(mine, TEAMMATE, TEAMMATE)
    umask = os.umask(0o022)  # the usual default: group write must not depend on the umask
    try:
        yield upstream, cache, root, mine
    finally:
        os.umask(umask)
        shutil.rmtree(root)


def test_two_uids_share_one_download_cache(team):
    upstream, cache, root, mine = team
    url = upstream.simple_url()
    first = fetch(["six==1.17.0"], DirectoryIndex(root / "first-index"), cache, "3.11", url, [])
    assert [(i.pin.filename, i.status) for i in first.items] == [("six-1.17.0-py3-none-any.whl", "downloaded")]
    sha256_dir = cache / "sha256"
    assert stat.S_IMODE(sha256_dir.stat().st_mode) == SHARED_DIR_MODE and sha256_dir.stat().st_gid == TEAMMATE

    absl = next(e for e in upstream.entries() if e.filename.startswith("absl_py"))
    absl_pin = Pin("absl-py", "2.3.1", absl.filename, (upstream.files_dir / absl.filename).as_uri(), absl.sha256)

    def teammate() -> dict:
        fresh = fetch(["six==1.17.0"], DirectoryIndex(mine / "index"), cache, "3.11", url, [])
        added = download(absl_pin, DownloadStore(cache)).path
        return {"statuses": [i.status for i in fresh.items], "offline": fresh.offline,
                "index": sorted(e.filename for e in DirectoryIndex(mine / "index").entries()),
                "added": str(added), "uid": added.stat().st_uid, "gid": added.stat().st_gid,
                "mode": stat.S_IMODE(added.stat().st_mode),
                "dir_mode": stat.S_IMODE(added.parent.stat().st_mode)}

    seen = as_teammate(teammate)
    # the teammate's fresh data dir took six from the cache, the recorded resolution with it
    assert seen["statuses"] == ["cached"] and seen["offline"] is True
    assert seen["index"] == ["six-1.17.0-py3-none-any.whl"]
    # what the teammate added is theirs, readable by all, in a directory the group shares
    assert Path(seen["added"]) == DownloadStore(cache).path(absl.sha256, absl.filename)
    assert (seen["uid"], seen["gid"], seen["mode"], seen["dir_mode"]) == (TEAMMATE, TEAMMATE, 0o644,
                                                                           SHARED_DIR_MODE)
    # and the first uid reads it as a cache hit
    assert cached(absl_pin, DownloadStore(cache)) == Path(seen["added"])
