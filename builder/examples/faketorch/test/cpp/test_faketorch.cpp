// Built only with BUILD_TEST=1 (installed as torch/test/test_faketorch).
#include <cstdio>

#include "faketorch/ops.h"

int main() {
  if (faketorch::add(2, 3) != 5) {
    std::fprintf(stderr, "add(2, 3) != 5\n");
    return 1;
  }
  std::printf("%s; %d kernels; %s\n", faketorch::describe_add(2, 3).c_str(), faketorch::kernel_count(),
              faketorch::version());
  return 0;
}
