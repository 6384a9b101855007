#include <faketorch/ops.h>  // from the installed torch wheel: torch/include

#include "torch_xla/csrc/xla_ops.h"

namespace torch_xla {

// The point of the fixture: XLA code calling into torch's C++ library.
double add_via_torch(double a, double b) { return faketorch::add(a, b); }

}  // namespace torch_xla
