"""Turn a ref (branch, tag or SHA) into a 40-hex commit SHA with ``git ls-remote``.

Refs and URLs are validated first; git gets ``--`` before positional arguments and
no prompt, so neither a hostile ref nor a password prompt can hang or hijack a run.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from builder import validate
from builder.errors import RefError, ValidationError

_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?((a|b|rc|\.dev|\.post)[0-9]+)*(\+[A-Za-z0-9.]+)?$")
GIT_TIMEOUT = 120


@dataclass(frozen=True)
class ResolvedRef:
    url: str
    ref: str
    sha: str


def git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASK_YESNO": "false", "LC_ALL": "C"})
    return env


def is_version(text: str) -> bool:
    """``2.13.0`` is a release version (use a prebuilt wheel); ``main`` or ``v2.9.0`` is a ref."""
    return bool(_VERSION.match(text))


def pick_sha(ref: str, listing: str) -> str | None:
    """Choose the commit for ``ref`` from ``git ls-remote`` output (pure: unit tested).

    Exact names win over suffix matches; an annotated tag's peeled ``^{}`` line is the commit.
    """
    refs: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, name = line.partition("\t")
        if re.fullmatch(r"[0-9a-f]{40}", sha) and name:
            refs[name] = sha
    candidates = [ref] if ref.startswith("refs/") or ref == "HEAD" else [
        f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/{ref}"]
    for name in candidates:
        if name in refs:
            return refs.get(f"{name}^{{}}", refs[name])
    return None


def ls_remote(url: str, *patterns: str) -> str:
    command = ["git", "ls-remote", "--", url, *patterns]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=git_env(), timeout=GIT_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RefError(f"cannot reach repository {url}: git ls-remote timed out after {GIT_TIMEOUT} s") from None
    if done.returncode != 0:
        reason = next((ln for ln in done.stderr.splitlines() if ln.strip()), f"exit {done.returncode}")
        raise RefError(f"cannot reach repository {url}: {reason.removeprefix('fatal: ')}",
                       "check --torch-repo/--xla-repo (or [repos] in builder.toml)")
    return done.stdout


def resolve_ref(url: str, ref: str) -> ResolvedRef:
    """Resolve ``ref`` in ``url`` to a commit SHA; unknown refs fail before anything is built."""
    try:
        url = validate.repo_url(url, "repository URL")
        ref = validate.git_ref(ref, "ref")
    except ValidationError as exc:  # a malformed value, not a missing ref: a usage error
        raise RefError(exc.message, exc.hint, exit_code=exc.exit_code) from None
    if re.fullmatch(r"[0-9a-f]{40}", ref):
        ls_remote(url, "HEAD")  # reachable; the SHA itself is checked when it is fetched
        return ResolvedRef(url, ref, ref)
    sha = pick_sha(ref, ls_remote(url, ref, f"{ref}^{{}}"))  # the peeled line of an annotated tag
    if sha is None:
        raise RefError(f"ref '{ref}' not found in {url}", "name an existing branch, tag or a 40-hex SHA")
    return ResolvedRef(url, ref, sha)
