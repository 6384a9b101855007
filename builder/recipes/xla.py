"""PyTorch/XLA, built the way pytorch/xla's CI builds it.

Followed (pytorch/xla master 41398bf, April 2026):
- layout: xla is checked out at ``pytorch/xla`` inside a torch checkout; WORKSPACE takes
  torch from ``PYTORCH_LOCAL_DIR = "../"`` (bazel/dependencies.bzl) and bazel/torch.BUILD
  reads torch/include/**, build/lib/libtorch*.so and aten/.../native_functions.yaml there.
  builder assembles that checkout from the torch wheel and the torch source at its SHA
  (builder.recipes.xla_layout), so torch is never recompiled for xla.
- Bazel: bazelisk (the deps layer, as .circleci/common.sh installs it) runs the Bazel of
  ``.bazelversion`` (USE_BAZEL_VERSION); BAZELISK_HOME keeps the download on the Bazel
  cache volume; BAZELISK_BASE_URL points at a mirror when one is configured.
- ``build_util.py``'s ``bazel_options_from_env()``: BAZEL_JOBS (--jobs), SILO_NAME
  (cache-silo-key), BAZEL_DISK_CACHE_PATH (--disk_cache, pytorch/xla#9695), DEBUG,
  TPUVM_MODE, BAZEL_REMOTE_CACHE; the version from TORCH_XLA_VERSION (+git<sha> unless
  GIT_VERSIONED_XLA_BUILD=0); C++ tests from BUILD_CPP_TESTS. XLA_CUDA is gone (#9582).
- the compiler is .bazelrc's (``build --action_env=CC=gcc``): builder sets no CC/CXX,
  which Bazel would not read anyway under --incompatible_strict_action_env.
- an HTTP remote cache has no knob upstream (its remote_cache config names Google's
  grpcs:// service): that one line goes to ``~/.bazelrc``.
- Bazel needs a user name ($USER, bazelbuild/bazel#16500): set for any uid.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from builder.recipes.base import BAZEL_CACHE_MOUNT, TORCH_CHECKOUT, BuildContext, Recipe

BAZEL_DISK_CACHE = f"{BAZEL_CACHE_MOUNT}/disk"
BAZELISK_HOME = f"{BAZEL_CACHE_MOUNT}/bazelisk"


class XlaRecipe(Recipe):
    name = "xla"
    project = "torch_xla"
    default_repo = "https://github.com/pytorch/xla.git"
    import_name = "torch_xla"
    builds_against = ("torch",)

    def pins(self, read: Callable[[str], str | None]) -> dict[str, str]:
        # pytorch/xla's .torch_commit: the torch commit its CI builds against
        text = read(".torch_commit")
        return {"torch": text.strip()} if text and text.strip() else {}

    @property
    def source_dir(self) -> str:
        return f"{TORCH_CHECKOUT}/xla"

    def env(self, ctx: BuildContext) -> dict[str, str]:
        env = {
            "BAZEL_JOBS": str(ctx.jobs),
            "BUILD_CPP_TESTS": "0",
            "SILO_NAME": ctx.cache_silo,
            "BAZEL_DISK_CACHE_PATH": BAZEL_DISK_CACHE,
            "USER": "builder",
            "SOURCE_DATE_EPOCH": str(ctx.source_date_epoch),
        }
        if ctx.bazel_version:
            env["USE_BAZEL_VERSION"] = ctx.bazel_version
            env["BAZELISK_HOME"] = BAZELISK_HOME
        else:
            # no Bazel: a plain torch C++ extension (torch.utils.cpp_extension), whose link step
            # would otherwise name Python's build-time x86_64-linux-gnu-g++, absent from the image
            env["CC"], env["CXX"] = "gcc", "g++"
        if ctx.bazel_base_url:
            env["BAZELISK_BASE_URL"] = ctx.bazel_base_url
        if ctx.version:
            env["TORCH_XLA_VERSION"] = ctx.version
            env["GIT_VERSIONED_XLA_BUILD"] = "0"
        env.update(ctx.extra_env)
        return env

    def unkeyed_env(self) -> set[str]:
        # Where caches and the Bazel download live (the Bazel version itself is keyed) and
        # who runs the build: speed, not output.
        return super().unkeyed_env() | {"BAZEL_DISK_CACHE_PATH", "BAZELISK_HOME", "BAZELISK_BASE_URL", "USER"}

    def bazelrc(self, ctx: BuildContext) -> str:
        if not ctx.bazel_remote:
            return ""
        # Upstream's .bazelrc sets --noremote_upload_local_results; without turning it
        # back on, the shared cache would be read but never filled.
        return f"build --remote_cache={ctx.bazel_remote}\nbuild --remote_upload_local_results\n"

    @staticmethod
    def remote_execution_bazelrc(executor: str, instance: str = "", jobs: int = 0) -> str:
        """The ~/.bazelrc lines that would run XLA's Bazel actions on a remote execution
        service (Buildbarn, NativeLink, BuildBuddy...: any REAPI endpoint). On paper only:
        no Bazel runs on builder's test machine (docs/bazel-remote-execution.md)."""
        if not executor.startswith(("grpc://", "grpcs://")):
            raise ValueError(f"a remote executor is a grpc:// or grpcs:// endpoint, not {executor!r}")
        lines = [f"build --remote_executor={executor}", "build --remote_upload_local_results",
                 "build --remote_download_toplevel",  # as upstream's remote_cache config
                 "build --spawn_strategy=remote,local",
                 "build --remote_timeout=3600"]
        if instance:
            lines.append(f"build --remote_instance_name={instance}")
        if jobs:
            lines.append(f"build --jobs={jobs}")  # remote slots, not local cores
        return "\n".join(lines) + "\n"

    def prepare_lines(self, ctx: BuildContext) -> list[str]:
        lines = [f"mkdir -p {BAZEL_DISK_CACHE} {BAZELISK_HOME}"]
        rc = self.bazelrc(ctx)
        if rc:
            lines.append(f'printf %s {shlex.quote(rc)} > "$HOME/.bazelrc"')
        return lines + super().prepare_lines(ctx)

    def smoke_code(self) -> str:
        return (
            "import torch, torch_xla\n"
            "print('torch', torch.__version__, 'torch_xla', torch_xla.__version__)\n"
            "if hasattr(torch_xla, 'add_via_torch'):\n"
            "    assert torch_xla.add_via_torch(2, 3) == 5, torch_xla.add_via_torch(2, 3)\n"
            "    print('torch_xla.add_via_torch(2, 3) == 5')\n"
        )
