# faketorchvision: pytorch/vision's torchvision/io/image.py loads the separate "image"
# extension (csrc/io/image) the same way extension.py loads _C, and warns when it cannot.
import warnings

import torch

from ..extension import _load_library

try:
    _load_library("image")
except (ImportError, OSError) as e:
    warnings.warn(f"Failed to load image Python extension: '{e}'", stacklevel=2)


def image_codecs() -> list:
    """The image codecs compiled in (setup.py's PNG_FOUND / JPEG_FOUND / WEBP_FOUND)."""
    mask = torch.ops.image._codecs()
    return [name for bit, name in ((1, "png"), (2, "jpeg"), (4, "webp")) if mask & bit]
