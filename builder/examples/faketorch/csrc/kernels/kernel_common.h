// Template machinery shared by the generated kernel_*.cpp files.
//
// The kernels compute nothing useful. This is the light weight the tests build (a
// translation unit compiles in about 0.03 s at -O2): the tests count compiles and cache
// results, not seconds, and every cold build in the suite pays for each unit. The
// benchmarks, and the tests that interrupt a build mid-compile, write faketorch with the
// heavy weight instead (builder/examples/kernel_common_heavy.h, about 1.4 s a unit, like
// a real PyTorch build, which is what a compiler cache has to win back):
// write_example_repo("faketorch", ..., heavy=True).
#pragma once

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

// One "kernel": every (T, N, Seed) triple is a distinct instantiation.
template <typename T, int N, int Seed>
double block() {
  T a[N] = {};
  for (int i = 0; i < N; ++i) a[i] = T((i * Seed) % 17);
  return Poly<8 + Seed % 16>::eval(double(a[0])) + double(a[N - 1]);
}

}  // namespace faketorch::detail
