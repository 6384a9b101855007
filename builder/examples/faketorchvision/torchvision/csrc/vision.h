// faketorchvision: pytorch/vision's torchvision/csrc/vision.h.
#pragma once

#include <cstdint>

namespace vision {
int64_t cuda_version();
} // namespace vision
