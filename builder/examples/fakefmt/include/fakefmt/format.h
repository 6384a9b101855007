// fakefmt: a tiny "{}" formatter standing in for a third-party library.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#define FAKEFMT_VERSION 10000

namespace fakefmt {
namespace detail {

inline void format_to(std::ostringstream& out, const char* fmt) { out << fmt; }

template <typename T, typename... Rest>
void format_to(std::ostringstream& out, const char* fmt, T&& value, Rest&&... rest) {
  for (; *fmt != '\0'; ++fmt) {
    if (fmt[0] == '{' && fmt[1] == '}') {
      out << std::forward<T>(value);
      format_to(out, fmt + 2, std::forward<Rest>(rest)...);
      return;
    }
    out << *fmt;
  }
}

}  // namespace detail

// format("{} + {}", 1, 2) == "1 + 2"; extra arguments are ignored.
template <typename... Args>
std::string format(const char* fmt, Args&&... args) {
  std::ostringstream out;
  detail::format_to(out, fmt, std::forward<Args>(args)...);
  return out.str();
}

}  // namespace fakefmt
