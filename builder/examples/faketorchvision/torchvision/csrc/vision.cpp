// faketorchvision: pytorch/vision's torchvision/csrc/vision.cpp (commit 0125a7dc):
// _cuda_version, which extension.py's _check_cuda_version() calls (-1: a CPU build).
#include "vision.h"

#include <torch/library.h>

#ifdef WITH_CUDA
#include <cuda.h>
#endif

namespace vision {
int64_t cuda_version() {
#ifdef WITH_CUDA
  return CUDA_VERSION;
#else
  return -1;
#endif
}

TORCH_LIBRARY_FRAGMENT(torchvision, m) {
  m.def("_cuda_version", &cuda_version);
}
} // namespace vision
