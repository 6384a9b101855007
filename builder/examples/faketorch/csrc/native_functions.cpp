// The operator names torchgen generated from native_functions.yaml.
#include "faketorch/native_functions.h"
#include "faketorch/ops.h"

extern "C" const char* faketorch_native_functions(void) { return FAKETORCH_NATIVE_FUNCTIONS; }
