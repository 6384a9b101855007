#include <fakefmt/format.h>

#include <string>

#include "faketorch/build_version.h"
#include "faketorch/ops.h"

namespace faketorch {

const char* version() {
  static const std::string v = fakefmt::format("{} (fakefmt {})", FAKETORCH_VERSION_STRING, FAKEFMT_VERSION);
  return v.c_str();
}

}  // namespace faketorch
