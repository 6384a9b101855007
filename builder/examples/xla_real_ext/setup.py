# xla_real_ext: an XLA-shaped extension built against the REAL torch wheel
# with torch.utils.cpp_extension (CppExtension + BuildExtension), as
# out-of-tree torch extensions are. Build with torch installed:
#
#   pip wheel --no-build-isolation --no-deps .
#
# Environment: MAX_JOBS (ninja parallelism, read by torch's BuildExtension),
# CXX (compiler), TORCH_XLA_VERSION / GIT_VERSIONED_XLA_BUILD (version, with the
# same rule as pytorch/xla: '+git<sha7>' is appended unless the latter is false).
# The default, 2.9.0 as upstream's setup.py, pairs with the real torch 2.9.0 it builds against.

import os
import subprocess

from setuptools import find_packages, setup

try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError as e:
    raise SystemExit(
        f"xla_real_ext builds against an installed torch, and importing it failed: {e}\n"
        "Install torch first and build with --no-build-isolation."
    ) from e

BASE_DIR = os.path.dirname(os.path.abspath(__file__))


def check_env_flag(name, default=""):
    return os.getenv(name, default).upper() in ["ON", "1", "YES", "TRUE", "Y"]


def get_version():
    version = os.getenv("TORCH_XLA_VERSION", "2.9.0")
    if check_env_flag("GIT_VERSIONED_XLA_BUILD", default="TRUE"):
        try:
            sha = subprocess.check_output(
                ["git", "rev-parse", "HEAD"], cwd=BASE_DIR, stderr=subprocess.DEVNULL
            )
            version += "+git" + sha.decode("ascii").strip()[:7]
        except (OSError, subprocess.CalledProcessError):
            pass
    return version


setup(
    name="torch_xla_real_ext",
    version=get_version(),
    description="xla_real_ext: a torch.utils.cpp_extension fixture for builder's tests",
    url="https://example.invalid/xla_real_ext",
    license="BSD-3-Clause",
    python_requires=">=3.9",
    packages=find_packages(include=["torch_xla_real_ext", "torch_xla_real_ext.*"]),
    ext_modules=[
        CppExtension(
            "torch_xla_real_ext._C",
            sources=["csrc/ops.cpp", "csrc/reduce.cpp", "csrc/bindings.cpp"],
            extra_compile_args=["-O2", "-g0"],  # -g from Python's CFLAGS: 10x the wheel size
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    zip_safe=False,
)
