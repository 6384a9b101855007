// Template machinery shared by the generated kernel_*.cpp files.
//
// The heavy weight (write_example_repo(..., heavy=True) puts it in place of the light
// kernel_common.h): the kernels compute nothing useful; they exist so that building
// libtorch_cpu.so is dominated by C++ compile time (each translation unit
// instantiates its own set of templates, ~1 s at -O2/-O3), like a real
// PyTorch build, which is what a compiler cache has to win back.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace faketorch::detail {

// Horner evaluation unrolled at compile time: one instantiation per degree.
template <int N>
struct Poly {
  template <typename T>
  static T eval(T x) { return Poly<N - 1>::eval(x) * x + T(N % 7); }
};
template <>
struct Poly<0> {
  template <typename T>
  static T eval(T) { return T(1); }
};

// A fixed-size buffer with expression templates, a miniature of ATen's TensorIterator.
template <typename T, int N>
struct Buf {
  std::array<T, N> v{};
  T operator[](int i) const { return v[i]; }
};

template <typename L, typename R, typename Op>
struct Expr {
  const L& l;
  const R& r;
  Op op;
  auto operator[](int i) const { return op(l[i], r[i]); }
};

template <typename L, typename R>
auto add(const L& l, const R& r) { return Expr<L, R, std::plus<>>{l, r, {}}; }

template <typename L, typename R>
auto mul(const L& l, const R& r) { return Expr<L, R, std::multiplies<>>{l, r, {}}; }

template <typename T, int N, typename E>
Buf<T, N> materialize(const E& e) {
  Buf<T, N> out;
  for (int i = 0; i < N; ++i) out.v[i] = T(e[i]);
  return out;
}

template <typename... Ts>
double visit_sum(const std::vector<std::variant<Ts...>>& xs) {
  double s = 0;
  for (const auto& x : xs) s += std::visit([](const auto& a) { return static_cast<double>(a); }, x);
  return s;
}

template <typename K, typename V>
double table(int n) {
  std::map<K, V> m;
  for (int i = 0; i < n; ++i) m[K(i % 13)] += V(i);
  double s = 0;
  for (const auto& kv : m) s += double(kv.second);
  return s;
}

// One "kernel": every (T, N, Seed) triple is a distinct set of instantiations.
template <typename T, int N, int Seed>
double block() {
  Buf<T, N> a, b;
  for (int i = 0; i < N; ++i) {
    a.v[i] = T((i * Seed) % 17);
    b.v[i] = T((i + Seed) % 11);
  }
  auto c = materialize<T, N>(add(mul(a, b), add(a, b)));
  std::vector<std::variant<int, long, float, double, short, unsigned>> xs{1, 2L, 3.f, double(Seed)};
  std::vector<std::tuple<T, int, std::string>> rows;
  for (int i = 0; i < N; ++i) rows.emplace_back(c.v[i], i, std::to_string(i * Seed));
  std::sort(rows.begin(), rows.end(),
            [](const auto& x, const auto& y) { return std::get<2>(x) < std::get<2>(y); });
  std::function<double(double)> f = [](double y) { return y * Seed; };
  return Poly<8 + Seed % 16>::eval(double(c.v[0])) + visit_sum(xs) + table<T, double>(N) +
         f(double(std::get<0>(rows[0])));
}

}  // namespace faketorch::detail
