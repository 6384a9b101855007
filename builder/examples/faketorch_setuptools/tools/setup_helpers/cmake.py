"""Configure and build libtorch_cpu.so with CMake + Ninja.

Mirrors pytorch's tools/setup_helpers/cmake.py: every environment variable
starting with BUILD_, USE_ or CMAKE_ is passed to CMake as -DNAME=VALUE (so
CMAKE_C_COMPILER_LAUNCHER=ccache / CMAKE_CXX_COMPILER_LAUNCHER=ccache work),
CMAKE_INSTALL_PREFIX is the in-tree torch/ package, and the build runs
`cmake --build . --target install -- -j MAX_JOBS`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping

from .env import BUILD_DIR, cmake_build_type, max_jobs

# Set by this script; the environment must not override them (upstream errors too).
OWNED_OPTIONS = ("CMAKE_INSTALL_PREFIX",)


def cmake_defines(env: Mapping[str, str], source_dir: str, version: str) -> dict[str, str]:
    """Pure: the -D options CMake gets for this environment."""
    defines = {
        "CMAKE_BUILD_TYPE": cmake_build_type(env),
        "TORCH_BUILD_VERSION": version,
        "PYTHON_EXECUTABLE": sys.executable,
    }
    for var, val in env.items():
        if var.startswith(("BUILD_", "USE_", "CMAKE_")):
            defines[var] = val
    clash = sorted(set(defines) & set(OWNED_OPTIONS))
    if clash:
        raise SystemExit(
            f"{', '.join(clash)} should not be set in the environment: the build script sets it."
        )
    defines["CMAKE_INSTALL_PREFIX"] = os.path.join(source_dir, "torch")
    return defines


def _run(cmd: list[str], cwd: str) -> None:
    print(" ".join(cmd), flush=True)
    subprocess.check_call(cmd, cwd=cwd)


def build(source_dir: str, version: str, env: Mapping[str, str] | None = None) -> None:
    """Configure (once) and build, installing into torch/lib and torch/include."""
    env = os.environ if env is None else env
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            raise SystemExit(f"faketorch needs `{tool}` on PATH")
    build_dir = os.path.join(source_dir, BUILD_DIR)
    os.makedirs(build_dir, exist_ok=True)
    cache = os.path.join(build_dir, "CMakeCache.txt")
    ninja_file = os.path.join(build_dir, "build.ninja")
    if not (os.path.exists(cache) and os.path.exists(ninja_file)):
        defines = cmake_defines(env, source_dir, version)
        args = ["cmake", "-GNinja"] + [f"-D{k}={v}" for k, v in sorted(defines.items())]
        # Relative source dir: the configure line is the same from any checkout.
        _run(args + [".."], cwd=build_dir)
    _run(["cmake", "--build", ".", "--target", "install", "--", "-j", max_jobs(env)], cwd=build_dir)
