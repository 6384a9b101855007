"""Validation of every value that can reach a shell line, a git command or a path.

Values are checked against a strict allow-list pattern before use; anything that does
not match is rejected with a ValidationError naming the field. Templates additionally
shell-quote through the ``q`` filter, so a value is both validated *and* quoted.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import ParseResult, urlparse

from packaging.requirements import InvalidRequirement, Requirement

from builder.errors import ValidationError

MAX_LEN = 256

_GIT_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]*$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_PKG_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
# Debian version: [epoch:]upstream[-revision]; characters from deb-version(7).
_DEB_VERSION = re.compile(r"^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$")
_PEP440ISH = re.compile(r"^[0-9][A-Za-z0-9.+!-]*$")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[0-9][A-Za-z0-9.+!-]*$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_ENV_VALUE = re.compile(r"^[A-Za-z0-9 ._:/=,+@%-]*$")
_IMAGE_REF = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"
)
_SUITE = re.compile(r"^[a-z][a-z0-9-]*$")
_SNAPSHOT = re.compile(r"^([0-9]{8}T[0-9]{6}Z)?$")
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_WHEEL_NAME = re.compile(
    r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[A-Za-z0-9_.!+]+)(-(?P<build>[0-9][A-Za-z0-9_.]*))?"
    r"-(?P<py>[A-Za-z0-9_.]+)-(?P<abi>[A-Za-z0-9_.]+)-(?P<plat>[A-Za-z0-9_.]+)\.whl$"
)
_USERINFO = re.compile(r"(?<=://)[^/?#]*@")
_ALLOWED_URL_SCHEMES = {"https", "http", "file", "ssh", "git"}


def _common(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}")
    if value == "":
        raise ValidationError(f"{field} is empty")
    if len(value) > MAX_LEN:
        raise ValidationError(f"{field} is too long ({len(value)} > {MAX_LEN} characters)")
    if any(c in value for c in "\n\r\0"):
        raise ValidationError(f"{field} contains a newline or NUL: {value!r}")
    return value


def _match(field: str, value: object, pattern: re.Pattern[str], what: str) -> str:
    text = _common(field, value)
    if not pattern.match(text):
        raise ValidationError(f"{field} {text!r} is not a valid {what}")
    return text


def _shown(url: str) -> str:
    """A URL as a message may show it: a password (or token) in it replaced by ***."""
    return _USERINFO.sub("***@", url)


def _parse_url(field: str, text: str) -> ParseResult:
    """urlparse, with its ValueError (``http://[::1/``, a bad port) as a ValidationError."""
    try:
        parsed = urlparse(text)
        parsed.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise ValidationError(f"{field} {_shown(text)!r} is not a valid URL ({exc})") from None
    return parsed


def git_ref(value: object, field: str = "ref") -> str:
    """A branch, tag or SHA: no leading '-' (git option injection), no '..', no shell syntax."""
    text = _match(field, value, _GIT_REF, "git ref (letters, digits, . _ / + -)")
    if ".." in text or text.endswith((".lock", "/", ".")) or "//" in text:
        raise ValidationError(f"{field} {text!r} is not a valid git ref")
    return text


def sha(value: object, field: str = "sha") -> str:
    return _match(field, value, _SHA, "40-hex commit SHA")


def repo_url(value: object, field: str = "repo") -> str:
    """A git URL with an allowed scheme; never an option (``--upload-pack=...``)."""
    text = _common(field, value)
    if text.startswith("-"):
        raise ValidationError(f"{field} {_shown(text)!r} looks like a command-line option, not a URL")
    if any(c in text for c in " \t;|&$`\\\"'<>(){}*?"):
        raise ValidationError(f"{field} {_shown(text)!r} contains characters not allowed in a repository URL")
    parsed = _parse_url(field, text)
    if parsed.scheme not in _ALLOWED_URL_SCHEMES:
        raise ValidationError(
            f"{field} {_shown(text)!r} has no allowed scheme",
            "use https://, http://, ssh://, git:// or file:///path",
        )
    if parsed.scheme == "file" and (parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/")):
        raise ValidationError(f"{field} {_shown(text)!r} must be an absolute file:///path")
    if "::" in text:
        raise ValidationError(f"{field} {_shown(text)!r} uses git's transport syntax, which is not allowed")
    return text


def package_name(value: object, field: str = "package") -> str:
    return _match(field, value, _PKG_NAME, "package name")


def deb_version(value: object, field: str = "version") -> str:
    return _match(field, value, _DEB_VERSION, "Debian package version")


def py_version(value: object, field: str = "version") -> str:
    return _match(field, value, _PEP440ISH, "Python package version")


def requirement(value: object, field: str = "requirement") -> str:
    """A pinned pip requirement ``name==version`` (an exact pin, so builds repeat)."""
    return _match(field, value, _REQUIREMENT, "pinned requirement (name==version)")


_BUILD_REQUIREMENT_CHARS = re.compile(r"^[A-Za-z0-9 ._\[\],<>=!~*;()'\"-]+$")


def build_requirement(value: object, field: str = "requirement") -> str:
    """A PEP 508 requirement from the package index (``setuptools``, ``ninja>=1.11``,
    markers allowed; no URL, no pip option, no shell metacharacter)."""
    text = _common(field, value)
    if text.startswith("-") or not _BUILD_REQUIREMENT_CHARS.match(text):
        raise ValidationError(f"{field} {text!r} is not a valid requirement",
                              "name[extras] version-specifiers; markers (no URLs, no pip options)")
    try:  # a URL requirement (``x @ https://...``) cannot pass the allowed characters above
        Requirement(text)
    except InvalidRequirement as exc:
        raise ValidationError(f"{field} {text!r} is not a valid requirement: {exc}") from None
    return text


def env_name(value: object, field: str = "env name") -> str:
    return _match(field, value, _ENV_NAME, "environment variable name (A-Z, 0-9, _)")


def env_value(value: object, field: str = "env value") -> str:
    if value == "":
        return ""
    return _match(field, value, _ENV_VALUE, "environment value (no shell metacharacters)")


def image_ref(value: object, field: str = "image") -> str:
    return _match(field, value, _IMAGE_REF, "image reference (name[:tag][@sha256:digest])")


def suite(value: object, field: str = "suite") -> str:
    return _match(field, value, _SUITE, "Debian suite name")


def snapshot(value: object, field: str = "snapshot") -> str:
    if value == "":
        return ""
    return _match(field, value, _SNAPSHOT, "snapshot timestamp (YYYYMMDDTHHMMSSZ)")


def http_url(value: object, field: str = "url") -> str:
    text = _common(field, value)
    if any(c in text for c in " \t;|&$`\\\"'<>(){}"):
        raise ValidationError(f"{field} {_shown(text)!r} contains characters not allowed in a URL")
    parsed = _parse_url(field, text)
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        raise ValidationError(f"{field} {_shown(text)!r} is not an http(s) URL")
    return text


def volume_name(value: object, field: str = "volume") -> str:
    return _match(field, value, _VOLUME_NAME, "Docker volume name")


def wheel_filename(value: object, field: str = "wheel") -> str:
    """A wheel file name (PEP 427) with no path component: ``../x.whl`` is refused."""
    text = _common(field, value)
    if "/" in text or "\\" in text or text.startswith("."):
        raise ValidationError(f"{field} {text!r} must be a bare wheel file name, not a path")
    return _match(field, text, _WHEEL_NAME, "wheel file name (name-version-py-abi-platform.whl)")


def shell_quote(value: object) -> str:
    """Jinja filter ``q``: quote any scalar for a POSIX shell line."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValidationError(f"cannot shell-quote a {type(value).__name__}: {value!r}")
    text = str(value)
    if any(c in text for c in "\n\r\0"):
        raise ValidationError(f"refusing to put a newline or NUL into a shell line: {text!r}")
    return shlex.quote(text)
