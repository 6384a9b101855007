"""PyTorch/XLA: built against the torch wheel from the local index, Bazel caches wired in.

Followed: pytorch/xla ``setup.py`` and ``build_util.py``: ``bazel_options_from_env()``
reads BAZEL_JOBS (-> --jobs), BAZEL_REMOTE_CACHE (-> --config=remote_cache), SILO_NAME
(-> --remote_default_exec_properties=cache-silo-key=...), XLA_CUDA, DEBUG, TPUVM_MODE;
the version comes from TORCH_XLA_VERSION (+git<sha> unless GIT_VERSIONED_XLA_BUILD=0),
and C++ tests from BUILD_CPP_TESTS. setup.py runs plain ``bazel build``, which reads the
user's ``~/.bazelrc``: that is where builder puts ``--disk_cache`` (a volume) and an
optional ``--remote_cache=http://...`` (upstream's remote_cache config names its own GCS
bucket, so it is not reused). Upstream builds XLA with clang.
"""

from __future__ import annotations

import shlex

from builder.recipes.base import BAZEL_CACHE_MOUNT, BuildContext, Recipe, pip_from_local_index


class XlaRecipe(Recipe):
    name = "xla"
    project = "torch_xla"
    repo_key = "xla"
    import_name = "torch_xla"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        env = {
            "MAX_JOBS": str(ctx.jobs),
            "BAZEL_JOBS": str(ctx.jobs),
            "BUILD_CPP_TESTS": "0",
            "XLA_CUDA": "0",
            "SILO_NAME": ctx.cache_silo,
            "CC": "clang",
            "CXX": "clang++",
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        if ctx.version:
            env["TORCH_XLA_VERSION"] = ctx.version
            env["GIT_VERSIONED_XLA_BUILD"] = "0"
        env.update(ctx.extra_env)
        return env

    def bazelrc(self, ctx: BuildContext) -> str:
        lines = [f"build --disk_cache={BAZEL_CACHE_MOUNT}"]
        if ctx.bazel_remote:
            # Upstream's .bazelrc sets --noremote_upload_local_results; without turning it
            # back on, the shared cache would be read but never filled.
            lines.append(f"build --remote_cache={ctx.bazel_remote}")
            lines.append("build --remote_upload_local_results")
        return "\n".join(lines) + "\n"

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        lines = [f'printf %s {shlex.quote(self.bazelrc(ctx))} > "$HOME/.bazelrc"']
        if ctx.torch_requirement:
            # --target: works for any uid (the venv belongs to root); setup.py then finds it.
            lines.append(pip_from_local_index(ctx.torch_requirement, target_home_dir="site"))
            lines.append('export PYTHONPATH="$HOME/site"')
        return lines

    def smoke_code(self) -> str:
        return (
            "import torch, torch_xla\n"
            "print('torch', torch.__version__, 'torch_xla', torch_xla.__version__)\n"
            "if hasattr(torch_xla, 'add_via_torch'):\n"
            "    assert torch_xla.add_via_torch(2, 3) == 5, torch_xla.add_via_torch(2, 3)\n"
            "    print('torch_xla.add_via_torch(2, 3) == 5')\n"
        )
