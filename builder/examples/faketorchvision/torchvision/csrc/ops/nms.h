// faketorchvision: pytorch/vision's torchvision/csrc/ops/nms.h.
#pragma once

#include <ATen/ATen.h>

namespace vision {
namespace ops {

at::Tensor nms(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold);

} // namespace ops
} // namespace vision
