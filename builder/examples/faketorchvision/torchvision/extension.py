# faketorchvision: pytorch/vision's torchvision/extension.py (commit 0341aa50): find the
# extension library next to this file with the import machinery's suffixes (setup.py's
# no_python_abi_suffix=True makes it plain _C.so) and load it with torch.ops.load_library,
# which runs its TORCH_LIBRARY registrations; _HAS_OPS says whether that worked.
import importlib.machinery
import os

import torch

_HAS_OPS = False


def _get_extension_path(lib_name):
    lib_dir = os.path.dirname(__file__)
    loader_details = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    extfinder = importlib.machinery.FileFinder(lib_dir, loader_details)
    ext_specs = extfinder.find_spec(lib_name)
    if ext_specs is None:
        raise ImportError(f"torchvision: no {lib_name} extension library in {lib_dir}")
    return ext_specs.origin


def _load_library(lib_name):
    torch.ops.load_library(_get_extension_path(lib_name))


try:
    _load_library("_C")
    _HAS_OPS = True
except (ImportError, OSError):
    import traceback

    traceback.print_exc()


def _has_ops():
    return _HAS_OPS


def _assert_has_ops():
    if not _has_ops():
        raise RuntimeError(
            "Couldn't load custom C++ ops. This can happen if your PyTorch and "
            "torchvision versions are incompatible, or if you had errors while compiling "
            "torchvision from source."
        )


def _check_cuda_version():
    """Make sure that CUDA versions match between the pytorch install and torchvision install."""
    if not _HAS_OPS:
        return -1
    return torch.ops.torchvision._cuda_version()
