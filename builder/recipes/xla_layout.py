"""The torch checkout torch_xla builds inside: pytorch/xla's layout, without a torch compile.

pytorch/xla (master 41398bf) is checked out at ``pytorch/xla``; its WORKSPACE takes torch
from ``PYTORCH_LOCAL_DIR = "../"`` (bazel/dependencies.bzl) and bazel/torch.BUILD reads
there ``torch/include/**`` (headers), ``build/lib/libtorch*.so`` (libraries) and the
``aten/src/ATen/native/*.yaml`` + templates torchgen needs (source files); the hermetic
Python setup reads torch's wheel from ``dist/`` (``local_wheel_workspaces``). Upstream
gets the first two by compiling torch in place (``python setup.py develop``); pytorch/xla
PR #9340 works towards taking them from a torch wheel instead. builder does that: the
torch source at the wheel's commit (a clean checkout, no submodules: nothing xla reads
lives in them), the headers and libraries copied out of the very wheel the xla build
installs, the wheel itself in ``dist/``. Torch is never recompiled for xla, whether its
wheel was built in this run, earlier, or is a prebuilt release.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from builder.errors import BuildError
from builder.source.mirror import SourceTree, checkout, update_mirror

_GIT_VERSION = re.compile(r"""^git_version\s*=\s*['"]([0-9a-f]{40})['"]""", re.M)


def torch_commit_of_wheel(wheel: Path) -> str:
    """The commit a torch wheel was built from: ``git_version`` in its torch/version.py
    (written by pytorch's build, and by faketorch's)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read("torch/version.py").decode("utf-8", errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise BuildError(f"cannot read torch/version.py in {wheel.name}: {exc}",
                         "torch_xla builds inside the torch checkout of its torch wheel's commit") from None
    match = _GIT_VERSION.search(text)
    if match is None:
        raise BuildError(f"{wheel.name} records no git commit (torch/version.py has no git_version)",
                         "build torch from source with builder, or use a release wheel that records one")
    return match.group(1)


def overlay_wheel(wheel: Path, tree: Path) -> int:
    """Copy the torch wheel's headers to ``torch/include`` and its shared libraries to
    ``build/lib`` (where torch.BUILD looks), and the wheel into ``dist/``; returns the
    number of files written."""
    written = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = PurePosixPath(info.filename)
            if info.is_dir() or ".." in name.parts or name.is_absolute():
                continue
            if name.parts[:2] == ("torch", "include"):
                target = tree / Path(*name.parts)
            elif name.parts[:2] == ("torch", "lib") and ".so" in name.name:
                target = tree / "build" / "lib" / name.name
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            written += 1
    (tree / "dist").mkdir(exist_ok=True)
    shutil.copyfile(wheel, tree / "dist" / wheel.name)
    return written + 1


def assemble(mirrors: Path, url: str, sha: str, wheel: Path, dest: Path) -> SourceTree:
    """The torch checkout at ``sha`` with ``wheel``'s build outputs in place and an empty
    ``xla/`` for the xla checkout to be mounted on."""
    mirror = update_mirror(mirrors, url, sha)
    tree = checkout(mirror, url, sha, dest, submodules=False)  # cleaned: no earlier overlay survives
    overlay_wheel(wheel, tree.path)
    (tree.path / "xla").mkdir(exist_ok=True)
    return tree
