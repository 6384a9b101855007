#pragma once

namespace torch_xla {

// Defined in version.cpp, which setup.py generates (as upstream does).
extern const char XLA_GITREV[];
extern const char TORCH_GITREV[];

}  // namespace torch_xla
