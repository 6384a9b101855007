"""fakexla: the Python face of _XLAC."""

# torch first: loads libtorch_cpu.so before _XLAC, as upstream torch_xla does.
import torch  # noqa: F401

# isort: split
import _XLAC

from .version import __torch_gitrev__, __version__, __xla_gitrev__

__all__ = ["__version__", "__xla_gitrev__", "__torch_gitrev__", "add_via_torch", "_XLAC"]


def add_via_torch(a: float, b: float) -> float:
    """a + b: Python -> _XLAC -> faketorch::add in torch's libtorch_cpu.so."""
    return _XLAC._add_via_torch(a, b)
