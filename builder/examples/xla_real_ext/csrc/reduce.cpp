#include "ops.h"

namespace xla_real_ext {

at::Tensor sum_of_squares(const at::Tensor& t) { return at::sum(at::mul(t, t)); }

}  // namespace xla_real_ext
