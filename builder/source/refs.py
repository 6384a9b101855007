"""Turn a ref (branch, tag or SHA) into a 40-hex commit SHA with ``git ls-remote``.

Refs and URLs are validated first; git gets ``--`` before positional arguments and
no prompt, so neither a hostile ref nor a password prompt can hang or hijack a run.

The conventional default-branch names (``main``, ``master``) mean "the default branch"
when the repository has no branch of that name: pytorch/xla's default branch is
``master`` and it has no ``main``, so ``--xla main`` resolves to the remote's HEAD
(``git ls-remote --symref``, asked in the same round trip) with a note saying so. Any
other unknown ref fails, naming the closest branches and tags.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
from dataclasses import dataclass
from urllib.parse import urlsplit

from builder import validate
from builder.errors import RefError, ValidationError

_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?((a|b|rc|\.dev|\.post)[0-9]+)*(\+[A-Za-z0-9.]+)?$")
GIT_TIMEOUT = 120


# names that mean "the default branch" when no branch or tag has that name
DEFAULT_BRANCH_NAMES = ("main", "master")


@dataclass(frozen=True)
class ResolvedRef:
    url: str
    ref: str  # the branch, tag or SHA resolved (the default branch's own name for main/master)
    sha: str
    note: str = ""  # said in the plan and summary: how the ref was read (the default branch)


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


def head_branch(listing: str) -> tuple[str, str] | None:
    """(branch, sha) of HEAD from ``git ls-remote --symref URL HEAD`` output (pure)."""
    branch = sha = None
    for line in listing.splitlines():
        left, _, name = line.partition("\t")
        if name != "HEAD":
            continue
        if left.startswith("ref: refs/heads/"):
            branch = left.removeprefix("ref: refs/heads/")
        elif re.fullmatch(r"[0-9a-f]{40}", left):
            sha = left
    return (branch, sha) if branch and sha else None


def branch_and_tag_names(listing: str) -> list[str]:
    """Short branch and tag names of a ``git ls-remote --heads --tags`` listing (pure)."""
    names = []
    for line in listing.splitlines():
        _, _, name = line.partition("\t")
        for prefix in ("refs/heads/", "refs/tags/"):
            if name.startswith(prefix) and not name.endswith("^{}"):
                names.append(name.removeprefix(prefix))
    return sorted(set(names))


def repo_name(url: str) -> str:
    """``https://github.com/pytorch/xla.git`` -> ``pytorch/xla``: how a note names a repo
    (the last two parts of the URL's path, without ``.git``)."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    if parts:
        parts[-1] = parts[-1].removesuffix(".git")
    return "/".join(parts[-2:]) or url


def ls_remote(url: str, *patterns: str, options: tuple[str, ...] = ()) -> str:
    command = ["git", "ls-remote", *options, "--", url, *patterns]
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
    default_name = ref in DEFAULT_BRANCH_NAMES
    # the peeled line of an annotated tag; for main/master also HEAD and its branch, in one round trip
    listing = ls_remote(url, ref, f"{ref}^{{}}", *(["HEAD"] if default_name else []),
                        options=("--symref",) if default_name else ())
    sha = pick_sha(ref, listing)
    if sha is not None:
        return ResolvedRef(url, ref, sha)
    head = head_branch(listing) if default_name else None
    if head is not None:
        branch, head_sha = head
        return ResolvedRef(url, branch, head_sha, note=f"{repo_name(url)} has no branch {ref}; using its default "
                                                       f"branch {branch} at {head_sha[:7]}")
    close = difflib.get_close_matches(ref, branch_and_tag_names(ls_remote(url, options=("--heads", "--tags"))),
                                      n=3, cutoff=0.6)
    raise RefError(f"ref '{ref}' not found in {url}",
                   (f"did you mean {' or '.join(close)}? " if close else "")
                   + "name an existing branch, tag or a 40-hex SHA")
