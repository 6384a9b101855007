"""Fixture source repos shaped like pytorch and pytorch/xla.

builder's real recipes run on them unchanged, so `builder demo` and the
integration tests exercise the real paths (git refs, submodules, env knobs,
ccache, the XLA stage installing torch from the local index) in minutes
instead of hours:

- ``faketorch``: today's pytorch shape (scikit-build-core backend, no setup.py,
  CMake >= 3.27, torchgen codegen importing yaml, NumPy detection, dynamic
  version and dependencies), ~60 C++ files into libtorch_cpu.so, a plain-C
  ``torch._C``, and a ``third_party/fakefmt`` git submodule. Its first commit
  (tag ``v2.98.0``, branch ``release/2.98``) is the setuptools-era shape
  (``faketorch_setuptools`` overlaid: setup.py + tools/setup_helpers), as a
  release branch cut before the migration would be.
- ``fakexla``: imports the installed (fake) torch at build time, builds
  ``_XLAC`` against torch's headers and libtorch_cpu.so, and computes Bazel
  options from the environment exactly as pytorch/xla's build_util.py does.
  Like pytorch/xla (master 41398bf) its default branch is ``master`` (no ``main``),
  it compiles as C++17 (.bazelrc), its ``.torch_commit`` pins faketorch's ``v2.99.0``
  commit (version 2.99.0a0) while it declares torch_xla 2.98.0 (setup.py's default
  and infra/ansible/config/vars.yaml's ``package_version``): upstream's real mismatch.
- faketorch's ``main`` is one commit past that pin and requires C++20 (CMakeLists.txt
  and a ``#error`` guard in its public header), as torch main does since
  pytorch/pytorch#176662: torch main and xla master cannot be compiled together.
- ``xla_real_ext``: a torch.utils.cpp_extension extension built against the
  real torch CPU wheel.
- ``faketorchvision``: pytorch/vision's shape (setup.py with its env knobs, version.txt,
  ``torchvision._C`` and ``torchvision.image`` as cpp_extension CppExtensions whose ops
  register through TORCH_LIBRARY), built against the real torch CPU wheel.

The trees ship as package data and are written out as git repos with a fixed
identity and fixed dates, so every commit SHA is the same on every machine.
Files named ``dot-NAME`` are written as ``.NAME`` (keeps dotfiles out of the
package data, which setuptools' globs would skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

EXAMPLES = ("faketorch", "fakexla", "xla_real_ext", "faketorchvision")

# Submodules: example -> ((path in the superproject, fixture tree written beside it), ...).
SUBMODULES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "faketorch": (("third_party/fakefmt", "fakefmt"),),
}

# Eras: example -> (overlay tree, files of the example absent in that era, tag, branch).
# The overlay's commit comes first, then the example's own tree on top of it.
ERAS: Mapping[str, tuple[str, tuple[str, ...], str, str]] = {
    "faketorch": ("faketorch_setuptools", ("tools/metadata", "torch/version.py.in"), "v2.98.0", "release/2.98"),
}

TAGS = {"faketorch": "v2.99.0", "fakexla": "v2.99.0", "xla_real_ext": "v2.99.0", "faketorchvision": "v0.99.0",
        "fakefmt": "v1.0.0"}

# default branches as upstream's: pytorch/xla has no branch main
DEFAULT_BRANCHES = {"fakexla": "master"}
# faketorch's main after the tag: the C++20 requirement (pytorch/pytorch#176662), as
# (file, old text, new text) edits
CXX20_EDITS = (
    ("CMakeLists.txt", "set(CMAKE_CXX_STANDARD 17)", "set(CMAKE_CXX_STANDARD 20)"),
    ("include/faketorch/macros.h", "#pragma once\n",
     "#pragma once\n\n// as torch/csrc/api/include/torch/all.h since pytorch/pytorch#176662\n"
     "#if !defined(_MSC_VER) && __cplusplus < 202002L\n"
     "#error C++20 or later compatible compiler is required to use PyTorch.\n#endif\n"),
)

GIT_NAME = "builder fixtures"
GIT_EMAIL = "fixtures@builder.invalid"
GIT_DATE = "2024-01-01T00:00:00+00:00"

DOT_PREFIX = "dot-"
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info", "*.so", "*.o")
_COMMENT = {".py": "#", ".txt": "#", ".cmake": "#", ".in": "//", ".c": "//", ".cpp": "//", ".h": "//"}


class ExampleError(RuntimeError):
    """An example repo could not be written or changed."""


def example_dir(name: str) -> Path:
    """The packaged source tree of one example (or of the fakefmt submodule, or an era overlay)."""
    if name not in EXAMPLES and name != "fakefmt" and name not in {era[0] for era in ERAS.values()}:
        raise ExampleError(f"unknown example {name!r}; known: {', '.join(EXAMPLES)}")
    return Path(__file__).resolve().parent / name


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        # Ignore the user's and the system's git config (hooks, signing, templates,
        # init.defaultBranch): the SHAs must not depend on the machine.
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME=GIT_NAME,
        GIT_AUTHOR_EMAIL=GIT_EMAIL,
        GIT_AUTHOR_DATE=GIT_DATE,
        GIT_COMMITTER_NAME=GIT_NAME,
        GIT_COMMITTER_EMAIL=GIT_EMAIL,
        GIT_COMMITTER_DATE=GIT_DATE,
    )
    return env


def _git(repo: Path, *args: str) -> str:
    # protocol.file.allow=always: since git 2.38.1 (CVE-2022-39253) submodules
    # over the file transport (file:// URLs, local paths, and relative URLs
    # resolved to local paths) are refused by default. Anyone cloning these
    # repos with submodules needs the same flag:
    #   git -c protocol.file.allow=always submodule update --init --recursive
    cmd = ["git", "-c", "protocol.file.allow=always", "-c", "init.templateDir=", *args]
    proc = subprocess.run(cmd, cwd=repo, env=_git_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise ExampleError(f"`{' '.join(cmd)}` failed in {repo}:\n{proc.stderr.strip()}")
    return proc.stdout.strip()


def _copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, ignore=_SKIP, dirs_exist_ok=True)
    for path in sorted(dest.rglob("*"), reverse=True):
        if path.is_file():
            # Fixed modes: git records 644 vs 755, and an installed package may differ.
            path.chmod(0o644)
            if path.name.startswith(DOT_PREFIX):
                path.rename(path.with_name("." + path.name[len(DOT_PREFIX) :]))


# faketorch's kernels at the heavy weight (about 1.4 s of -O2 a unit instead of 0.03 s): the
# light header the tests build is replaced by this one in the written repo.
HEAVY_KERNEL_HEADER = ("csrc/kernels/kernel_common.h", "kernel_common_heavy.h")


# With ``heavy_every=n`` only every n-th kernel is heavy: the heavy header goes beside the light
# one, in a namespace of its own (so the two never define one template differently), and
# those kernels include it instead.
HEAVY_SOME = ("csrc/kernels/kernel_heavy.h", "faketorch::detail", "faketorch::detail_heavy")


def _weigh(name: str, dest: Path, heavy: bool, heavy_every: int = 1) -> None:
    if not heavy or name != "faketorch":
        return
    rel, source = HEAVY_KERNEL_HEADER
    text = (Path(__file__).resolve().parent / source).read_text()
    if heavy_every == 1:
        (dest / rel).write_text(text)
        (dest / rel).chmod(0o644)
        return
    header, light_ns, heavy_ns = HEAVY_SOME
    (dest / header).write_text(text.replace(f"namespace {light_ns}", f"namespace {heavy_ns}"))
    (dest / header).chmod(0o644)
    kernels = sorted((dest / "csrc" / "kernels").glob("kernel_[0-9]*.cpp"))
    for kernel in kernels[::heavy_every]:
        code = kernel.read_text()
        for old, new in (('#include "kernel_common.h"', f'#include "{Path(header).name}"'),
                         (f"using namespace {light_ns};", f"using namespace {heavy_ns};")):
            if old not in code:
                raise ExampleError(f"{kernel} lacks {old!r}: heavy_every no longer fits faketorch's kernels")
            code = code.replace(old, new, 1)
        kernel.write_text(code)


def _init_repo(name: str, dest: Path, branch: str, heavy: bool = False, heavy_every: int = 1) -> None:
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise ExampleError(f"{dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    _copy_tree(example_dir(name), dest)
    _weigh(name, dest, heavy, heavy_every)
    if name in ERAS:  # the first commit is the older era: its overlay, without the newer files
        overlay, absent, _, _ = ERAS[name]
        for rel in absent:
            target = dest / rel
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        _copy_tree(example_dir(overlay), dest)
    _git(dest, "init", "-q", "-b", branch)
    _git(dest, "add", "-A")


def _advance_era(name: str, dest: Path, heavy: bool = False, heavy_every: int = 1) -> None:
    """Commit the example's own (newer) tree on top of its era commit: files only the
    overlay has are removed, the example's files restored."""
    overlay, _, tag, era_branch = ERAS[name]
    _commit_and_tag(dest, f"{name}: {tag} (before the build-system migration)", tag)
    _git(dest, "branch", era_branch)
    overlay_root = example_dir(overlay)
    mine = example_dir(name)
    for path in sorted(overlay_root.rglob("*")):
        rel = path.relative_to(overlay_root)
        if path.is_file() and not (mine / rel).exists() and "__pycache__" not in rel.parts:
            _git(dest, "rm", "-q", "--", _dotted(str(rel)))
    _copy_tree(mine, dest)
    _weigh(name, dest, heavy, heavy_every)
    _git(dest, "add", "-A")


