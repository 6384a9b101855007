#include "faketorch/ops.h"

#include <fakefmt/format.h>  // from the third_party/fakefmt submodule

#include <cstdlib>
#include <cstring>

namespace faketorch {

double add(double a, double b) { return a + b; }

std::string describe_add(double a, double b) {
  return fakefmt::format("{} + {} = {}", a, b, add(a, b));
}

}  // namespace faketorch

extern "C" {

double faketorch_add(double a, double b) { return faketorch::add(a, b); }

double faketorch_kernel_checksum(double x) { return faketorch::kernel_checksum(x); }

int faketorch_kernel_count(void) { return faketorch::kernel_count(); }

const char* faketorch_version(void) { return faketorch::version(); }

int faketorch_cxx11_abi(void) { return _GLIBCXX_USE_CXX11_ABI; }

const char* faketorch_describe_add(double a, double b) {
  const std::string text = faketorch::describe_add(a, b);
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

}  // extern "C"
