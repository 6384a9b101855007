"""builder.index.upload.push_wheel and `builder push` against a real pypiserver and a real devpi-server.

Both servers bind 127.0.0.1 on free ports and live in tmp dirs. devpi is created with
--no-root-pypi and its index has no bases, so nothing here ever asks PyPI for anything.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from builder.errors import UploadError
from builder.index.upload import (
    MultipartBody,
    parse_simple_page,
    push_wheel,
    resolve_credentials,
    simple_base,
    split_credentials,
    upload_fields,
)
from builder.index.wheelmeta import inspect_wheel
from tests.conftest import venv_tool
from tests.helpers_wheels import make_wheel

PASSWORD = "s3cret-Pa55-do-not-print"


@dataclass(frozen=True)
class Server:
    kind: str
    url: str  # upload URL
    simple: str  # simple base
    user: str
    password: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited early:\n{log.read_text()}"
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout} s:\n{log.read_text()}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def pypiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with warnings.catch_warnings():  # passlib imports the deprecated crypt module; not ours to fix
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    tmp = tmp_path_factory.mktemp("pypiserver")
    htpasswd = HtpasswdFile(str(tmp / "htpasswd"), new=True)
    htpasswd.set_password("bob", PASSWORD)
    htpasswd.save()
    (tmp / "packages").mkdir()
    port = free_port()
    log = tmp / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port),
             "--disable-fallback", "-P", str(tmp / "htpasswd"), "-a", "update", str(tmp / "packages")],
            stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/health", proc, log)
        yield Server("pypiserver", f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/simple/",
                     "bob", PASSWORD)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("devpi")
    serverdir, secret = tmp / "server", tmp / "secret"
    env = {**os.environ, "DEVPI_CLIENTDIR": str(tmp / "client")}
    subprocess.run([venv_tool("devpi-gen-secret"), "--secretfile", str(secret)], check=True, env=env,
                   capture_output=True, timeout=60)
    subprocess.run([venv_tool("devpi-init"), "--serverdir", str(serverdir), "--root-passwd", "rootpw",
                    "--no-root-pypi"], check=True, env=env, capture_output=True, timeout=120)
    port = free_port()
    log = tmp / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([venv_tool("devpi-server"), "--serverdir", str(serverdir), "--host", "127.0.0.1",
                                 "--port", str(port), "--secretfile", str(secret)],
                                stdout=fh, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/+api", proc, log)
        r = requests.put(f"{base}/alice", json={"password": PASSWORD, "email": "alice@example.com"}, timeout=30)
        assert r.status_code == 201, r.text
        r = requests.put(f"{base}/alice/dev", auth=("alice", PASSWORD), timeout=30,
                         json={"type": "stage", "volatile": False, "bases": []})
        assert r.status_code == 200, r.text
        yield Server("devpi", f"{base}/alice/dev/", f"{base}/alice/dev/+simple/", "alice", PASSWORD)
    finally:
        stop(proc)


@pytest.fixture(params=["pypiserver", "devpi"])
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue(request.param)


def wheel_for(tmp_path: Path, server: Server, tag: str, payload: bytes = b"", sub: str = "src") -> Path:
    return make_wheel(tmp_path / sub, f"Up_{server.kind}_{tag}", "1.0", requires_python=">=3.8",
                      payload=payload)


def remote_sha256(server: Server, wheel: Path) -> str | None:
    info = inspect_wheel(wheel)
    page = f"{server.simple}{info.normalized}/"
    resp = requests.get(page, timeout=10)
    if resp.status_code == 404:
        return None
    assert resp.status_code == 200
    found = parse_simple_page(resp.text, resp.headers.get("Content-Type", ""), resp.url).get(wheel.name)
    return found.sha256 if found else None


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def clean_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


# --------------------------------------------------------------- real servers
def test_upload_lands_and_pip_gets_the_same_bytes(server: Server, tmp_path: Path) -> None:
    wheel = wheel_for(tmp_path, server, "lands", payload=os.urandom(4096))
    result = push_wheel(wheel, server.url, server.user, server.password)
    assert (result.status, result.attempts, result.sha256) == ("uploaded", 1, sha256(wheel))
    assert remote_sha256(server, wheel) == sha256(wheel)

    req = tmp_path / "req.txt"
    req.write_text(f"{inspect_wheel(wheel).normalized}==1.0 --hash=sha256:{sha256(wheel)}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "-r",
                           str(req), "-d", str(tmp_path / "dl"), "--index-url", server.simple, "--no-cache-dir"],
                          env=clean_pip_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sha256(tmp_path / "dl" / wheel.name) == sha256(wheel)


def test_second_push_of_identical_file_is_skipped(server: Server, tmp_path: Path) -> None:
    wheel = wheel_for(tmp_path, server, "dup")
    assert push_wheel(wheel, server.url, server.user, server.password).status == "uploaded"
    again = push_wheel(wheel, server.url, server.user, server.password)
    assert (again.status, again.attempts) == ("skipped", 0)


def test_same_name_different_bytes_is_a_conflict(server: Server, tmp_path: Path) -> None:
    first = wheel_for(tmp_path, server, "conflict", payload=b"first", sub="a")
    second = wheel_for(tmp_path, server, "conflict", payload=b"second", sub="b")
    assert first.name == second.name and sha256(first) != sha256(second)
    push_wheel(first, server.url, server.user, server.password)
    with pytest.raises(UploadError, match="conflict: .* already on .* with different bytes"):
        push_wheel(second, server.url, server.user, server.password)
    assert remote_sha256(server, first) == sha256(first)


class _MissFirstLookup(requests.Session):
    """Simulate a race: another pusher uploads between our look-up and our POST."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.page = page
        self.missed = False

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if method == "GET" and url == self.page and not self.missed:
            self.missed = True
            fake = requests.Response()
            fake.status_code, fake.url, fake.reason = 404, url, "Not Found"
            return fake
        return super().request(method, url, *args, **kwargs)


