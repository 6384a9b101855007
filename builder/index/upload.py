"""Idempotent upload of wheels to a remote index (pypiserver, devpi) by the legacy API.

twine refuses ``--skip-existing`` for anything but PyPI, and pypiserver does not check
the ``sha256_digest`` it is sent, so "already there?" and "did it land intact?" are
builder's own job: look the file up on the target's simple page first (same name and
same sha256: nothing to do; same name, other bytes: a conflict that must not be papered
over), upload by streaming the file (a torch wheel is GiBs; it is never read into
memory), then look again. Passwords travel only in the Authorization header and never
appear in a message.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import requests

from builder import __version__, validate
from builder.errors import UploadError, ValidationError
from builder.files import CHUNK
from builder.index.wheelmeta import WheelInfo, inspect_wheel, read_digests

PASSWORD_ENV = "BUILDER_INDEX_PASSWORD"
_ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
           "text/html;q=0.1")
_AUTH_HINT = (f"check --user and the password ({PASSWORD_ENV}, --password-file or ~/.netrc) "
              "and that the user may upload to this index")


@dataclass(frozen=True)
class UploadTarget:
    """Where to POST and where the project pages are, for one remote index."""

    upload_url: str
    simple_url: str  # ends with "/"; project pages are <simple_url><name>/

    def project_url(self, normalized: str) -> str:
        return f"{self.simple_url}{normalized}/"


@dataclass(frozen=True)
class RemoteFile:
    filename: str
    url: str
    sha256: str | None


@dataclass(frozen=True)
class PushResult:
    filename: str
    sha256: str
    url: str  # the upload URL, without credentials
    status: Literal["uploaded", "skipped"]
    attempts: int  # HTTP upload attempts (0 when skipped)


# ---------------------------------------------------------------- pure helpers
def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``http://u:p@host/x/`` -> (``http://host/x/``, u, p); messages only ever show the first."""
    shown = re.sub(r"(?<=://)[^/?#]*@", "***@", url)  # what a message may echo: never the password
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # http://[::1/ and other broken IPv6 literals
        raise ValidationError(f"index URL {shown!r} is not a valid URL ({exc})") from None
    try:
        port = parts.port
    except ValueError:
        raise ValidationError(f"index URL {shown!r} has an invalid port") from None
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, unquote(parts.username or "") or None, unquote(parts.password or "") or None


def simple_base(upload_url: str, devpi: bool) -> str:
    """devpi: ``http://h/user/index/`` -> ``.../user/index/+simple/``; pypiserver: ``<root>/simple/``."""
    base = upload_url if upload_url.endswith("/") else upload_url + "/"
    return base + ("+simple/" if devpi else "simple/")


def resolve_credentials(
    url: str,
    user: str | None = None,
    password: str | None = None,
    password_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str | None, str | None]:
    """(user, password) from: the argument, --password-file, $BUILDER_INDEX_PASSWORD, ~/.netrc."""
    environ = os.environ if environ is None else environ
    if password is None and password_file is not None:
        try:
            password = Path(password_file).expanduser().read_text().strip("\r\n")
        except OSError as exc:
            raise UploadError(f"cannot read the password file {password_file}: {exc.strerror or exc}") from None
    if password is None and environ.get(PASSWORD_ENV):
        password = environ[PASSWORD_ENV]
    if password is None:
        netrc = requests.utils.get_netrc_auth(url)
        if netrc and (user is None or netrc[0] == user):
            user, password = netrc[0] or user, netrc[1]
    if password is not None and not user:
        raise UploadError("a password was given but no user name", "pass --user USER")
    return user, password


def parse_simple_page(text: str, content_type: str, page_url: str) -> dict[str, RemoteFile]:
    """Files listed on a PEP 691 JSON or PEP 503 HTML project page, by file name."""
    found: dict[str, RemoteFile] = {}
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UploadError(f"{page_url} answered invalid JSON ({exc})") from None
        for item in data.get("files", []):
            name = item.get("filename")
            if isinstance(name, str):
                sha = (item.get("hashes") or {}).get("sha256")
                found[name] = RemoteFile(name, urljoin(page_url, item.get("url", "")), sha)
        return found
    parser = _LinkParser()
    parser.feed(text)
    for href in parser.hrefs:
        link, _, fragment = href.partition("#")
        name = unquote(link.rstrip("/").rsplit("/", 1)[-1])
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        found[name] = RemoteFile(name, urljoin(page_url, link), sha)
    return found


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def upload_fields(info: WheelInfo, md5: str) -> list[tuple[str, str]]:
    """The legacy upload API's form fields (what twine sends, minus optional metadata)."""
    fields = [
        (":action", "file_upload"), ("protocol_version", "1"),
        ("name", info.name), ("version", info.version), ("filetype", "bdist_wheel"),
        ("pyversion", info.python_tag), ("metadata_version", info.metadata_version),
        ("sha256_digest", info.sha256), ("md5_digest", md5),
    ]
    if info.requires_python:
        fields.append(("requires_python", info.requires_python))
    return fields


