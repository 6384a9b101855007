"""PyTorch: a PEP 517 wheel build with the knobs upstream reads from the env.

Followed (docs/upstream.md lists each item with its source): pytorch/pytorch
``.ci/manywheel/build_common.sh`` (``python -m build --wheel --no-isolation``);
on main, ``pyproject.toml`` (scikit-build-core, #180247) maps USE_CUDA, BUILD_TEST and
MAX_JOBS through env-backed settings and ``tools/metadata/version.py`` reads
PYTORCH_BUILD_VERSION/PYTORCH_BUILD_NUMBER; in the setuptools era ``setup.py`` and
``tools/setup_helpers/{env,cmake}.py`` read the same names. CMake >= 3.17 reads
``CMAKE_<LANG>_COMPILER_LAUNCHER`` from the environment in both eras, so ccache wraps
every compile; CMAKE_BUILD_PARALLEL_LEVEL caps ``cmake --build`` where MAX_JOBS is not
mapped.
"""

from __future__ import annotations

import re
from pathlib import Path

from builder.errors import BuildError
from builder.mounts import CCACHE_MOUNT, DIST_CLIENT_CONF
from builder.recipes.base import OUT_MOUNT, BuildContext, Recipe
from builder.recipes.xla_layout import assemble, torch_commit_of_wheel
from builder.source.mirror import SourceTree, read_at_commit


class TorchRecipe(Recipe):
    name = "torch"
    project = "torch"
    default_repo = "https://github.com/pytorch/pytorch.git"
    import_name = "torch"
    compiler_launcher = True
    # Estimates, not measured by builder (no real pytorch build fits this machine): a
    # `git clone --recursive` work tree of pytorch with its third_party submodules is a few
    # GiB, a CPU-only CMake/ninja build/ tree ~10 GiB of objects and libraries; ccache's own
    # growth per build is bounded by [cache] ccache_max_size (default 20G) but a warm cache
    # adds far less. Upstream's only figure, "ideally 5 GB" (pytorch/pytorch#2046, 2017), is
    # a lower bound from when torch was much smaller. See README "Disk".
    disk_gib = (("source", 4.0), ("build tree", 12.0), ("ccache", 4.0))
    flag_help = ("torch ref (branch, tag, SHA) to build, or a prebuilt version (default with --xla REF: the torch "
                 "its .torch_commit pins).")
    version_env = "PYTORCH_BUILD_VERSION"
    unpinned_help = "Build xla against --torch even where it differs from .torch_commit."
    nightly = True
    example = "faketorch"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        # sccache (its dist client configured by builder.caches.dist) when compiles are distributed
        launcher = "sccache" if ctx.dist_port else "ccache"
        env = {
            "MAX_JOBS": str(ctx.jobs),
            "CMAKE_BUILD_PARALLEL_LEVEL": str(ctx.jobs),
            "USE_CUDA": "0",
            "BUILD_TEST": "0",
            "CMAKE_C_COMPILER_LAUNCHER": launcher,
            "CMAKE_CXX_COMPILER_LAUNCHER": launcher,
            "CC": "gcc",
            "CXX": "g++",
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        if ctx.version:
            env["PYTORCH_BUILD_VERSION"] = ctx.version
            env["PYTORCH_BUILD_NUMBER"] = "0"
        if ctx.dist_port:
            env.update(SCCACHE_DIR=f"{CCACHE_MOUNT}/sccache", SCCACHE_CONF=f"{OUT_MOUNT}/{DIST_CLIENT_CONF}",
                       SCCACHE_SERVER_PORT=str(ctx.dist_port))
        env.update(ctx.extra_env)
        return env

    def release_base(self, mirror: Path, sha: str) -> str:
        """``version.txt`` at ``sha``: upstream's source of the release number."""
        text = (read_at_commit(mirror, sha, "version.txt") or "").strip()
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)+[A-Za-z0-9.]*", text):
            raise BuildError(f"cannot read version.txt at {sha[:12]}", "a torch tree carries version.txt at its root")
        return text

    def commit_of_wheel(self, wheel: Path) -> str:
        return torch_commit_of_wheel(wheel)  # torch/version.py's git_version

    def assemble_checkout(self, mirrors: Path, url: str, sha: str, wheel: Path, dest: Path) -> SourceTree:
        # the torch checkout torch_xla builds inside, completed from the wheel (builder.recipes.xla_layout)
        return assemble(mirrors, url, sha, wheel, dest)

    def smoke_code(self) -> str:
        return (
            "import torch\n"
            "print('torch', torch.__version__)\n"
            "if hasattr(torch, 'add'):\n"
            "    assert torch.add(2, 3) == 5\n"
            "else:\n"
            "    t = torch.ones(3) + torch.ones(3)\n"
            "    assert float(t.sum()) == 6.0\n"
        )
