# faketorchvision: pytorch/vision's setup.py (commit 004ebb5c, 2026: the version with the
# _C / _C_stable split) for a CPU build, trimmed to what a fixture needs. Kept as upstream
# has them: the env knobs and their defaults, get_version() (version.txt, "+<sha7>" unless
# BUILD_VERSION is set), write_version_file(), get_requirements() (PYTORCH_VERSION pins
# torch), get_macros_and_flags() (DEBUG: -g -O0, else -g0), the torchvision._C
# CppExtension globbing csrc/*.cpp, ops/*.cpp, ops/cpu/*.cpp, the torchvision.image
# extension with libpng (libpng-config) / libjpeg / libwebp found in TORCHVISION_INCLUDE,
# conda prefixes or /usr/include, and build_ext = BuildExtension.with_options(
# no_python_abi_suffix=True) (so the library is _C.so, loaded by torch.ops.load_library).
# Left out: CUDA/ROCm/MPS sources (none here; FORCE_CUDA=1 is refused), hipify, and the
# stable-ABI _C_stable / image_stable extensions upstream is migrating ops into.
import os
import shutil
import subprocess
import sys
import warnings
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from setuptools import find_packages, setup

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError as e:
    raise SystemExit(
        f"torchvision builds against an installed torch with torch.utils.cpp_extension, and importing it failed: {e}\n"
        "Install torch first and build without isolation (python -m build --wheel --no-isolation)."
    ) from e

FORCE_CUDA = os.getenv("FORCE_CUDA", "0") == "1"
FORCE_MPS = os.getenv("FORCE_MPS", "0") == "1"
DEBUG = os.getenv("DEBUG", "0") == "1"
USE_PNG = os.getenv("TORCHVISION_USE_PNG", "1") == "1"
USE_JPEG = os.getenv("TORCHVISION_USE_JPEG", "1") == "1"
USE_WEBP = os.getenv("TORCHVISION_USE_WEBP", "1") == "1"
USE_NVJPEG = os.getenv("TORCHVISION_USE_NVJPEG", "1") == "1"

TORCHVISION_INCLUDE = os.environ.get("TORCHVISION_INCLUDE", "")
TORCHVISION_LIBRARY = os.environ.get("TORCHVISION_LIBRARY", "")
TORCHVISION_INCLUDE = TORCHVISION_INCLUDE.split(os.pathsep) if TORCHVISION_INCLUDE else []
TORCHVISION_LIBRARY = TORCHVISION_LIBRARY.split(os.pathsep) if TORCHVISION_LIBRARY else []

ROOT_DIR = Path(__file__).absolute().parent
CSRS_DIR = ROOT_DIR / "torchvision/csrc"

if FORCE_CUDA:
    raise SystemExit("faketorchvision has no CUDA sources: build with FORCE_CUDA=0")

package_name = os.getenv("TORCHVISION_PACKAGE_NAME", "torchvision")

print("Torchvision build configuration:")
print(f"{FORCE_CUDA = }")
print(f"{FORCE_MPS = }")
print(f"{DEBUG = }")
print(f"{USE_PNG = }")
print(f"{USE_JPEG = }")
print(f"{USE_WEBP = }")
print(f"{USE_NVJPEG = }")
print(f"{TORCHVISION_INCLUDE = }")
print(f"{TORCHVISION_LIBRARY = }")


def get_version():
    with open(ROOT_DIR / "version.txt") as f:
        version = f.readline().strip()
    sha = "Unknown"

    try:
        sha = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=str(ROOT_DIR)).decode("ascii").strip()
    except Exception:
        pass

    if os.getenv("BUILD_VERSION"):
        version = os.getenv("BUILD_VERSION")
    elif sha != "Unknown":
        version += "+" + sha[:7]

    return version, sha


def write_version_file(version, sha):
    # Exists for BC, probably completely useless (upstream's words).
    with open(ROOT_DIR / "torchvision" / "version.py", "w") as f:
        f.write(f"__version__ = '{version}'\n")
        f.write(f"git_version = {repr(sha)}\n")
        f.write("from torchvision.extension import _check_cuda_version\n")
        f.write("if _check_cuda_version() > 0:\n")
        f.write("    cuda = _check_cuda_version()\n")


def get_requirements():
    def get_dist(pkgname):
        try:
            return distribution(pkgname)
        except PackageNotFoundError:
            return None

    pytorch_dep = os.getenv("TORCH_PACKAGE_NAME", "torch")
    if version_pin := os.getenv("PYTORCH_VERSION"):
        pytorch_dep += "==" + version_pin

    requirements = [
        "numpy",
        pytorch_dep,
    ]

    # Excluding 8.3.* because of https://github.com/pytorch/vision/issues/4934
    pillow_ver = " >= 5.3.0, !=8.3.*"
    pillow_req = "pillow-simd" if get_dist("pillow-simd") is not None else "pillow"
    requirements.append(pillow_req + pillow_ver)

    return requirements


def get_macros_and_flags():
    define_macros = []
    extra_compile_args = {"cxx": []}
    if DEBUG:
        extra_compile_args["cxx"].append("-g")
        extra_compile_args["cxx"].append("-O0")
    else:
        extra_compile_args["cxx"].append("-g0")
    return define_macros, extra_compile_args


