"""builder.source.sdist: an sdist found in a simple index (served here by http.server on
127.0.0.1), downloaded once and checked, unpacked safely, its time and build requirements."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from builder.errors import BuildError, ConfigError
from builder.source import buildreqs
from builder.source.mirror import SourceTree
from builder.source.sdist import (
    IndexFile,
    Sdist,
    checkout_sdist,
    fetch_sdist,
    find_sdist,
    resolve_sdist,
    sdist_build_requirements,
    sdist_time,
    unpack_sdist,
)
from builder.store import DownloadStore

PYPROJECT = b'[build-system]\nrequires = ["setuptools>=64", "torch"]\nbuild-backend = "setuptools.build_meta"\n'


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def entry(name: str, mtime: int = 1_600_000_000, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime, info.type, info.linkname, info.mode = mtime, kind, link, 0o644
    return info


def good_sdist(path: Path) -> Path:
    return make_tar(path, [
        (entry("torch_spline_conv-1.2.2", kind=tarfile.DIRTYPE), None),
        (entry("torch_spline_conv-1.2.2/setup.py", 1_678_977_120), b"from setuptools import setup\nsetup()\n"),
        (entry("torch_spline_conv-1.2.2/pyproject.toml", 1_600_000_000), PYPROJECT),
        (entry("torch_spline_conv-1.2.2/csrc/basis.cpp", 1_650_000_000), b"int f() { return 1; }\n"),
    ])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Index:
    """A PEP 503 tree in a temp dir (PEP 691 JSON when a project has index.json), served on
    127.0.0.1; counts the requests for each path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits: dict[str, int] = {}
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):  # noqa: N802
                index.hits[self.path] = index.hits.get(self.path, 0) + 1
                page = root / self.path.strip("/") / "index.json"
                if self.path.endswith("/") and "json" in self.headers.get("Accept", "") and page.is_file():
                    body = page.read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, project: str, archive: Path, digest: str | None = None, json_page: bool = False) -> None:
        folder = self.root / "simple" / project
        folder.mkdir(parents=True, exist_ok=True)
        (folder / archive.name).write_bytes(archive.read_bytes())
        digest = sha256(archive) if digest is None else digest
        fragment = f"#sha256={digest}" if digest else ""
        (folder / "index.html").write_text(f'<html><body><a href="{archive.name}{fragment}">{archive.name}</a>\n'
                                           f'<a href="other-0.1-py3-none-any.whl">other-0.1-py3-none-any.whl</a>'
                                           "</body></html>\n")
        if json_page:
            (folder / "index.json").write_text(json.dumps({"meta": {"api-version": "1.0"}, "name": project, "files": [
                {"filename": archive.name, "url": archive.name, "hashes": {"sha256": digest}}]}))


@pytest.fixture
def index(tmp_path):
    served = Index(tmp_path / "served")
    yield served
    served.server.shutdown()
    served.server.server_close()


def test_resolve_downloads_once_and_checks_the_hash(index, tmp_path):
    archive = good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz")
    index.publish("torch-spline-conv", archive)
    cache = DownloadStore(tmp_path / "cache")
    found = resolve_sdist("torch-spline-conv", "1.2.2", index.url, cache)
    assert found.sha256 == sha256(archive)
    assert found.path == tmp_path / "cache" / "sha256" / found.sha256 / archive.name
    assert found.path.stat().st_mode & 0o777 == 0o644  # readable by a teammate sharing the cache
    assert found.path.read_bytes() == archive.read_bytes()
    assert found.url == index.url + "torch-spline-conv/torch_spline_conv-1.2.2.tar.gz"
    again = resolve_sdist("Torch_Spline.Conv", "1.2.2.0", index.url, cache)  # names normalized, versions PEP 440
    assert again.path == found.path
    assert index.hits["/simple/torch-spline-conv/torch_spline_conv-1.2.2.tar.gz"] == 1  # the cache answered
    assert not list(found.path.parent.glob(".tmp-*"))


def test_resolve_reads_pep_691_json(index, tmp_path):
    archive = good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz")
    index.publish("torch-spline-conv", archive, digest="0" * 64)  # the HTML page is wrong, the JSON right
    folder = index.root / "simple" / "torch-spline-conv"
    (folder / "index.json").write_text(json.dumps({"files": [
        {"filename": archive.name, "url": archive.name, "hashes": {"sha256": sha256(archive)}}]}))
    found = resolve_sdist("torch-spline-conv", "1.2.2", index.url, DownloadStore(tmp_path / "cache"))
    assert found.sha256 == sha256(archive)


