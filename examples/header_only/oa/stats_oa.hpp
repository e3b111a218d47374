#pragma once
// stats' annotations, shipped beside the header-only library: for each
// vector function its CPU version (stats' own, unchanged), its device
// equivalent where it has one, and how its arguments split.
//
// A program reaches them without a change to its source: rebuilt with
// oa_annotate() (see ../../CMakeLists.txt), its #include <stats/stats.hpp>
// finds a generated header that includes stats' with the namespace renamed
// stats_plain (the program compiles the library, renamed, where it includes
// it), then this file, which opens namespace stats again: the library, its
// vector functions through oa, its functions of one value as they are.

#include <oa/oa.hpp>
#include <span>

#include "stats_kernels.hpp"

namespace stats_oa {
namespace plain = ::stats_plain;  // stats, as the program compiles it
using ::oa::split::contiguous;
// dnorm, pnorm and clamp have an overload for one value: oa::cpu is given
// the signature of the vector one.
using vector_fn = void(std::span<const double>, std::span<double>, double, double);

#if OA_ANNOTATIONS_GPU
#define STATS_OA_GPU(f) &gpu::f
#else
#define STATS_OA_GPU(f) nullptr  // built without CUDA: no GPU version
#endif

// `out`, written whole and never read, is an oa::overwrite: the caller's
// span, its old values not copied to a device. The device functions are
// expressions of oa::ops operations (a generic lambda over the operands: the
// in and mut arguments, an overwrite's excepted, and the scalars, in spec
// order), written with stats' own operations in its order: fused into one
// kernel per chunk with the other calls of their stage, and the same bits
// as stats' functions wherever the host evaluates them.
inline constexpr auto dnorm = ::oa::annotate<"stats::dnorm">(
    ::oa::cpu<vector_fn>(&plain::dnorm),
    ::oa::args(::oa::in<contiguous>("x"), ::oa::overwrite<contiguous>("out"),
               ::oa::scalar<double>("mean"), ::oa::scalar<double>("sd")),
    ::oa::device_fn(::oa::elementwise([](auto x, auto mean, auto sd) {
      const auto z = (x - mean) / sd;
      return exp(-0.5 * z * z) / (sd * plain::sqrt_2pi);
    })));

inline constexpr auto pnorm = ::oa::annotate<"stats::pnorm">(
    ::oa::cpu<vector_fn>(&plain::pnorm),
    ::oa::args(::oa::in<contiguous>("x"), ::oa::overwrite<contiguous>("out"),
               ::oa::scalar<double>("mean"), ::oa::scalar<double>("sd")),
    ::oa::device_fn(::oa::elementwise(
        [](auto x, auto mean, auto sd) { return 0.5 * (1.0 + erf((x - mean) / (sd * plain::sqrt_2))); })));

inline constexpr auto cubic = ::oa::annotate<"stats::cubic">(
    ::oa::cpu(&plain::cubic),
    ::oa::args(::oa::in<contiguous>("x"), ::oa::overwrite<contiguous>("out"), ::oa::scalar<double>("a"),
               ::oa::scalar<double>("b"), ::oa::scalar<double>("c"), ::oa::scalar<double>("d")),
    ::oa::device_fn(
        ::oa::elementwise([](auto x, auto a, auto b, auto c, auto d) { return a + x * (b + x * (c + x * d)); })));

// In place, with the comparisons of stats' clamp in its order (its bits, a NaN kept a NaN).
inline constexpr auto clamp = ::oa::annotate<"stats::clamp">(
    ::oa::cpu<void(std::span<double>, double, double)>(&plain::clamp),
    ::oa::args(::oa::mut<contiguous>("x"), ::oa::scalar<double>("lo"), ::oa::scalar<double>("hi")),
    ::oa::device_fn(
        ::oa::elementwise([](auto x, auto lo, auto hi) { return select(x < lo, lo, select(x > hi, hi, x)); })));

// A hand-written kernel (stats_kernels.cu); the emulated device runs stats' own function.
inline constexpr auto standardize = ::oa::annotate<"stats::standardize">(
    ::oa::cpu(&plain::standardize),
    ::oa::args(::oa::mut<contiguous>("x"), ::oa::scalar<double>("mean"), ::oa::scalar<double>("sd")),
    ::oa::device_fn(::oa::kernel(STATS_OA_GPU(standardize))));

// Partial sums add up: each chunk's values, summed.
inline constexpr auto sum = ::oa::annotate<"stats::sum">(
    ::oa::cpu(&plain::sum), ::oa::args(::oa::in<contiguous>("x"), ::oa::ret<::oa::split::sum, double>),
    ::oa::device_fn(::oa::elementwise(::oa::ops::identity{})));

#undef STATS_OA_GPU

}  // namespace stats_oa

// The calls programs make, with stats' signatures and default arguments:
// each runs through oa when called, as stats' own does.
namespace stats_oa::calls {
inline void dnorm(std::span<const double> x, std::span<double> out, double mean = 0.0, double sd = 1.0) {
  stats_oa::dnorm(x, out, mean, sd);
  ::oa::evaluate();
}
inline void pnorm(std::span<const double> x, std::span<double> out, double mean = 0.0, double sd = 1.0) {
  stats_oa::pnorm(x, out, mean, sd);
  ::oa::evaluate();
}
inline void cubic(std::span<const double> x, std::span<double> out, double a, double b, double c, double d) {
  stats_oa::cubic(x, out, a, b, c, d);
  ::oa::evaluate();
}
inline void clamp(std::span<double> x, double lo, double hi) {
  stats_oa::clamp(x, lo, hi);
  ::oa::evaluate();
}
inline void standardize(std::span<double> x, double mean, double sd) {
  stats_oa::standardize(x, mean, sd);
  ::oa::evaluate();
}
inline double sum(std::span<const double> x) { return stats_oa::sum(x).get(); }
}  // namespace stats_oa::calls

// stats as the program sees it: the library, with the calls above in front
// of the overloads they redeclare. Every other overload of these names stays
// stats' own (stats::dnorm(0.3, 0.0, 1.0), for one value).
namespace stats {
using namespace ::stats_plain;
OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, dnorm)
OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, pnorm)
OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, cubic)
OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, clamp)
OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, standardize)
OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, sum)
}  // namespace stats
