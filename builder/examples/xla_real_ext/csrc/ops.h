#pragma once

#include <ATen/ATen.h>

namespace xla_real_ext {

// a + b * 2, with ATen ops.
at::Tensor add_twice(const at::Tensor& a, const at::Tensor& b);

// sum(t * t) as a 0-dim tensor.
at::Tensor sum_of_squares(const at::Tensor& t);

}  // namespace xla_real_ext
