#include <torch/extension.h>

#include "ops.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "xla_real_ext: ATen ops in a torch.utils.cpp_extension module";
  m.def("add_twice", &xla_real_ext::add_twice, "a + b * 2", py::arg("a"), py::arg("b"));
  m.def("sum_of_squares", &xla_real_ext::sum_of_squares, "sum(t * t)", py::arg("t"));
}