def make_C_extension():
    print("Building _C extension")
    sources = list(CSRS_DIR.glob("*.cpp")) + list(CSRS_DIR.glob("ops/*.cpp")) + list(CSRS_DIR.glob("ops/cpu/*.cpp"))
    if torch.backends.mps.is_available() or FORCE_MPS:
        sources += list(CSRS_DIR.glob("ops/mps/*.mm"))
    define_macros, extra_compile_args = get_macros_and_flags()
    return CppExtension(
        name="torchvision._C",
        sources=sorted(str(s) for s in sources),
        include_dirs=[CSRS_DIR],
        define_macros=define_macros,
        extra_compile_args=extra_compile_args,
    )


def find_libpng():
    # Returns (found, include dir, library dir, library name)
    libpng_config = shutil.which("libpng-config")
    if libpng_config is None:
        warnings.warn("libpng-config not found", stacklevel=2)
        return False, None, None, None
    i_opts = subprocess.run([libpng_config, "--I_opts"], stdout=subprocess.PIPE).stdout.strip().decode("utf-8")
    include_dir = i_opts.split("-I")[1]
    library_dir = subprocess.run([libpng_config, "--libdir"], stdout=subprocess.PIPE).stdout.strip().decode("utf-8")
    return True, include_dir, library_dir, "png"


def find_library(header):
    # returns (found, include dir, library dir); None dirs: the standard search paths
    searching_for = f"Searching for {header}"
    for folder in TORCHVISION_INCLUDE:
        if (Path(folder) / header).exists():
            print(f"{searching_for} in {Path(folder) / header}. Found in TORCHVISION_INCLUDE.")
            return True, None, None
    print(f"{searching_for}. Didn't find in TORCHVISION_INCLUDE.")
    for prefix_env_var in ("BUILD_PREFIX", "CONDA_PREFIX"):
        if (prefix := os.environ.get(prefix_env_var)) is not None:
            prefix = Path(prefix)
            include_dir = prefix / "include"
            library_dir = prefix / "lib"
            if (include_dir / header).exists():
                print(f"{searching_for}. Found in {prefix_env_var}.")
                return True, str(include_dir), str(library_dir)
        print(f"{searching_for}. Didn't find in {prefix_env_var}.")
    if sys.platform == "linux":
        for prefix in (Path("/usr/include"), Path("/usr/local/include")):
            if (prefix / header).exists():
                print(f"{searching_for}. Found in {prefix}.")
                return True, None, None
            print(f"{searching_for}. Didn't find in {prefix}")
    return False, None, None


def make_image_extension():
    print("Building image extension")
    include_dirs = TORCHVISION_INCLUDE.copy()
    library_dirs = TORCHVISION_LIBRARY.copy()
    libraries = []
    define_macros, extra_compile_args = get_macros_and_flags()
    image_dir = CSRS_DIR / "io/image"
    sources = list(image_dir.glob("*.cpp")) + list(image_dir.glob("cpu/*.cpp"))

    if USE_PNG:
        png_found, png_include_dir, png_library_dir, png_library = find_libpng()
        if png_found:
            print("Building torchvision with PNG support")
            include_dirs.append(png_include_dir)
            library_dirs.append(png_library_dir)
            libraries.append(png_library)
            define_macros += [("PNG_FOUND", 1)]
        else:
            warnings.warn("Building torchvision without PNG support", stacklevel=2)

    for use, header, library, macro in ((USE_JPEG, "jpeglib.h", "jpeg", "JPEG_FOUND"),
                                        (USE_WEBP, "webp/decode.h", "webp", "WEBP_FOUND")):
        if not use:
            continue
        found, include_dir, library_dir = find_library(header=header)
        if found:
            print(f"Building torchvision with {macro[:-6]} support")
            if include_dir is not None and library_dir is not None:
                include_dirs.append(include_dir)
                library_dirs.append(library_dir)
            libraries.append(library)
            define_macros += [(macro, 1)]
        else:
            warnings.warn(f"Building torchvision without {macro[:-6]} support", stacklevel=2)

    if USE_NVJPEG:
        warnings.warn("Building torchvision without NVJPEG support", stacklevel=2)  # CPU: no CUDA

    return CppExtension(
        name="torchvision.image",
        sources=sorted(str(s) for s in sources),
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        define_macros=define_macros,
        libraries=libraries,
        extra_compile_args=extra_compile_args,
    )


if __name__ == "__main__":
    version, sha = get_version()
    write_version_file(version, sha)

    print(f"Building wheel {package_name}-{version}")

    with open("README.md") as f:
        readme = f.read()

    setup(
        name=package_name,
        version=version,
        author="builder fixtures",
        url="https://example.invalid/faketorchvision",
        description="faketorchvision: a pytorch/vision-shaped fixture for builder's tests",
        long_description=readme,
        long_description_content_type="text/markdown",
        license="BSD",
        packages=find_packages(exclude=("test",)),
        package_data={package_name: ["*.dll", "*.dylib", "*.so"]},
        zip_safe=False,
        install_requires=get_requirements(),
        ext_modules=[make_C_extension(), make_image_extension()],
        python_requires=">=3.10",
        cmdclass={"build_ext": BuildExtension.with_options(no_python_abi_suffix=True)},
    )
