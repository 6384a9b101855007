// Built only with BUILD_CPP_TESTS=1 (the //:cpp_tests target); not shipped in the wheel.
#include <cstdio>

#include "torch_xla/csrc/xla_ops.h"

int main() {
  if (torch_xla::add_via_torch(2, 3) != 5) {
    std::fprintf(stderr, "add_via_torch(2, 3) != 5\n");
    return 1;
  }
  std::printf("ok: %d kernels\n", torch_xla::kernel_count());
  return 0;
}
