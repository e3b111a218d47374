#pragma once
// A library name with two overloads, for the compile-fail tests of oa::cpu.
#include <span>

namespace lib {
inline double scale(double x, double k = 2.0) { return x * k; }
inline void scale(std::span<double> x, double k = 2.0) {
  for (double& v : x) v *= k;
}
}  // namespace lib
