"""Persistent git mirrors and fixed-path checkouts of a resolved SHA, submodules included.

A bare mirror per repository URL (its branches and tags, nothing under refs/pull/) is
fetched incrementally, under a stall timeout (builder.source.gitprogress); a build's work tree is
checked out from it at the SHA, cleaned (``git clean -ffdx``) so no stale build output
leaks in, with submodules updated recursively. The work tree is bind-mounted at a fixed
path in the build container (``/src/<package>``), so ccache's ``base_dir`` makes hits
independent of where it lives on the host.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import FetchStalled, RefError
from builder.files import pid_alive
from builder.source.gitprogress import FetchStatus, fetch_options_now, run_network_git
from builder.source.refs import GIT_TIMEOUT, git_env

# Submodules with file:// URLs (local mirrors, test fixtures) need this since git 2.38.1
# (CVE-2022-39253 made the file transport opt-in for submodules).
# safe.directory: a work tree handed to the build uid stays usable by the invoking user.
_GIT_FILE_OK = ["-c", "protocol.file.allow=always", "-c", "safe.directory=*"]
# What a mirror fetches: branches and tags. Not ``git clone --mirror``'s +refs/*:refs/*,
# which takes every pull request (refs/pull/*: 7,148 in pytorch/xla, ~190,000 in pytorch)
# and whatever else the host keeps under refs/.
HEADS_AND_TAGS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
KEPT_COMMITS = "refs/builder/commits/"  # a commit asked for by SHA that no branch holds
_KEPT_PREFIXES = ("refs/heads/", "refs/tags/", KEPT_COMMITS)


@dataclass(frozen=True)
class SourceTree:
    path: Path
    url: str
    sha: str
    commit_time: int
    submodules: dict[str, str] = field(default_factory=dict)


def _git(*args: str, cwd: Path | None = None, what: str = "git", ok_codes: tuple[int, ...] = (0,),
         stdin: str | None = None) -> str:
    """A local git command (no network: those go through run_network_git's stall timeout)."""
    try:
        done = subprocess.run(["git", *_GIT_FILE_OK, *args], cwd=cwd, capture_output=True, text=True,
                              env=git_env(), timeout=GIT_TIMEOUT * 10, input=stdin,
                              stdin=subprocess.DEVNULL if stdin is None else None)
    except subprocess.TimeoutExpired:
        raise RefError(f"{what} timed out") from None
    if done.returncode not in ok_codes:
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
    """Create or incrementally fetch the bare mirror of ``url`` (no fetch if it has ``sha``):
    its branches and tags only (``HEADS_AND_TAGS``), plus ``sha`` itself when it is on no
    branch and the remote serves it. A mirror made by ``git clone --mirror`` (every ref,
    pull requests included) is migrated first."""
    path = mirror_path(mirrors_dir, url)
    if (path / "HEAD").is_file():
        migrate_mirror(path, url)
        if sha and has_commit(path, sha):
            return path
        run_network_git([*_GIT_FILE_OK, "fetch", "--prune", "--progress", "origin"], path, f"fetching {url}",
                        _label(url))
    else:
        _clone(path, url)
    if sha and not has_commit(path, sha):
        _fetch_commit(path, url, sha)
    return path


def _label(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1] or url


def _clone(path: Path, url: str) -> None:
    """``git clone --bare``: the remote's branches and tags and its HEAD, nothing under
    refs/pull/ or other hidden refs, into a temporary directory renamed when complete (a
    stalled or killed clone leaves no half mirror behind)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f"{path.name}.partial-*"):  # left by a run that was killed
        pid = stale.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or not pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        run_network_git([*_GIT_FILE_OK, "clone", "--bare", "--progress", "--", url, str(partial)], None,
                        f"cloning {url}", _label(url))
        _set_refspecs(partial)
        try:
            partial.rename(path)
        except OSError:  # another run finished the same clone first: use that one
            if not (path / "HEAD").is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)



def _set_refspecs(path: Path) -> None:
    _git("config", "--unset-all", "remote.origin.fetch", cwd=path, what="git config", ok_codes=(0, 5))
    for spec in HEADS_AND_TAGS:
        _git("config", "--add", "remote.origin.fetch", spec, cwd=path, what="git config")
    _git("config", "--unset", "remote.origin.mirror", cwd=path, what="git config", ok_codes=(0, 5))


def migrate_mirror(path: Path, url: str = "") -> int:
    """A mirror fetching more than ``HEADS_AND_TAGS`` (``git clone --mirror``'s
    ``+refs/*:refs/*``) gets those two refspecs, loses every other ref but the commits
    builder keeps (``KEPT_COMMITS``), and is repacked without what only those refs
    reached. Returns how many refs were deleted (0: nothing to migrate)."""
    specs = _git("config", "--get-all", "remote.origin.fetch", cwd=path, what="git config",
                 ok_codes=(0, 1)).split()
    if specs == list(HEADS_AND_TAGS):
        return 0
    _set_refspecs(path)
    refs = _git("for-each-ref", "--format=%(refname)", cwd=path, what="listing refs").split()
    extra = [ref for ref in refs if not ref.startswith(_KEPT_PREFIXES)]
    progress = fetch_options_now().progress
    if extra:
        if progress is not None:
            progress(_label(url or str(path)), FetchStatus("Deleting refs outside heads and tags", len(extra)))
        _git("update-ref", "--stdin", cwd=path, what="deleting the refs outside heads and tags",
             stdin="".join(f"delete {ref}\n" for ref in extra))
        try:  # the objects only pull requests reached: dropped (-a without -k)
            _git("repack", "-a", "-d", "-q", cwd=path, what="repacking the mirror")
        except RefError:
            pass  # space only: git's own gc reclaims it later
        if progress is not None:
            progress(_label(url or str(path)), None)
    return len(extra)


def _fetch_commit(path: Path, url: str, sha: str) -> None:
    """``sha`` itself, when no branch or tag holds it (a pull request's commit, a deleted
    branch's), kept under ``KEPT_COMMITS`` so gc does not drop it. A remote that does not
    serve unadvertised commits refuses: the checkout then says the commit is missing."""
    try:
        run_network_git([*_GIT_FILE_OK, "fetch", "--progress", "origin", f"+{sha}:{KEPT_COMMITS}{sha}"], path,
                        f"fetching {sha[:12]} from {url}", _label(url))
    except FetchStalled:
        raise
    except RefError:
        pass


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
    run_network_git([*_GIT_FILE_OK, "fetch", "--progress", "--no-tags", str(mirror), sha], worktree,
                    f"fetching {sha[:12]}", _label(url))
    _git("checkout", "--quiet", "--force", "--detach", sha, cwd=worktree, what=f"checking out {sha[:12]}")
    _git("clean", "-ffdxq", cwd=worktree, what="git clean")
    if not submodules:
        commit_time = int(_git("show", "-s", "--format=%ct", sha, cwd=worktree).strip())
        return SourceTree(path=worktree, url=url, sha=sha, commit_time=commit_time, submodules={})
    _git("submodule", "sync", "--recursive", cwd=worktree, what="git submodule sync")
    # submodules come from their own URLs (the network): under the stall timeout too
    run_network_git([*_GIT_FILE_OK, "submodule", "update", "--init", "--recursive", "--force", "--progress"],
                    worktree, "git submodule update --init --recursive", f"{_label(url)} submodules")
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
