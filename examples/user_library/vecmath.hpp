#pragma once
// A user's own CPU library, as its authors wrote it: plain functions over
// spans. Nothing here knows about oa.

#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>

namespace vecmath {

inline void add(std::span<const double> a, std::span<const double> b, std::span<double> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
}

inline void mul(std::span<const double> a, std::span<const double> b, std::span<double> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] * b[i];
}

/// Scales x in place.
inline void scale(std::span<double> x, double k) {
  for (double& v : x) v *= k;
}

/// Square roots; throws on a negative input, as the library documents.
inline void checked_sqrt(std::span<const double> a, std::span<double> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (a[i] < 0) throw std::domain_error("vecmath::checked_sqrt: negative input");
    out[i] = std::sqrt(a[i]);
  }
}

inline double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace vecmath
