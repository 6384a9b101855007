# faketorchvision: pytorch/vision's torchvision/__init__.py, reduced to the parts that load
# C++: importing torchvision loads _C.so through extension.py (its TORCH_LIBRARY ops become
# torch.ops.torchvision.*), and __version__ comes from version.py, which setup.py writes.
import torch  # noqa: F401  (libtorch first: _C.so links against it)

from torchvision import io, ops  # noqa: F401
from torchvision.extension import _HAS_OPS  # noqa: F401

try:
    from .version import __version__  # noqa: F401
except ImportError:
    pass
