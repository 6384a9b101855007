"""PyTorch: ``python setup.py bdist_wheel`` with the knobs upstream reads from the env.

Followed: pytorch/pytorch ``.ci/manywheel/build_common.sh`` (``python setup.py
bdist_wheel``), ``setup.py`` and ``tools/setup_helpers/env.py`` (MAX_JOBS, USE_CUDA,
BUILD_TEST, PYTORCH_BUILD_VERSION/PYTORCH_BUILD_NUMBER), ``tools/setup_helpers/cmake.py``
(every ``CMAKE_*`` variable is passed to CMake, so the ccache launchers reach it).
"""

from __future__ import annotations

from builder.recipes.base import BuildContext, Recipe


class TorchRecipe(Recipe):
    name = "torch"
    project = "torch"
    repo_key = "torch"
    import_name = "torch"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        env = {
            "MAX_JOBS": str(ctx.jobs),
            "USE_CUDA": "0",
            "BUILD_TEST": "0",
            "CMAKE_C_COMPILER_LAUNCHER": "ccache",
            "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
            "CC": "gcc",
            "CXX": "g++",
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        if ctx.version:
            env["PYTORCH_BUILD_VERSION"] = ctx.version
            env["PYTORCH_BUILD_NUMBER"] = "0"
        env.update(ctx.extra_env)
        return env

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