def test_a_wrong_hash_is_refused_and_nothing_is_cached(index, tmp_path):
    archive = good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz")
    index.publish("torch-spline-conv", archive, digest="ab" * 32)
    with pytest.raises(BuildError, match="the index says abab") as info:
        resolve_sdist("torch-spline-conv", "1.2.2", index.url, DownloadStore(tmp_path / "cache"))
    assert "\n" not in str(info.value)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_missing_project_version_or_hash_are_one_line_errors(index, tmp_path):
    archive = good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz")
    index.publish("torch-spline-conv", archive)
    with pytest.raises(ConfigError, match="has no project 'nope'"):
        resolve_sdist("nope", "1.0", index.url, DownloadStore(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="torch-spline-conv 9.9 has no sdist") as info:
        resolve_sdist("torch-spline-conv", "9.9", index.url, DownloadStore(tmp_path / "cache"))
    assert "sdists there: 1.2.2" in str(info.value)
    with pytest.raises(ConfigError, match="is not a version"):
        resolve_sdist("torch-spline-conv", "main", index.url, DownloadStore(tmp_path / "cache"))
    index.publish("torch-spline-conv", archive, digest="")
    with pytest.raises(BuildError, match="no sha256"):
        resolve_sdist("torch-spline-conv", "1.2.2", index.url, DownloadStore(tmp_path / "cache"))


def test_find_sdist_takes_only_sdists_of_that_project_and_version():
    files = [IndexFile("torch_spline_conv-1.2.2-cp311-cp311-linux_x86_64.whl", "u1", "a"),
             IndexFile("torch_spline_conv_extra-1.2.2.tar.gz", "u2", "b"),
             IndexFile("torch-spline-conv-1.2.1.tar.gz", "u3", "c"),
             IndexFile("torch-spline-conv-1.2.2.zip", "u4", "d")]
    assert find_sdist(files, "torch-spline-conv", "1.2.2").url == "u4"  # type: ignore[union-attr]
    assert find_sdist(files, "torch-spline-conv", "1.2.1").url == "u3"  # type: ignore[union-attr]
    assert find_sdist(files, "torch-spline-conv", "1.3") is None


def local(path: Path) -> Sdist:
    return Sdist("p", "1.0", f"file://{path}", sha256(path), path)


@pytest.fixture(params=[True, False], ids=["data-filter", "no-filter"])
def tar_filter(request, monkeypatch):
    """Both unpack paths: tarfile's data filter (Python >= 3.11.4), and builder's own
    checks for a Python without it (Debian bookworm's python3 is 3.11.2)."""
    if not request.param:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def test_unpack_returns_the_root_and_cleans_dest_first(tmp_path, tar_filter):
    sdist = local(good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz"))
    dest = tmp_path / "src"
    (dest / "stale").mkdir(parents=True)
    (dest / "stale" / "old.o").write_text("x")
    root = unpack_sdist(sdist, dest)
    assert root == dest / "torch_spline_conv-1.2.2"
    assert sorted(p.name for p in dest.iterdir()) == ["torch_spline_conv-1.2.2"]
    assert (root / "csrc" / "basis.cpp").read_text().startswith("int f()")
    assert sdist_time(sdist) == 1_678_977_120  # the newest member


def test_build_requirements_are_read_from_the_archive_with_the_commit_parser(tmp_path):
    sdist = local(good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz"))
    reqs = sdist_build_requirements(sdist)
    root = unpack_sdist(sdist, tmp_path / "src")
    assert reqs == buildreqs.read_tree_build_requirements(root, "p-1.0")  # the same parser, the same answer
    assert reqs.backend == "setuptools.build_meta" and reqs.requirements == ("setuptools>=64", "torch")
    assert reqs.sources == ("pyproject.toml",) and not reqs.bazel_workspace
    legacy = local(make_tar(tmp_path / "q-1.0.tar.gz", [(entry("q-1.0/setup.py"), b"setup()\n")]))
    assert sdist_build_requirements(legacy).backend == buildreqs.LEGACY_BACKEND  # setup.py only: PEP 517's default
    assert sdist_build_requirements(legacy).requirements == ("setuptools>=40.8.0",)
    hostile = local(make_tar(tmp_path / "r-1.0.tar.gz", [(entry("r-1.0/requirements-build.txt"),
                                                         b"--index-url http://evil\n")]))
    with pytest.raises(BuildError, match="pip option"):
        sdist_build_requirements(hostile)
    flat = tmp_path / "s-1.0.zip"
    with zipfile.ZipFile(flat, "w") as archive:
        archive.writestr("s-1.0/pyproject.toml", PYPROJECT.decode())
    assert sdist_build_requirements(local(flat)).requirements == ("setuptools>=64", "torch")


def test_a_linked_requirements_file_is_not_followed_out_of_the_tree(tmp_path):
    outside = tmp_path / "secret.toml"
    outside.write_text('[build-system]\nrequires = ["evil"]\n')
    root = tmp_path / "tree"
    root.mkdir()
    (root / "pyproject.toml").symlink_to(outside)
    assert buildreqs.read_tree_build_requirements(root, "x").requirements == ("setuptools>=40.8.0",)


HOSTILE = {
    "absolute": [(entry("/etc/evil"), b"x")],
    "dotdot": [(entry("p-1.0/../../evil"), b"x")],
    "symlink-out": [(entry("p-1.0/link", kind=tarfile.SYMTYPE, link="../../etc"), None)],
    "symlink-absolute": [(entry("p-1.0/link", kind=tarfile.SYMTYPE, link="/etc/passwd"), None)],
    "hardlink-out": [(entry("p-1.0/hard", kind=tarfile.LNKTYPE, link="../outside"), None)],
    "device": [(entry("p-1.0/dev", kind=tarfile.CHRTYPE), None)],
    "fifo": [(entry("p-1.0/fifo", kind=tarfile.FIFOTYPE), None)],
    # each link looks harmless alone; through the first, the second leaves the tree
    # (p-1.0/a/../.. is "." on paper; on disk a is p-1.0 and the link points above the tree)
    "link-chain": [(entry("p-1.0/a", kind=tarfile.SYMTYPE, link="."), None),
                   (entry("p-1.0/a/b", kind=tarfile.SYMTYPE, link="../.."), None),
                   (entry("p-1.0/a/b/evil"), b"x")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tar_members_are_refused(tmp_path, case, tar_filter):
    sdist = local(make_tar(tmp_path / "p-1.0.tar.gz", HOSTILE[case]))
    with pytest.raises(BuildError) as info:
        unpack_sdist(sdist, tmp_path / "work" / "src")
    assert "\n" not in str(info.value) and "p-1.0.tar.gz" in str(info.value)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "work" / "evil").exists()
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("name", ["../evil", "/abs/evil", "p-1.0/../../evil", "C:/evil"])
def test_hostile_zip_members_are_refused(tmp_path, name):
    path = tmp_path / "p-1.0.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(name, "x")
    with pytest.raises(BuildError, match="refusing"):
        unpack_sdist(local(path), tmp_path / "work" / "src")
    assert not (tmp_path / "evil").exists()


def test_a_zip_sdist_unpacks_and_its_time_is_utc(tmp_path):
    path = tmp_path / "p-1.0.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("p-1.0/setup.py", date_time=(2023, 3, 16, 14, 32, 0)), "setup()\n")
    assert unpack_sdist(local(path), tmp_path / "src") == tmp_path / "src" / "p-1.0"
    assert sdist_time(local(path)) == 1678977120  # 2023-03-16T14:32:00Z


def test_a_truncated_archive_is_one_error(tmp_path):
    path = good_sdist(tmp_path / "p-1.0.tar.gz")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(BuildError, match="cannot unpack"):
        unpack_sdist(local(path), tmp_path / "src")


def test_checkout_gives_a_source_tree_like_a_commits(tmp_path, tar_filter):
    sdist = local(good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz"))
    tree = checkout_sdist(sdist, tmp_path / "src" / "spline")
    assert tree == SourceTree(tmp_path / "src" / "spline" / "torch_spline_conv-1.2.2", sdist.url, sdist.sha256,
                              1_678_977_120)


def test_fetch_a_recorded_sdist_by_url_and_hash(index, tmp_path):
    archive = good_sdist(tmp_path / "torch_spline_conv-1.2.2.tar.gz")
    index.publish("torch-spline-conv", archive)
    url, digest, cache = index.url + "torch-spline-conv/" + archive.name, sha256(archive), DownloadStore(tmp_path / "c")
    found = fetch_sdist(url, digest, cache)
    assert (found.project, found.version, found.path) == ("torch-spline-conv", "1.2.2",
                                                          tmp_path / "c" / "sha256" / digest / archive.name)
    assert fetch_sdist(url, digest, cache) == found
    assert index.hits["/simple/torch-spline-conv/" + archive.name] == 1  # the second came from the cache
    with pytest.raises(BuildError, match="the index says"):
        fetch_sdist(url, "0" * 64, cache)
    with pytest.raises(BuildError, match="does not name an sdist"):
        fetch_sdist(index.url + "x/notes.txt", digest, cache)
