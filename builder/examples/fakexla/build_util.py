"""Build helpers, shaped like pytorch/xla's build_util.py.

bazel_options_from_env() copies the logic of upstream's
build_util.py::bazel_options_from_env (github.com/pytorch/xla, build_util.py,
read at commits b834e49 and 47d6ea1; the same logic is inline in setup.py's
BuildBazelExtension at 0015ea6): the same environment variables, flags and
order. Keep it in step with upstream: builder's XLA recipe is tested against
this copy.

Note what upstream does NOT read: there is no environment variable for extra
Bazel options (no --disk_cache knob). A local disk or HTTP cache reaches
upstream's Bazel through an rc file: $HOME/.bazelrc, /etc/bazel.bazelrc, or
%workspace%/.bazelrc.user (try-imported by upstream's .bazelrc). fake_bazel.py
reads the same files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping


def check_env_flag(name: str, default: str = "", env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(name, default).upper() in ["ON", "1", "YES", "TRUE", "Y"]


def bazel_options_from_env(
    env: Mapping[str, str] | None = None, getsize: Callable[[str], int] = os.path.getsize
) -> list[str]:
    """Bazel flags from the environment, as upstream computes them (pure given env and getsize)."""
    env = os.environ if env is None else env
    bazel_flags = []

    if check_env_flag("DEBUG", env=env):
        bazel_flags.append("--config=dbg")

    if check_env_flag("TPUVM_MODE", env=env):
        bazel_flags.append("--config=tpu")

    gcloud_key_file = env.get("GCLOUD_SERVICE_KEY_FILE", "")
    # Remote cache authentication.
    if gcloud_key_file:
        # Upstream: a key file of size <= 1 (forked-repo CI) means "no credentials".
        if getsize(gcloud_key_file) > 1:
            bazel_flags.append(f"--google_credentials={gcloud_key_file}")
            bazel_flags.append("--config=remote_cache")
    else:
        if check_env_flag("BAZEL_REMOTE_CACHE", env=env):
            bazel_flags.append("--config=remote_cache")

    # Default 'dev': the silo key is always set, even without a remote cache.
    cache_silo_name = env.get("SILO_NAME", "dev")
    if cache_silo_name:
        bazel_flags.append(f"--remote_default_exec_properties=cache-silo-key={cache_silo_name}")

    bazel_jobs = env.get("BAZEL_JOBS", "")
    if bazel_jobs:
        bazel_flags.append(f"--jobs={bazel_jobs}")

    # Build configuration.
    if check_env_flag("BAZEL_VERBOSE", env=env):
        bazel_flags.append("-s")
    if check_env_flag("XLA_CPU_USE_ACL", env=env):
        bazel_flags.append("--config=acl")

    # Since pytorch/xla#9695: a disk cache from the environment (XLA_CUDA is gone, #9582).
    disk_cache = env.get("BAZEL_DISK_CACHE_PATH")
    if disk_cache is not None:
        bazel_flags.append(f"--disk_cache={disk_cache}")

    return bazel_flags


def get_build_version(xla_git_sha: str, env: Mapping[str, str] | None = None) -> str:
    """Upstream's rule: TORCH_XLA_VERSION (default here 2.98.0: one minor behind the torch its .torch_commit pins, as
    upstream's 2.9.0 beside a 2.10.0a0 torch), plus '+git<sha7>'
    unless GIT_VERSIONED_XLA_BUILD is false -- even when TORCH_XLA_VERSION is set."""
    env = os.environ if env is None else env
    version = env.get("TORCH_XLA_VERSION", "2.98.0")
    if check_env_flag("GIT_VERSIONED_XLA_BUILD", default="TRUE", env=env) and xla_git_sha:
        version += "+git" + xla_git_sha[:7]
    return version
