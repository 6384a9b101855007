// Public C++ API of libtorch_cpu.so, shipped in the wheel as
// torch/include/faketorch/ops.h so that extensions (fakexla) compile against it.
#pragma once

#include <string>

#include "faketorch/macros.h"

namespace faketorch {

// a + b, computed inside libtorch_cpu.so.
FAKETORCH_API double add(double a, double b);

// "a + b = c", formatted with the third-party fakefmt library (a submodule).
FAKETORCH_API std::string describe_add(double a, double b);

// Version of the C++ library, from version.txt at build time.
FAKETORCH_API const char* version();

// Sum of every generated kernel evaluated at x: proves they were all linked in.
FAKETORCH_API double kernel_checksum(double x);

// Number of generated kernels linked into the library.
FAKETORCH_API int kernel_count();

}  // namespace faketorch

// Plain C entry points used by the torch._C extension module (written in C).
extern "C" {
FAKETORCH_API double faketorch_add(double a, double b);
FAKETORCH_API double faketorch_kernel_checksum(double x);
FAKETORCH_API int faketorch_kernel_count(void);
FAKETORCH_API const char* faketorch_version(void);
FAKETORCH_API int faketorch_cxx11_abi(void);
// malloc()ed "a + b = c"; the caller frees it.
FAKETORCH_API const char* faketorch_describe_add(double a, double b);
}
