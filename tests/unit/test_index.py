"""builder.index.directory.DirectoryIndex: pages, idempotence, conflicts, prune, concurrency; index CLI; serve argv."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

import builder.cli.index  # noqa: F401  (registers the commands on `app`)
from builder.cli.common import app
from builder.errors import PackageIndexError, ValidationError
from builder.index.directory import DirectoryIndex
from builder.index.serve import server_command
from tests.helpers_wheels import make_wheel

CLI = [sys.executable, "-m", "builder"]


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.anchors.append((self._open, data))
            self._open = None


def anchors(page: Path) -> list[tuple[dict[str, str | None], str]]:
    parser = _Anchors()
    parser.feed(page.read_text())
    return parser.anchors


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.startswith(".tmp-") or p.name.endswith(".part")]


@pytest.fixture
def index(tmp_path: Path) -> DirectoryIndex:
    return DirectoryIndex(tmp_path / "index")


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return tmp_path / "src"


def test_pages_are_pep503_with_normalized_names_hashes_and_requires_python(
        index: DirectoryIndex, src: Path) -> None:
    index.add(make_wheel(src, "Foo_Bar", "1.0", requires_python=">=3.8"))
    index.add(make_wheel(src, "Foo_Bar", "2.0", requires_python=">=3.9,<4"))
    index.add(make_wheel(src, "Other.Pkg", "0.1"))

    root_links = anchors(index.simple_dir / "index.html")
    assert [(a["href"], text) for a, text in root_links] == [("foo-bar/", "foo-bar"), ("other-pkg/", "other-pkg")]
    assert sorted(p.name for p in index.simple_dir.iterdir() if p.is_dir()) == ["foo-bar", "other-pkg"]

    page = index.simple_dir / "foo-bar" / "index.html"
    links = anchors(page)
    assert [text for _, text in links] == ["Foo_Bar-1.0-py3-none-any.whl", "Foo_Bar-2.0-py3-none-any.whl"]
    for attrs, text in links:
        href = attrs["href"]
        assert href is not None
        target, _, fragment = href.partition("#")
        assert target == f"../../files/{text}"
        served = (page.parent / target).resolve()
        assert served == (index.files_dir / text).resolve() and served.is_file()
        assert fragment == f"sha256={sha256(served)}"
    assert links[0][0]["data-requires-python"] == ">=3.8"
    assert links[1][0]["data-requires-python"] == ">=3.9,<4"
    raw = page.read_text()
    assert 'data-requires-python="&gt;=3.8"' in raw and 'data-requires-python="&gt;=3.9,&lt;4"' in raw
    assert "data-requires-python" not in (index.simple_dir / "other-pkg" / "index.html").read_text()

    data = json.loads((index.simple_dir / "foo-bar" / "index.json").read_text())
    assert data["name"] == "foo-bar" and data["versions"] == ["1.0", "2.0"]
    assert [(f["filename"], f["hashes"]["sha256"], f.get("requires-python")) for f in data["files"]] == [
        (text, (attrs["href"] or "").split("sha256=")[1], attrs.get("data-requires-python"))
        for attrs, text in links
    ]
    assert json.loads((index.simple_dir / "index.json").read_text())["projects"] == [
        {"name": "foo-bar"}, {"name": "other-pkg"}]
    assert index.simple_url() == (index.root / "simple").as_uri() + "/"
    assert index.project_url("Foo_Bar") == index.simple_url() + "foo-bar/"
    assert no_temp_files(index.root)


def test_adding_the_same_bytes_twice_is_unchanged(index: DirectoryIndex, src: Path) -> None:
    wheel = make_wheel(src, "Foo_Bar", "1.0")
    first = index.add(wheel, manifest={"build_key": "k1"})
    published = index.files_dir / wheel.name
    before = published.stat()
    second = index.add(wheel, manifest={"build_key": "k2"})
    assert (first.status, second.status) == ("added", "unchanged")
    assert first.sha256 == second.sha256 == sha256(wheel)
    after = published.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # The first publication's record is kept; the second key is noted as equivalent,
    # so a build with that key finds the wheel next time.
    assert index.manifest(wheel.name) == {"build_key": "k1", "equivalent_build_keys": ["k2"]}
    assert index.find_by_key("k2").filename == wheel.name
    assert len(index.entries()) == 1


def test_different_bytes_under_the_same_name_are_refused(index: DirectoryIndex, tmp_path: Path) -> None:
    original = make_wheel(tmp_path / "a", "Foo_Bar", "1.0", payload=b"first")
    rebuilt = make_wheel(tmp_path / "b", "Foo_Bar", "1.0", payload=b"second")
    assert original.name == rebuilt.name and sha256(original) != sha256(rebuilt)
    index.add(original, manifest={"build_key": "old"})
    page_before = (index.simple_dir / "foo-bar" / "index.html").read_text()

    with pytest.raises(PackageIndexError, match="already published with different bytes") as exc:
        index.add(rebuilt)
    assert "--replace" in str(exc.value)
    assert sha256(index.files_dir / original.name) == sha256(original)
    assert (index.simple_dir / "foo-bar" / "index.html").read_text() == page_before
    assert index.manifest(original.name) == {"build_key": "old"}
    assert no_temp_files(index.root)


def test_replace_overwrites_and_updates_the_page(index: DirectoryIndex, tmp_path: Path) -> None:
    original = make_wheel(tmp_path / "a", "Foo_Bar", "1.0", payload=b"first")
    rebuilt = make_wheel(tmp_path / "b", "Foo_Bar", "1.0", payload=b"second")
    index.add(original, manifest={"build_key": "old"})
    result = index.add(rebuilt, replace=True)
    assert result.status == "replaced" and result.sha256 == sha256(rebuilt)
    assert sha256(index.files_dir / rebuilt.name) == sha256(rebuilt)
    [(attrs, _)] = anchors(index.simple_dir / "foo-bar" / "index.html")
    assert (attrs["href"] or "").endswith(f"#sha256={sha256(rebuilt)}")
    assert index.manifest(rebuilt.name) is None  # the old build's record went with the old bytes
    assert index.find_by_key("old") is None


@pytest.mark.parametrize("name", [
    "../Foo-1.0-py3-none-any.whl", "../../etc/passwd", "files/../../x-1.0-py3-none-any.whl",
    "..\\Foo-1.0-py3-none-any.whl", "/etc/Foo-1.0-py3-none-any.whl",
], ids=lambda name: name.replace("\\", "<bs>"))  # an id with a backslash cannot be selected again (make mutate)
def test_path_traversal_names_are_refused(index: DirectoryIndex, src: Path, name: str) -> None:
    index.add(make_wheel(src, "Foo", "1.0"))
    with pytest.raises(PackageIndexError, match="bare wheel file name|not a valid wheel"):
        index.manifest(name)
    with pytest.raises(PackageIndexError):
        index.file_url(name)


def test_hidden_or_bad_file_names_cannot_be_added(index: DirectoryIndex, src: Path, tmp_path: Path) -> None:
    good = make_wheel(src, "Foo", "1.0")
    hidden = tmp_path / ".Foo-1.0-py3-none-any.whl"
    hidden.write_bytes(good.read_bytes())
    with pytest.raises(PackageIndexError, match="bare wheel file name"):
        index.add(hidden)
    not_wheel = tmp_path / "Foo-1.0.tar.gz"
    not_wheel.write_bytes(b"x")
    with pytest.raises(PackageIndexError):
        index.add(not_wheel)
    assert index.entries() == []


def test_corrupt_wheel_is_refused_and_leaves_nothing_behind(index: DirectoryIndex, src: Path,
                                                             tmp_path: Path) -> None:
    index.add(make_wheel(src, "Foo", "1.0"))
    bad = tmp_path / "Foo-2.0-py3-none-any.whl"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(PackageIndexError, match="not a wheel"):
        index.add(bad)
    assert sorted(p.name for p in index.files_dir.iterdir()) == ["Foo-1.0-py3-none-any.whl"]
    assert no_temp_files(index.root)


def test_manifest_and_find_by_key(index: DirectoryIndex, src: Path) -> None:
    index.add(make_wheel(src, "torch", "2.5.0"), manifest={"build_key": "aaa", "sha": "1" * 40})
    index.add(make_wheel(src, "torch_xla", "2.5.0"), manifest={"build_key": "bbb"})
    index.add(make_wheel(src, "torch", "2.6.0"))
    hit = index.find_by_key("aaa")
    assert hit is not None and hit.filename == "torch-2.5.0-py3-none-any.whl"
    assert hit.manifest == {"build_key": "aaa", "sha": "1" * 40}
    assert index.find_by_key("bbb").filename == "torch_xla-2.5.0-py3-none-any.whl"  # type: ignore[union-attr]
    assert index.find_by_key("nope") is None
    assert index.manifest("torch-2.6.0-py3-none-any.whl") is None
    with pytest.raises(PackageIndexError, match="not in the index"):
        index.manifest("torch-9.9-py3-none-any.whl")
    with pytest.raises(ValidationError):
        index.add(make_wheel(src, "x", "1"), manifest={"bad": object()})  # type: ignore[dict-item]


def test_prune_keeps_the_newest_versions_by_pep440_order(index: DirectoryIndex, src: Path) -> None:
    for version in ["1.0", "1.10", "1.2", "2.0rc1", "2.0"]:
        index.add(make_wheel(src, "Foo", version))
    index.add(make_wheel(src, "Foo", "2.0", tag="cp311-cp311-linux_x86_64"))  # two files, one version
    index.add(make_wheel(src, "Bar", "0.1"))
    removed = index.prune(keep=2)
    assert removed == ["Foo-1.0-py3-none-any.whl", "Foo-1.10-py3-none-any.whl", "Foo-1.2-py3-none-any.whl"]
    left = [(e.normalized, e.version) for e in index.entries()]
    assert left == [("bar", "0.1"), ("foo", "2.0rc1"), ("foo", "2.0"), ("foo", "2.0")]
    listed = [text for _, text in anchors(index.simple_dir / "foo" / "index.html")]
    assert listed == ["Foo-2.0rc1-py3-none-any.whl", "Foo-2.0-cp311-cp311-linux_x86_64.whl",
                      "Foo-2.0-py3-none-any.whl"]
    assert sorted(p.name for p in index.files_dir.iterdir() if p.name.startswith("Foo-1")) == []
    assert index.prune(keep=2) == []
    with pytest.raises(ValidationError):
        index.prune(keep=0)


def _add_many(root: str, wheels: list[str], barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    index = DirectoryIndex(root)
    for w in wheels:
        index.add(w)


def test_concurrent_adds_from_two_processes_all_land(tmp_path: Path) -> None:
    root = tmp_path / "index"
    batches = [[str(make_wheel(tmp_path / f"src{p}", f"proj{p}_{i}", "1.0", payload=os.urandom(2000)))
                for i in range(8)] for p in range(2)]
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_add_many, args=(str(root), batch, barrier)) for batch in batches]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    names = [text for _, text in anchors(root / "simple" / "index.html")]
    assert names == sorted(f"proj{p}-{i}" for p in range(2) for i in range(8))
    for batch in batches:
        for w in batch:
            links = anchors(root / "simple" / Path(w).name.split("-")[0].replace("_", "-") / "index.html")
            assert [(a["href"] or "").split("#sha256=")[1] for a, _ in links] == [sha256(Path(w))]
    assert no_temp_files(root)


def test_concurrent_cli_adds_both_land(tmp_path: Path) -> None:
    root = tmp_path / "index"
    a = make_wheel(tmp_path / "a", "Alpha", "1.0")
    b = make_wheel(tmp_path / "b", "Beta", "1.0")
    procs = [subprocess.Popen([*CLI, "index", "add", str(w), "--dir", str(root)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in (a, b)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "added" in outputs[0][0] and "added" in outputs[1][0]
    assert [text for _, text in anchors(root / "simple" / "index.html")] == ["alpha", "beta"]


def test_cli_list_show_prune(tmp_path: Path) -> None:
    index = DirectoryIndex(tmp_path / "index")
    src = tmp_path / "src"
    index.add(make_wheel(src, "Foo_Bar", "1.0"), manifest={"build_key": "k"})
    index.add(make_wheel(src, "Foo_Bar", "2.0", requires_python=">=3.8"))
    runner = CliRunner()
    d = ["--dir", str(index.root)]

    listed = runner.invoke(app, ["index", "list", "--json", *d])
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.stdout)
    assert [(e["filename"], e["requires_python"], e["manifest"]) for e in data] == [
        ("Foo_Bar-1.0-py3-none-any.whl", None, {"build_key": "k"}),
        ("Foo_Bar-2.0-py3-none-any.whl", ">=3.8", None)]

    from_config = runner.invoke(app, ["index", "list", "--json"], env={"BUILDER_INDEX_DIR": str(index.root)})
    assert from_config.exit_code == 0 and json.loads(from_config.stdout) == data  # --dir defaults to config

    shown = runner.invoke(app, ["index", "show", "Foo_Bar-1.0-py3-none-any.whl", *d])
    assert shown.exit_code == 0 and json.loads(shown.stdout) == {"build_key": "k"}
    bad = runner.invoke(app, ["index", "show", "../../etc/passwd", *d])
    assert bad.exit_code == 1 and "error:" in bad.stderr

    pruned = runner.invoke(app, ["index", "prune", "--keep", "1", *d])
    assert pruned.exit_code == 0 and "removed Foo_Bar-1.0-py3-none-any.whl" in pruned.stdout
    assert [e.version for e in index.entries()] == ["2.0"]

    added = runner.invoke(app, ["index", "add", str(make_wheel(src, "Foo_Bar", "2.0", payload=b"!")), *d])
    assert added.exit_code == 1 and "already published with different bytes" in added.stderr


def test_serve_command_is_read_only_without_auth(tmp_path: Path) -> None:
    cmd = server_command(tmp_path, host="127.0.0.1", port=8123, python="py")
    assert cmd.argv[:4] == ["py", "-m", "pypiserver", "run"]
    assert "--disable-fallback" in cmd.argv and "-P" not in cmd.argv
    assert cmd.argv[cmd.argv.index("-a") + 1] == "update"  # with no password file: nobody may upload
    assert cmd.argv[cmd.argv.index("-i") + 1] == "127.0.0.1" and cmd.argv[cmd.argv.index("-p") + 1] == "8123"
    assert cmd.argv[-1] == str(tmp_path.absolute() / "files")
    assert cmd.url == "http://127.0.0.1:8123/simple/" and cmd.health_url == "http://127.0.0.1:8123/health"


def test_serve_command_with_auth_and_bad_values(tmp_path: Path) -> None:
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text("")
    cmd = server_command(tmp_path, port=9000, auth=htpasswd)
    assert cmd.argv[cmd.argv.index("-P") + 1] == str(htpasswd) and cmd.argv[cmd.argv.index("-a") + 1] == "update"
    with pytest.raises(ValidationError, match="does not exist"):
        server_command(tmp_path, auth=tmp_path / "missing")
    for host in ["-x", "a b", "127.0.0.1;rm", ""]:
        with pytest.raises(ValidationError):
            server_command(tmp_path, host=host)
    for port in [0, 70000, True]:
        with pytest.raises(ValidationError):
            server_command(tmp_path, port=port)  # type: ignore[arg-type]


def test_annotate_records_a_check_in_the_manifest(index: DirectoryIndex, src: Path) -> None:
    wheel = make_wheel(src, "Foo_Bar", "1.0")
    index.add(wheel, manifest={"build_key": "k1"})
    before = sha256(index.files_dir / wheel.name)
    index.annotate(wheel.name, "xla_smoke", {"compiles": 1, "executions": 6})
    assert index.manifest(wheel.name) == {"build_key": "k1", "xla_smoke": {"compiles": 1, "executions": 6}}
    assert sha256(index.files_dir / wheel.name) == before
    with pytest.raises(PackageIndexError):
        index.annotate("Other-1.0-py3-none-any.whl", "x", 1)
