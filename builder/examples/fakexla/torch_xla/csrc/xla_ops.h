// Internal C++ API of _XLAC.
#pragma once

namespace torch_xla {

// a + b, computed by faketorch::add inside torch's libtorch_cpu.so.
double add_via_torch(double a, double b);

// Sum of every generated xla kernel at x (proves they were all linked in).
double kernel_checksum(double x);
int kernel_count();

}  // namespace torch_xla
