// faketorchvision: pytorch/vision's torchvision/csrc/io/image/image.h (which includes the
// codec headers; here only the probe of what was compiled in).
#pragma once

#include <cstdint>

namespace vision {
namespace image {

// Bit mask of the codecs compiled in: 1 PNG, 2 JPEG, 4 WEBP (setup.py's *_FOUND macros).
int64_t codecs();

} // namespace image
} // namespace vision
