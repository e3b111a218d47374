#pragma once
// A library whose functions' device versions are expressions of oa::ops
// operations (a density, a polynomial, a clamp, a sum of squares), each
// written with the CPU function's operations in its order, and their
// annotations: for test_annotate_expressions.cpp and test_kernel_source.cpp.

#include <algorithm>
#include <cmath>
#include <oa/oa.hpp>
#include <span>
#include <vector>

namespace expression_library {

namespace lib {  // a library's functions, as its authors wrote them
inline constexpr double sqrt_2pi = 2.5066282746310002;
inline void density(std::span<const double> x, std::span<double> out, double mean, double sd) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double z = (x[i] - mean) / sd;
    out[i] = std::exp(-0.5 * z * z) / (sd * sqrt_2pi);
  }
}
inline void cubic(std::span<const double> x, std::span<double> out, double a, double b, double c, double d) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = a + x[i] * (b + x[i] * (c + x[i] * d));
}
inline void clamp(std::span<double> x, double lo, double hi) {  // NaN stays NaN
  for (double& v : x) v = v < lo ? lo : v > hi ? hi : v;
}
inline void bound(std::span<const double> x, std::span<double> out, double lo, double hi) {  // std's NaN rules
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::min(std::max(x[i], lo), hi);
}
inline void lesser(std::span<const double> a, std::span<const double> b, std::span<double> out) {
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = std::min(a[i], b[i]);
}
inline void greater(std::span<const double> a, std::span<const double> b, std::span<double> out) {
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = std::max(a[i], b[i]);
}
inline double sum_squares(std::span<const double> x) {
  double s = 0;
  for (double v : x) s += v * v;
  return s;
}
}  // namespace lib

using oa::split::contiguous;
inline constexpr auto out = oa::out<contiguous, std::vector<double>>;

inline constexpr auto density_expression = [](auto x, auto mean, auto sd) {
  const auto z = (x - mean) / sd;
  return exp(-0.5 * z * z) / (sd * lib::sqrt_2pi);
};
inline constexpr auto density = oa::annotate<"lib::density">(
    oa::cpu(&lib::density),
    oa::args(oa::in<contiguous>("x"), out("out"), oa::scalar<double>("mean"), oa::scalar<double>("sd")),
    oa::device_fn(oa::elementwise(density_expression)));
// Into the caller's vector: `out` is no operand of the expression.
inline constexpr auto density_into = oa::annotate<"lib::density (into)">(
    oa::cpu(&lib::density),
    oa::args(oa::in<contiguous>("x"), oa::overwrite<contiguous>("out"), oa::scalar<double>("mean"),
             oa::scalar<double>("sd")),
    oa::device_fn(oa::elementwise(density_expression)));

inline constexpr auto cubic = oa::annotate<"lib::cubic">(
    oa::cpu(&lib::cubic),
    oa::args(oa::in<contiguous>("x"), out("out"), oa::scalar<double>("a"), oa::scalar<double>("b"),
             oa::scalar<double>("c"), oa::scalar<double>("d")),
    oa::device_fn(oa::elementwise([](auto x, auto a, auto b, auto c, auto d) { return a + x * (b + x * (c + x * d)); })));

inline constexpr auto clamp = oa::annotate<"lib::clamp">(
    oa::cpu(&lib::clamp), oa::args(oa::mut<contiguous>("x"), oa::scalar<double>("lo"), oa::scalar<double>("hi")),
    oa::device_fn(oa::elementwise([](auto x, auto lo, auto hi) { return select(x < lo, lo, select(x > hi, hi, x)); })));

// std::min and std::max as oa::ops::min and max: the same operand wins a
// NaN or a tie of -0.0 and 0.0.
inline constexpr auto bound = oa::annotate<"lib::bound">(
    oa::cpu(&lib::bound), oa::args(oa::in<contiguous>("x"), out("out"), oa::scalar<double>("lo"), oa::scalar<double>("hi")),
    oa::device_fn(oa::elementwise([](auto x, auto lo, auto hi) { return min(max(x, lo), hi); })));
inline constexpr auto lesser = oa::annotate<"lib::lesser">(
    oa::cpu(&lib::lesser), oa::args(oa::in<contiguous>("a"), oa::in<contiguous>("b"), out("out")),
    oa::device_fn(oa::elementwise(oa::ops::min{})));
inline constexpr auto greater = oa::annotate<"lib::greater">(
    oa::cpu(&lib::greater), oa::args(oa::in<contiguous>("a"), oa::in<contiguous>("b"), out("out")),
    oa::device_fn(oa::elementwise(oa::ops::max{})));

inline constexpr auto sum_squares = oa::annotate<"lib::sum_squares">(
    oa::cpu(&lib::sum_squares), oa::args(oa::in<contiguous>("x"), oa::ret<oa::split::sum, double>),
    oa::device_fn(oa::elementwise([](auto x) { return x * x; })));

}  // namespace expression_library
