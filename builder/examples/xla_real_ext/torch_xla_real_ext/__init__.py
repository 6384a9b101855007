"""xla_real_ext: ATen ops compiled against the real torch wheel."""

import torch  # noqa: F401  (loads libtorch and registers types before _C)

from torch_xla_real_ext._C import add_twice, sum_of_squares

__all__ = ["add_twice", "sum_of_squares"]
