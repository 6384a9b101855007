"""Persistent git mirrors and fixed-path checkouts of a resolved SHA, submodules included.

A bare mirror per repository URL is fetched incrementally; a build's work tree is
checked out from it at the SHA, cleaned (``git clean -ffdx``) so no stale build output
leaks in, with submodules updated recursively. The work tree is bind-mounted at a fixed
path in the build container (``/src/<package>``), so ccache's ``base_dir`` makes hits
independent of where it lives on the host.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import RefError
from builder.source.refs import GIT_TIMEOUT, git_env

# Submodules with file:// URLs (local mirrors, test fixtures) need this since git 2.38.1
# (CVE-2022-39253 made the file transport opt-in for submodules).
# safe.directory: a work tree handed to the build uid stays usable by the invoking user.
_GIT_FILE_OK = ["-c", "protocol.file.allow=always", "-c", "safe.directory=*"]


@dataclass(frozen=True)
class SourceTree:
    path: Path
    url: str
    sha: str
    commit_time: int
    submodules: dict[str, str] = field(default_factory=dict)


def _git(*args: str, cwd: Path | None = None, what: str = "git") -> str:
    try:
        done = subprocess.run(["git", *_GIT_FILE_OK, *args], cwd=cwd, capture_output=True, text=True,
                              env=git_env(), timeout=GIT_TIMEOUT * 10, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RefError(f"{what} timed out") from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        reason = next((ln for ln in reversed(lines) if ln.startswith(("fatal:", "error:"))),
                      lines[-1] if lines else f"exit {done.returncode}")
        raise RefError(f"{what} failed: {reason.removeprefix('fatal: ')}")
    return done.stdout


def mirror_path(mirrors_dir: Path, url: str) -> Path:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")) or "repo"
    return mirrors_dir / f"{stem}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"


def has_commit(mirror: Path, sha: str) -> bool:
    if not (mirror / "HEAD").is_file():
        return False
    done = subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=mirror, capture_output=True,
                          env=git_env(), stdin=subprocess.DEVNULL)
    return done.returncode == 0


def update_mirror(mirrors_dir: Path, url: str, sha: str | None = None) -> Path:
    """Create or incrementally fetch the bare mirror of ``url`` (no fetch if it has ``sha``)."""
    path = mirror_path(mirrors_dir, url)
    if sha and has_commit(path, sha):
        return path
    if not (path / "HEAD").is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "--mirror", "--quiet", "--", url, str(path), what=f"cloning {url}")
    else:
        _git("remote", "update", "--prune", cwd=path, what=f"fetching {url}")
    return path


def parse_submodule_status(text: str) -> dict[str, str]:
    """``git submodule status --recursive`` -> {path: sha} (pure: unit tested)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^[ +\-U]?([0-9a-f]{40}) (\S+)", line)
        if match:
            out[match.group(2)] = match.group(1)
    return out


def checkout(mirror: Path, url: str, sha: str, worktree: Path, submodules: bool = True) -> SourceTree:
    """Check ``sha`` out of ``mirror`` into ``worktree`` (reused between builds), clean
    (with its submodules, unless ``submodules`` is false)."""
    try:
        _git("cat-file", "-e", f"{sha}^{{commit}}", cwd=mirror, what="looking up the commit")
    except RefError:
        raise RefError(f"commit {sha} not found in {url}", "fetch it first or name an existing ref") from None
    if not (worktree / ".git").exists():
        worktree.mkdir(parents=True, exist_ok=True)
        _git("init", "--quiet", cwd=worktree, what="git init")
    # Relative submodule URLs (../fmt.git, as upstream uses) resolve against origin.
    _git("config", "remote.origin.url", url, cwd=worktree, what="git config")
    _git("fetch", "--quiet", "--no-tags", str(mirror), sha, cwd=worktree, what=f"fetching {sha[:12]}")
    _git("checkout", "--quiet", "--force", "--detach", sha, cwd=worktree, what=f"checking out {sha[:12]}")
    _git("clean", "-ffdxq", cwd=worktree, what="git clean")
    if not submodules:
        commit_time = int(_git("show", "-s", "--format=%ct", sha, cwd=worktree).strip())
        return SourceTree(path=worktree, url=url, sha=sha, commit_time=commit_time, submodules={})
    _git("submodule", "sync", "--recursive", cwd=worktree, what="git submodule sync")
    _git("submodule", "update", "--init", "--recursive", "--force", cwd=worktree,
         what="git submodule update --init --recursive")
    _git("submodule", "foreach", "--quiet", "--recursive", "git clean -ffdxq", cwd=worktree,
         what="cleaning submodules")
    submodules = parse_submodule_status(_git("submodule", "status", "--recursive", cwd=worktree))
    commit_time = int(_git("show", "-s", "--format=%ct", sha, cwd=worktree).strip())
    return SourceTree(path=worktree, url=url, sha=sha, commit_time=commit_time, submodules=submodules)


def read_at_commit(mirror: Path, sha: str, path: str) -> str | None:
    """The text of ``path`` in commit ``sha`` of ``mirror`` (None when the commit has no
    such file): read with ``git show``, so planning needs no checkout."""
    done = subprocess.run(["git", "show", f"{sha}:{path}"], cwd=mirror, capture_output=True, env=git_env(),
                          stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT)
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace")


def commit_time(mirror: Path, sha: str) -> int:
    """Committer time of ``sha``: the build's SOURCE_DATE_EPOCH."""
    return int(_git("show", "-s", "--format=%ct", sha, cwd=mirror, what="reading the commit time").strip())