def test_upload_racing_an_identical_upload_is_not_an_error(server: Server, tmp_path: Path) -> None:
    wheel = wheel_for(tmp_path, server, "race")
    push_wheel(wheel, server.url, server.user, server.password)
    session = _MissFirstLookup(f"{server.simple}{inspect_wheel(wheel).normalized}/")
    result = push_wheel(wheel, server.url, server.user, server.password, session=session)
    assert session.missed
    # pypiserver answers 409 (then the re-check finds the same sha256); a non-volatile
    # devpi index answers 200 for an identical file, and the post-check confirms it.
    assert result.status == {"pypiserver": "skipped", "devpi": "uploaded"}[server.kind]
    assert remote_sha256(server, wheel) == sha256(wheel)


def test_upload_racing_a_different_upload_is_a_conflict(server: Server, tmp_path: Path) -> None:
    first = wheel_for(tmp_path, server, "race2", payload=b"first", sub="a")
    second = wheel_for(tmp_path, server, "race2", payload=b"second", sub="b")
    push_wheel(first, server.url, server.user, server.password)
    session = _MissFirstLookup(f"{server.simple}{inspect_wheel(first).normalized}/")
    with pytest.raises(UploadError, match="conflict"):
        push_wheel(second, server.url, server.user, server.password, session=session)
    assert session.missed
    assert remote_sha256(server, first) == sha256(first)


def test_wrong_password_is_a_clear_auth_error_without_the_password(server: Server, tmp_path: Path) -> None:
    wheel = wheel_for(tmp_path, server, "auth")
    wrong = "Wr0ng-" + PASSWORD
    with pytest.raises(UploadError, match=f"refused the credentials of user '{server.user}'") as exc:
        push_wheel(wheel, server.url, server.user, wrong, retries=0)
    text = f"{exc.value} {exc.value!r} {exc.value.hint}"
    assert wrong not in text and PASSWORD not in text
    assert "password" in (exc.value.hint or "")
    assert remote_sha256(server, wheel) is None


