// faketorchvision: pytorch/vision's torchvision/csrc/io/image/image.cpp: the "image" op
// library (upstream: decode_png, decode_jpeg, ... each compiled with or without its codec
// per setup.py's PNG_FOUND / JPEG_FOUND / WEBP_FOUND). Here one op reports which were.
#include "image.h"

#include <torch/library.h>

namespace vision {
namespace image {

int64_t codecs() {
  int64_t mask = 0;
#if PNG_FOUND
  mask |= 1;
#endif
#if JPEG_FOUND
  mask |= 2;
#endif
#if WEBP_FOUND
  mask |= 4;
#endif
  return mask;
}

TORCH_LIBRARY(image, m) {
  m.def("_codecs", &codecs);
}

} // namespace image
} // namespace vision
