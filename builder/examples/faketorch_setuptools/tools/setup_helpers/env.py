"""Build knobs read from the environment, in one place.

Mirrors pytorch's tools/setup_helpers/env.py: the same flag spelling
(ON/1/YES/TRUE/Y), the same BUILD_DIR, and the same CMAKE_BUILD_TYPE rule
(CMAKE_BUILD_TYPE wins, then DEBUG, then REL_WITH_DEB_INFO, else Release).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Fixed and relative to the source root, as upstream: compile commands then
# look the same from every checkout, which is what lets ccache's base_dir
# give hits across different absolute paths.
BUILD_DIR = "build"


def check_env_flag(name: str, default: str = "", env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(name, default).upper() in ("ON", "1", "YES", "TRUE", "Y")


def check_negative_env_flag(name: str, default: str = "", env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(name, default).upper() in ("OFF", "0", "NO", "FALSE", "N")


def cmake_build_type(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("CMAKE_BUILD_TYPE"):
        return env["CMAKE_BUILD_TYPE"]
    if check_env_flag("DEBUG", env=env):
        return "Debug"
    if check_env_flag("REL_WITH_DEB_INFO", env=env):
        return "RelWithDebInfo"
    return "Release"


def max_jobs(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("MAX_JOBS") or str(os.cpu_count() or 1)
