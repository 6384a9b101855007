"""Real pip against builder's directory index: through file:// and through `builder index serve`.

pip runs with PIP_CONFIG_FILE=/dev/null and every PIP_* variable removed (this machine's
pip config adds mirrors and find-links that --index-url does not remove), with
--no-cache-dir, so a pass means the wheel came from builder's index and nowhere else.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import requests

from builder.errors import UploadError
from builder.index.directory import DirectoryIndex
from builder.index.upload import push_wheel
from tests.helpers_wheels import make_wheel

PROJECT = "Builder_Probe_Pkg"  # a name no mirror has
NORMALIZED = "builder-probe-pkg"


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def pip(*args: str, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    """This interpreter's pip, acting on ``python``'s environment when given (pip --python)."""
    target = ["--python", str(python)] if python else []
    return subprocess.run([sys.executable, "-m", "pip", *target, *args, "--no-cache-dir"],
                          env=clean_env(), capture_output=True, text=True, timeout=180)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def page_hashes(page: Path) -> dict[str, str]:
    """file name -> sha256, read from the links of a project page."""
    found: dict[str, str] = {}

    class P(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            href = dict(attrs).get("href") or ""
            if tag == "a" and "#sha256=" in href:
                link, digest = href.split("#sha256=")
                found[link.rsplit("/", 1)[-1]] = digest

    P().feed(page.read_text())
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh venv per module; pip is driven from outside with --python (saves ensurepip's 5 s)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    return root / "bin" / "python"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> DirectoryIndex:
    tmp = tmp_path_factory.mktemp("pipindex")
    index = DirectoryIndex(tmp / "index")
    index.add(make_wheel(tmp / "src", PROJECT, "1.0", requires_python=">=3.8", payload=b"one"))
    # 2.0 is newer but needs a Python that does not exist: pip must skip it because the page
    # says data-requires-python, and install 1.0.
    index.add(make_wheel(tmp / "src", PROJECT, "2.0", requires_python=">=99", payload=b"two"))
    return index


def installed_version(python: Path) -> str:
    done = subprocess.run([str(python), "-c", "import builder_probe_pkg as m; print(m.__version__)"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_pip_installs_from_the_file_index(index: DirectoryIndex, venv: Path) -> None:
    done = pip("install", "--index-url", index.simple_url(), NORMALIZED, python=venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Looking in indexes: {index.simple_url().rstrip('/')}" in done.stdout
    assert installed_version(venv) == "1.0"  # 2.0 skipped through data-requires-python


def test_pip_download_require_hashes_uses_the_page_hashes(index: DirectoryIndex, tmp_path: Path) -> None:
    hashes = page_hashes(index.simple_dir / NORMALIZED / "index.html")
    wheel = f"{PROJECT}-1.0-py3-none-any.whl"
    req = tmp_path / "req.txt"
    req.write_text(f"{NORMALIZED}==1.0 --hash=sha256:{hashes[wheel]}\n")
    done = pip("download", "--no-deps", "--require-hashes", "-r", str(req), "-d", str(tmp_path / "dl"),
               "--index-url", index.simple_url())
    assert done.returncode == 0, done.stdout + done.stderr
    got = tmp_path / "dl" / wheel
    assert hashlib.sha256(got.read_bytes()).hexdigest() == hashes[wheel] == \
        hashlib.sha256((index.files_dir / wheel).read_bytes()).hexdigest()

    req.write_text(f"{NORMALIZED}==1.0 --hash=sha256:{'0' * 64}\n")
    bad = pip("download", "--no-deps", "--require-hashes", "-r", str(req), "-d", str(tmp_path / "dl2"),
              "--index-url", index.simple_url())
    assert bad.returncode != 0 and "DO NOT MATCH THE HASHES" in bad.stderr


@pytest.fixture
def served(index: DirectoryIndex) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "builder", "index", "serve", "--port", str(port),
                             "--host", "127.0.0.1", "--dir", str(index.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                if requests.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "builder index serve did not come up"
            time.sleep(0.1)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_served_index_installs_refuses_uploads_and_stops_on_sigint(
        served: tuple[subprocess.Popen[str], str], index: DirectoryIndex, venv: Path, tmp_path: Path) -> None:
    proc, base = served
    simple = f"{base}/simple/"

    done = pip("install", "--force-reinstall", "--no-deps", "--index-url", simple, f"{NORMALIZED}==1.0",
               python=venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Looking in indexes: {simple.rstrip('/')}" in done.stdout
    assert installed_version(venv) == "1.0"

    hashes = page_hashes(index.simple_dir / NORMALIZED / "index.html")
    wheel = f"{PROJECT}-1.0-py3-none-any.whl"
    req = tmp_path / "req.txt"
    req.write_text(f"{NORMALIZED}==1.0 --hash=sha256:{hashes[wheel]}\n")
    done = pip("download", "--no-deps", "--require-hashes", "-r", str(req), "-d", str(tmp_path / "dl"),
               "--index-url", simple)
    assert done.returncode == 0, done.stdout + done.stderr
    assert hashlib.sha256((tmp_path / "dl" / wheel).read_bytes()).hexdigest() == hashes[wheel]

    # An unknown name is a 404, not a redirect to PyPI (--disable-fallback).
    resp = requests.get(f"{simple}requests/", allow_redirects=False, timeout=5)
    assert resp.status_code == 404

    # Without --auth the server is read-only, with or without credentials.
    intruder = make_wheel(tmp_path / "src", "Intruder", "1.0")
    for user, password in [(None, None), ("someone", "guess")]:
        with pytest.raises(UploadError, match="requires credentials|refused the credentials"):
            push_wheel(intruder, base + "/", user=user, password=password, retries=0)
    assert not (index.files_dir / intruder.name).exists()

    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert simple in out
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base}/health", timeout=2)


def test_twine_upload_to_auth_server_is_visible_to_file_users(tmp_path: Path, venv: Path) -> None:
    """pypiserver writes the upload into files/; builder regenerates simple/ under the index
    mutex, so pip through file:// (no find-links, no config) installs what twine uploaded."""
    from passlib.apache import HtpasswdFile

    index = DirectoryIndex(tmp_path / "index")
    index.regenerate()  # an empty index: the pages exist and list nothing
    htpasswd = HtpasswdFile(str(tmp_path / "htpasswd"), new=True)
    htpasswd.set_password("uploader", "s3cret")
    htpasswd.save()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "builder", "index", "serve", "--port", str(port),
                             "--host", "127.0.0.1", "--dir", str(index.root), "--auth", str(tmp_path / "htpasswd")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    err_lines: list[str] = []  # read as they come: the test waits for a line, not a sleep

    def read_err() -> None:
        for line in proc.stderr:
            err_lines.append(line)

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                if requests.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "builder index serve did not come up"
            time.sleep(0.1)
        wheel = make_wheel(tmp_path / "src", "Uploaded_Probe", "3.1", requires_python=">=3.8", payload=b"up")
        upload = subprocess.run([sys.executable, "-m", "twine", "upload", "--non-interactive", "--disable-progress-bar",
                                 "--repository-url", f"{base}/", "-u", "uploader", "-p", "s3cret", str(wheel)],
                                capture_output=True, text=True, timeout=120, env=clean_env())
        assert upload.returncode == 0, upload.stdout + upload.stderr
        # Project pages are written first, the root's index.json last, then the line: wait for
        # both, so the Ctrl-C below never cuts a regeneration short (an upload still growing
        # may also have triggered one that did not list it yet).
        root_json = index.simple_dir / "index.json"
        deadline = time.monotonic() + 15
        while not ("uploaded-probe" in root_json.read_text()
                   and any("index pages regenerated" in line for line in err_lines)):
            assert time.monotonic() < deadline, f"simple/ does not list the upload: {''.join(err_lines)}"
            time.sleep(0.2)
        page = index.simple_dir / "uploaded-probe" / "index.html"
        assert page.is_file() and wheel.name in page.read_text(), "simple/ pages do not list the uploaded wheel"
        assert "uploaded-probe" in (index.simple_dir / "index.html").read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        reader.join(timeout=5)

    done = pip("install", "--no-deps", "--index-url", index.simple_url(), "uploaded-probe==3.1", python=venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Looking in indexes: {index.simple_url().rstrip('/')}" in done.stdout
    assert "Successfully installed uploaded-probe-3.1" in done.stdout