class MultipartBody:
    """A multipart/form-data body streamed from disk with a known Content-Length.

    requests' ``files=`` builds the whole body in memory; this yields 1 MiB chunks, and
    its ``__len__`` makes requests send Content-Length instead of chunked encoding
    (which pypiserver's servers do not all accept).
    """

    def __init__(self, fields: list[tuple[str, str]], path: Path, filename: str) -> None:
        self.boundary = uuid.uuid4().hex
        self.path = path
        head = b"".join(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode()
            + v.encode() + b"\r\n" for k, v in fields
        )
        head += (f'--{self.boundary}\r\nContent-Disposition: form-data; name="content"; '
                 f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n').encode()
        self.head = head
        self.tail = f"\r\n--{self.boundary}--\r\n".encode()
        self.size = path.stat().st_size

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        with open(self.path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk
        yield self.tail


# ------------------------------------------------------------------ the client
class _Client:
    """One session against one target, with retries for transient failures."""

    def __init__(self, url: str, auth: tuple[str, str] | None, retries: int, backoff: float,
                 timeout: float, session: requests.Session | None,
                 sleep: Callable[[float], None]) -> None:
        self.url = url
        self.auth = auth
        self.retries = max(0, retries)
        self.backoff = backoff
        self.timeout = timeout
        self.sleep = sleep
        self.attempts = 0
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = f"builder/{__version__}"

    def request(self, method: str, url: str, what: str, **kwargs: Any) -> requests.Response:
        """Send, retrying connection errors and 5xx with exponential backoff."""
        body_factory = kwargs.pop("body_factory", None)
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            if body_factory is not None:
                kwargs["data"], kwargs.setdefault("headers", {})["Content-Type"] = body_factory()
            try:
                resp = self.session.request(method, url, auth=self.auth, allow_redirects=True,
                                            timeout=(min(10.0, self.timeout), self.timeout), **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                last = _short_reason(exc)
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code} {resp.reason}"
                continue
            self.attempts = attempt + 1
            return resp
        raise UploadError(f"{what} failed: {url} did not answer after {self.retries + 1} attempts ({last})",
                          "is the index server running and reachable?")

    def check_auth(self, resp: requests.Response, what: str) -> None:
        if resp.status_code in (401, 403):
            who = f"refused the credentials of user {self.auth[0]!r}" if self.auth else "requires credentials"
            raise UploadError(f"{what}: {self.url} {who} "
                              f"(HTTP {resp.status_code} {resp.reason})", _AUTH_HINT)

    def detect_target(self) -> UploadTarget:
        """devpi announces itself in X-Devpi-* headers; anything else is treated as pypiserver-like."""
        resp = self.request("GET", self.url, "looking up the index")
        devpi = any(h.lower().startswith("x-devpi-") for h in resp.headers)
        return UploadTarget(self.url, simple_base(self.url, devpi))

    def lookup(self, target: UploadTarget, normalized: str, filename: str) -> RemoteFile | None:
        page = target.project_url(normalized)
        resp = self.request("GET", page, "looking up the file", headers={"Accept": _ACCEPT})
        self.check_auth(resp, "looking up the file")
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise UploadError(f"{page} answered HTTP {resp.status_code} {resp.reason}")
        remote = parse_simple_page(resp.text, resp.headers.get("Content-Type", ""), resp.url).get(filename)
        if remote is not None and remote.sha256 is None:
            remote = RemoteFile(remote.filename, remote.url, self._download_sha256(remote.url))
        return remote

    def _download_sha256(self, url: str) -> str:
        """For an index whose links carry no sha256 fragment: hash the served file."""
        resp = self.request("GET", url, "downloading the published file", stream=True)
        self.check_auth(resp, "downloading the published file")
        if resp.status_code != 200:
            raise UploadError(f"{url} answered HTTP {resp.status_code} {resp.reason}")
        digest = hashlib.sha256()
        for chunk in resp.iter_content(CHUNK):
            digest.update(chunk)
        return digest.hexdigest()


def _short_reason(exc: Exception) -> str:
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    for marker in ("Name or service not known", "Connection reset", "Connection aborted",
                   "Temporary failure in name resolution", "No route to host"):
        if marker in text:
            return marker.lower()
    return f"{type(exc).__name__}: {text[:160]}"


def _conflict(info: WheelInfo, remote: RemoteFile, url: str) -> UploadError:
    return UploadError(
        f"conflict: {info.filename} is already on {url} with different bytes "
        f"(remote sha256 {(remote.sha256 or '?')[:12]}..., local {info.sha256[:12]}...)",
        "a published file cannot be changed; bump the version or build tag, or delete it on the server",
    )


def push_wheel(
    path: Path | str,
    url: str,
    user: str | None = None,
    password: str | None = None,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: float = 300.0,
    simple_url: str | None = None,
    session: requests.Session | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PushResult:
    """Upload one wheel unless the identical file is already there; verify it afterwards.

    ``url`` is the upload URL: pypiserver's root (``http://host:port/``) or a devpi
    index (``http://host:port/user/index/``). ``simple_url`` overrides where the
    project pages are looked up. Credentials: the arguments, else userinfo in the URL,
    else ~/.netrc. Transient failures (connection errors, 5xx) are retried ``retries``
    times, sleeping ``backoff``, 2*``backoff``, ...
    """
    clean_url, url_user, url_password = split_credentials(url)
    validate.http_url(clean_url, "index URL")  # the clean one: a message never echoes a password
    user = user or url_user
    password = password if password is not None else url_password
    if password is None:
        user, password = resolve_credentials(clean_url, user, environ={})
    if user and password is None:
        password = ""  # a user without a password: let the server decide (it will say 401/403)
    auth = (user, password) if user and password is not None else None

    path = Path(path)
    digests = read_digests(path, ("sha256", "md5"))
    info = inspect_wheel(path, sha256=digests["sha256"])

    client = _Client(clean_url, auth, retries, backoff, timeout, session, sleep)
    if simple_url:
        validate.http_url(simple_url, "simple URL")
        target = UploadTarget(clean_url, simple_url if simple_url.endswith("/") else simple_url + "/")
    else:
        target = client.detect_target()

    def outcome(status: Literal["uploaded", "skipped"], attempts: int) -> PushResult:
        return PushResult(info.filename, info.sha256, clean_url, status, attempts)

    remote = client.lookup(target, info.normalized, info.filename)
    if remote is not None:
        if remote.sha256 == info.sha256:
            return outcome("skipped", 0)
        raise _conflict(info, remote, clean_url)

    fields = upload_fields(info, digests["md5"])

    def body() -> tuple[MultipartBody, str]:
        b = MultipartBody(fields, path, info.filename)
        return b, b.content_type

    resp = client.request("POST", clean_url, f"uploading {info.filename}", body_factory=body)
    attempts = client.attempts
    client.check_auth(resp, f"uploading {info.filename}")
    already = resp.status_code == 409 or (resp.status_code == 400 and "exist" in resp.text.lower())
    if already:
        remote = client.lookup(target, info.normalized, info.filename)
        if remote is not None and remote.sha256 == info.sha256:
            return outcome("skipped", attempts)
        if remote is not None:
            raise _conflict(info, remote, clean_url)
        raise UploadError(f"{clean_url} says {info.filename} exists (HTTP {resp.status_code}) "
                          f"but {target.project_url(info.normalized)} does not list it")
    if not 200 <= resp.status_code < 300:
        detail = " ".join(resp.text.split())[:200]
        raise UploadError(f"uploading {info.filename} to {clean_url} failed: HTTP {resp.status_code} "
                          f"{resp.reason}" + (f" ({detail})" if detail else ""))

    remote = client.lookup(target, info.normalized, info.filename)
    if remote is None:
        raise UploadError(f"{clean_url} accepted {info.filename} but "
                          f"{target.project_url(info.normalized)} does not list it")
    if remote.sha256 != info.sha256:
        raise UploadError(f"{info.filename} on {clean_url} has sha256 {remote.sha256} after the upload, "
                          f"expected {info.sha256}", "the upload was corrupted; delete it on the server")
    return outcome("uploaded", attempts)

