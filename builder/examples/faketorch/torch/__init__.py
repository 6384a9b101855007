"""faketorch: the Python face of the fixture's libtorch_cpu.so."""

import os as _os

from torch import _C
from torch.version import __version__, git_version

__all__ = ["__version__", "git_version", "add", "describe_add", "include_dir", "lib_dir"]

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def add(a: float, b: float) -> float:
    """a + b, computed by faketorch::add in libtorch_cpu.so."""
    return _C.add(a, b)


def describe_add(a: float, b: float) -> str:
    """'a + b = c', formatted in C++ with the fakefmt submodule's header."""
    return _C._describe_add(a, b)


def include_dir() -> str:
    """Directory holding faketorch/*.h, for extensions that compile against torch."""
    return _os.path.join(_HERE, "include")


def lib_dir() -> str:
    """Directory holding libtorch_cpu.so."""
    return _os.path.join(_HERE, "lib")
