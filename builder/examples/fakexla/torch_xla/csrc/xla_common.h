// Template machinery shared by the generated xla_kernel_*.cpp files.
//
// The kernels compute nothing useful. They are light (a translation unit compiles in
// about 0.03 s at -O2): the tests count compiles and cache results, not seconds. Only
// faketorch has a heavy weight (write_example_repo("faketorch", ..., heavy=True)).
#pragma once

namespace torch_xla::detail {

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

// One "kernel": every (T, N, Seed) triple is a distinct instantiation.
template <typename T, int N, int Seed>
double block() {
  T a[N] = {};
  for (int i = 0; i < N; ++i) a[i] = T((i * Seed) % 17);
  return Poly<8 + Seed % 16>::eval(double(a[0])) + double(a[N - 1]);
}

}  // namespace torch_xla::detail
