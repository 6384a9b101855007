#include "ops.h"

namespace xla_real_ext {

at::Tensor add_twice(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), "add_twice: shapes differ: ", a.sizes(), " vs ", b.sizes());
  return at::add(a, at::mul(b, 2));
}

}  // namespace xla_real_ext