def _dotted(rel: str) -> str:
    parts = [("." + p[len(DOT_PREFIX):]) if p.startswith(DOT_PREFIX) else p for p in rel.split("/")]
    return "/".join(parts)


def _commit_and_tag(repo: Path, message: str, tag: str) -> str:
    _git(repo, "commit", "-q", "--no-verify", "-m", message)
    _git(repo, "tag", "-a", tag, "-m", f"{repo.name} {tag}")
    return _git(repo, "rev-parse", "HEAD")


def _ensure_submodule_repo(tree: str, dest: Path, branch: str) -> Path:
    """Write (or reuse) a submodule's fixture repo at dest."""
    if (dest / ".git").exists():
        return dest
    _init_repo(tree, dest, branch)
    _commit_and_tag(dest, f"{tree}: initial import", TAGS[tree])
    return dest


def faketorch_pinned_sha() -> str:
    """faketorch's ``v2.99.0`` commit (C++17, one before main) in a freshly written repo:
    the same on every machine (fixed identity, dates and relative submodule URL), so
    fakexla's ``.torch_commit`` can name it."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="faketorch-sha-") as tmp:
        return pinned_torch_commit(write_example_repo("faketorch", Path(tmp) / "faketorch"))


def pinned_torch_commit(faketorch: Path) -> str:
    """The commit of a faketorch repo that fakexla pins: its ``v2.99.0`` tag."""
    return _git(faketorch, "rev-parse", f"{TAGS['faketorch']}^{{commit}}")


def _require_cxx20(dest: Path) -> None:
    for rel, old, new in CXX20_EDITS:
        path = dest / rel
        text = path.read_text()
        if old not in text:
            raise ExampleError(f"{path} lacks {old!r}: CXX20_EDITS no longer fit faketorch")
        path.write_text(text.replace(old, new, 1))
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "--no-verify", "-m", "Require C++20 (as pytorch/pytorch#176662)")


def write_example_repo(
    name: str, dest: Path, branch: str | None = None, submodule_urls: Mapping[str, str] | None = None,
    torch_commit: str | None = None, heavy: bool = False, heavy_every: int = 1,
) -> Path:
    """Write example `name` as a git repo at `dest` (must be absent or empty); return dest.

    One commit with a fixed author, committer and date, plus an annotated tag
    (``TAGS[name]``), so HEAD's SHA is the same wherever it is written.

    faketorch's submodule repos are written beside it (``dest.parent/fakefmt``,
    reused if already there) and registered with the relative URL
    ``../fakefmt``: git resolves it against the superproject's remote (or its
    own directory when it has none), so a clone of ``<dir>/faketorch`` finds
    ``<dir>/fakefmt`` and the SHA does not depend on ``<dir>``. Pass
    ``submodule_urls={"third_party/fakefmt": "file:///..."}`` for an absolute
    URL instead (the SHA then depends on it).

    ``heavy=True`` gives faketorch's kernels the heavy weight (kernel_common_heavy.h,
    about 1.4 s of compile a unit, like a real PyTorch build, instead of 0.03 s): for the
    benchmarks, which measure what a compiler cache wins back, and for tests that must
    catch a build mid-compile. Its commits then have other SHAs than fakexla's pin.
    ``heavy_every=n`` makes only every n-th kernel heavy (kernel_000, kernel_00n, ...):
    for the tests that interrupt a build, which need compiles long enough to be caught,
    not 54 of them.
    """
    if heavy_every < 1:
        raise ExampleError(f"heavy_every must be 1 or more, not {heavy_every}")
    dest = Path(dest).absolute()
    branch = branch or DEFAULT_BRANCHES.get(name, "main")
    _init_repo(name, dest, branch, heavy, heavy_every)
    if name == "fakexla":
        # pytorch/xla's .torch_commit: a date comment, then the torch SHA master builds against.
        (dest / ".torch_commit").write_text(f"# {GIT_DATE[:10]}\n{torch_commit or faketorch_pinned_sha()}\n")
        _git(dest, "add", ".torch_commit")
    for path, tree in SUBMODULES.get(name, ()):
        sub_repo = _ensure_submodule_repo(tree, dest.parent / tree, branch)
        url = (submodule_urls or {}).get(path, os.path.relpath(sub_repo, dest))
        _git(dest, "submodule", "add", "-q", url, path)
    if name in ERAS:
        _advance_era(name, dest, heavy, heavy_every)
    _commit_and_tag(dest, f"{name}: initial import", TAGS[name])
    if name == "faketorch":
        _require_cxx20(dest)
    if name == "fakexla":
        write_pull_requests(dest, PULL_REQUESTS)
    return dest


# pytorch/xla keeps 7,148 refs/pull/N/head beside 3,353 branches and 64 tags (a snapshot
# of master 41398bf): GitHub's hidden refs, one per pull request, on no branch.
# fakexla gets a few hundred, so a mirror that took them would show.
PULL_REQUESTS = 300


def write_pull_requests(repo: Path, count: int) -> None:
    """``refs/pull/N/head`` for N in 1..count, each a commit on top of HEAD that no branch
    holds (a pull request's head), written in one ``git fast-import`` (fixed dates: the
    SHAs are the same everywhere; HEAD and the branches do not move)."""
    head = _git(repo, "rev-parse", "HEAD")
    stamp = "1704067200 +0000"  # GIT_DATE
    chunks = []
    for number in range(1, count + 1):
        message = f"Pull request {number}\n".encode()
        content = f"a change proposed in pull request {number}\n".encode()
        chunks.append(b"commit refs/pull/%d/head\n" % number
                      + f"author {GIT_NAME} <{GIT_EMAIL}> {stamp}\ncommitter {GIT_NAME} <{GIT_EMAIL}> {stamp}\n"
                      .encode()
                      + b"data %d\n%s" % (len(message), message)
                      + f"from {head}\n".encode()
                      + b"M 644 inline pull-requests/%d.txt\ndata %d\n%s\n" % (number, len(content), content))
    proc = subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, env=_git_env(), input=b"".join(chunks),
                          capture_output=True)
    if proc.returncode != 0:
        raise ExampleError(f"`git fast-import` failed in {repo}:\n{proc.stderr.decode(errors='replace').strip()}")


def head_sha(repo: Path) -> str:
    """The SHA of the commit checked out in ``repo``."""
    return _git(Path(repo), "rev-parse", "HEAD")


def commit_change(repo: Path, relpath: str, new_text: str | None = None, message: str | None = None,
                  branch: str | None = None) -> str:
    """Change one file and commit it; return the new commit's SHA.

    new_text replaces the file's content; by default a line naming the previous HEAD
    is appended: a tiny function in a .c/.cpp file (one real recompile), a comment elsewhere.
    Deterministic: the same change on the same commit gives the same SHA.

    With ``branch`` the commit goes on that branch (made from HEAD when it does not exist)
    and the checked-out branch is left where it was: a test that changes the sources this
    way leaves the default branch to the other tests of its module, in any order.
    """
    repo = Path(repo)
    if branch is not None:
        previous = _git(repo, "symbolic-ref", "--short", "HEAD")
        exists = _git(repo, "branch", "--list", branch)
        _git(repo, "checkout", "-q", *(() if exists else ("-b",)), branch)
        try:
            return commit_change(repo, relpath, new_text, message)
        finally:
            _git(repo, "checkout", "-q", previous)
    target = repo / relpath
    if new_text is None:
        if not target.is_file():
            raise ExampleError(f"{target} does not exist; pass new_text to create it")
        head = _git(repo, "rev-parse", "HEAD")
        if target.suffix in (".c", ".cpp"):
            # Real code, not a comment: ccache's preprocessor mode would call a comment-only
            # change a hit, and the point of the change is one real recompile.
            new_text = target.read_text() + (f'extern "C" int builder_changed_{head[:12]}(void) {{ return 1; }}\n'
                                             if target.suffix == ".cpp" else
                                             f"int builder_changed_{head[:12]}(void) {{ return 1; }}\n")
        else:
            marker = _COMMENT.get(target.suffix, "#")
            new_text = target.read_text() + f"{marker} changed after {head[:12]}\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(new_text)
    _git(repo, "add", "--", relpath)
    _git(repo, "commit", "-q", "--no-verify", "-m", message or f"Change {relpath}")
    return _git(repo, "rev-parse", "HEAD")


def write_example_repos(dest: Path, branch: str | None = None) -> dict[str, Path]:
    """Write every example as dest/<name> (plus faketorch's submodule repos)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    repos = {"faketorch": write_example_repo("faketorch", dest / "faketorch", branch=branch)}
    torch_sha = pinned_torch_commit(repos["faketorch"])
    for name in EXAMPLES:
        if name not in repos:
            repos[name] = write_example_repo(name, dest / name, branch=branch,
                                             torch_commit=torch_sha if name == "fakexla" else None)
    return repos


# ------------------------------------------------------------------ a Bazel mirror

BAZEL_VERSION = "7.4.1"  # fakexla's .bazelversion, as pytorch/xla's (master 41398bf)


def write_bazel_mirror(root: Path, version: str = BAZEL_VERSION) -> Path:
    """A directory laid out as bazelisk's BAZELISK_BASE_URL expects
    (``<root>/<version>/bazel-<version>-linux-x86_64``), holding the fake Bazel."""
    dest = Path(root) / version / f"bazel-{version}-linux-x86_64"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).resolve().parent / "fake_bazel.py", dest)
    dest.chmod(0o755)
    return Path(root)


class BazelMirror:
    """The mirror served over HTTP on 127.0.0.1 (bazelisk downloads only over HTTP(S)),
    from a daemon thread: ``url`` is what [bazel] base_url takes."""

    def __init__(self, root: Path) -> None:
        import functools
        import http.server
        import threading

        write_bazel_mirror(root)

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

        handler = functools.partial(Quiet, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="bazel-mirror", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> BazelMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