def test_credentials_from_netrc(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {server.user} password {server.password}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    wheel = wheel_for(tmp_path, server, "netrc")
    assert push_wheel(wheel, server.url).status == "uploaded"
    assert remote_sha256(server, wheel) == sha256(wheel)


def test_cli_push_end_to_end_never_prints_the_password(pypiserver: Server, tmp_path: Path) -> None:
    wheel = wheel_for(tmp_path, pypiserver, "cli")
    cli = [sys.executable, "-m", "builder", "push", str(wheel), "--to", pypiserver.url, "--user", "bob"]
    env = {**os.environ, "BUILDER_INDEX_PASSWORD": PASSWORD}
    first = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("uploaded") and wheel.name in first.stdout
    again = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.startswith("skipped")
    assert remote_sha256(pypiserver, wheel) == sha256(wheel)

    bad_password = "Nope-" + PASSWORD
    pw_file = tmp_path / "pw"
    pw_file.write_text(bad_password + "\n")
    other = wheel_for(tmp_path, pypiserver, "cli2")
    env.pop("BUILDER_INDEX_PASSWORD")
    bad = subprocess.run([*cli[:4], str(other), *cli[5:], "--password-file", str(pw_file), "--retries", "0"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert "error:" in bad.stderr and "refused the credentials of user 'bob'" in bad.stderr
    for out in (first, again, bad):
        assert PASSWORD not in out.stdout + out.stderr and bad_password not in out.stdout + out.stderr


# -------------------------------------------------------- failures, retries
def test_server_down_fails_clearly_after_retries(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    wheel = make_wheel(tmp_path, "Down", "1.0")
    sleeps: list[float] = []
    # How fast it gives up is a timing (bench/push_failure.py); here: the error, the attempts, the sleeps.
    with pytest.raises(UploadError, match=rf"{url} did not answer after 3 attempts \(connection refused\)"):
        push_wheel(wheel, url, "u", "p", retries=2, backoff=0.01, sleep=lambda s: sleeps.append(s))
    assert sleeps == [0.01, 0.02]


def test_5xx_answers_are_retried_then_reported(tmp_path: Path) -> None:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            hits.append(self.path)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/"
        with pytest.raises(UploadError, match=r"did not answer after 4 attempts \(HTTP 503"):
            push_wheel(make_wheel(tmp_path, "Busy", "1.0"), url, retries=3, backoff=0.001)
        assert len(hits) == 4
    finally:
        httpd.shutdown()
        httpd.server_close()


# ------------------------------------------------------------ pure helpers
def test_split_credentials_and_simple_base() -> None:
    assert split_credentials("http://u:p%40ss@h:8080/a/b/") == ("http://h:8080/a/b/", "u", "p@ss")
    assert split_credentials("http://h/") == ("http://h/", None, None)
    assert simple_base("http://h:3141/alice/dev", devpi=True) == "http://h:3141/alice/dev/+simple/"
    assert simple_base("http://h:8080/", devpi=False) == "http://h:8080/simple/"


def test_parse_simple_page_html_and_json() -> None:
    html = ('<a href="/packages/A-1.0-py3-none-any.whl#sha256=abc">A</a>'
            '<a href="../../+f/x/A-2.0-py3-none-any.whl#md5=def">A2</a>')
    found = parse_simple_page(html, "text/html", "http://h/simple/a/")
    assert found["A-1.0-py3-none-any.whl"].sha256 == "abc"
    assert found["A-1.0-py3-none-any.whl"].url == "http://h/packages/A-1.0-py3-none-any.whl"
    assert found["A-2.0-py3-none-any.whl"].sha256 is None  # md5 only: the client hashes the download
    data = '{"files": [{"filename": "A-1.0-py3-none-any.whl", "url": "f/A.whl", "hashes": {"sha256": "9"}}]}'
    assert parse_simple_page(data, "application/vnd.pypi.simple.v1+json", "http://h/s/a/")[
        "A-1.0-py3-none-any.whl"].sha256 == "9"


def test_multipart_body_length_matches_what_it_streams(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "Body", "1.0", size=3 * 1024 * 1024 + 7)
    info = inspect_wheel(wheel)
    body = MultipartBody(upload_fields(info, "0" * 32), wheel, wheel.name)
    data = b"".join(body)
    assert len(data) == len(body)
    assert wheel.read_bytes() in data and data.endswith(f"--{body.boundary}--\r\n".encode())
    assert b'name="sha256_digest"\r\n\r\n' + info.sha256.encode() in data


def test_resolve_credentials_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine h login nu password np\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    pw = tmp_path / "pw"
    pw.write_text("from-file\n")
    env = {"BUILDER_INDEX_PASSWORD": "from-env"}
    assert resolve_credentials("http://h/", "u", None, pw, env) == ("u", "from-file")
    assert resolve_credentials("http://h/", "u", None, None, env) == ("u", "from-env")
    assert resolve_credentials("http://h/", None, None, None, {}) == ("nu", "np")
    assert resolve_credentials("http://other/", "u", None, None, {}) == ("u", None)
    with pytest.raises(UploadError, match="no user name"):
        resolve_credentials("http://other/", None, None, None, env)
