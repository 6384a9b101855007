// Symbol visibility for libtorch_cpu.so (like c10/macros/Export.h).
#pragma once

#if defined(FAKETORCH_BUILD_MAIN_LIB)
#define FAKETORCH_API __attribute__((visibility("default")))
#else
#define FAKETORCH_API
#endif
