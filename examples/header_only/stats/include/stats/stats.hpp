#pragma once
// stats: a header-only library of normal-distribution functions, each for
// one value and for a run of values, as a third party writes one: nothing of
// oa in it. Its annotations live beside it (../../oa/).

#include <cmath>
#include <cstddef>
#include <span>

namespace stats {

inline constexpr double sqrt_2pi = 2.5066282746310002;  // sqrt(2 pi)
inline constexpr double sqrt_2 = 1.4142135623730951;

/// The normal density at x.
inline double dnorm(double x, double mean = 0.0, double sd = 1.0) {
  const double z = (x - mean) / sd;
  return std::exp(-0.5 * z * z) / (sd * sqrt_2pi);
}
/// The normal density at each x, into out.
inline void dnorm(std::span<const double> x, std::span<double> out, double mean = 0.0, double sd = 1.0) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = dnorm(x[i], mean, sd);
}

/// The normal distribution function at x.
inline double pnorm(double x, double mean = 0.0, double sd = 1.0) {
  return 0.5 * (1.0 + std::erf((x - mean) / (sd * sqrt_2)));
}
/// The normal distribution function at each x, into out.
inline void pnorm(std::span<const double> x, std::span<double> out, double mean = 0.0, double sd = 1.0) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = pnorm(x[i], mean, sd);
}

/// a + b x + c x^2 + d x^3 at each x, into out.
inline void cubic(std::span<const double> x, std::span<double> out, double a, double b, double c, double d) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = a + x[i] * (b + x[i] * (c + x[i] * d));
}

/// x within [lo, hi] (NaN stays NaN).
inline double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }
/// Each x within [lo, hi], in place.
inline void clamp(std::span<double> x, double lo, double hi) {
  for (double& v : x) v = clamp(v, lo, hi);
}

/// (x - mean) / sd for each x, in place.
inline void standardize(std::span<double> x, double mean, double sd) {
  for (double& v : x) v = (v - mean) / sd;
}

/// The sum of the values.
inline double sum(std::span<const double> x) {
  double s = 0.0;
  for (double v : x) s += v;
  return s;
}

}  // namespace stats
