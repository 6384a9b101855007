# faketorchvision: pytorch/vision's torchvision/ops/boxes.py: nms is the C++ op registered by
# csrc/ops/nms.cpp (schema) and csrc/ops/cpu/nms_kernel.cpp (CPU kernel); box_area is Python.
import torch
from torch import Tensor

from ..extension import _assert_has_ops


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Indices of the boxes kept by non-maximum suppression, by decreasing score."""
    _assert_has_ops()
    return torch.ops.torchvision.nms(boxes, scores, iou_threshold)


def box_area(boxes: Tensor) -> Tensor:
    """Area of (x1, y1, x2, y2) boxes."""
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
