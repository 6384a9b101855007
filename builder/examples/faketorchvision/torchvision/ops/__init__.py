# faketorchvision: pytorch/vision's torchvision/ops/__init__.py (one of its exports).
from .boxes import box_area, nms

__all__ = ["box_area", "nms"]
