#pragma once
// Shared by the engine tests: configuration scopes, random data, references.

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <oa/oa.hpp>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// The element types of the typed tests. With OA_TEST_FEW_TYPES (the asan
// preset, and the OpenMP build of test_eigen_offload), one 4-byte
// integer and one 8-byte floating type: what those builds check (memory,
// threads, Eigen's OpenMP products) takes the same paths for the other two,
// which the release suite runs; they would add compile time, not paths.
#ifdef OA_TEST_FEW_TYPES
#define OA_TEST_ELEMENT_TYPES std::int32_t, double
#else
#define OA_TEST_ELEMENT_TYPES std::int32_t, std::int64_t, float, double
#endif

namespace oa_test {

/// An H100's rates as bench/profiles/h100.json gives them.
inline oa::device_rates h100_rates() {
  oa::device_rates r;
  r.h2d = 54.66e9, r.d2h = 55.18e9, r.both_ways = 88.36e9, r.staging = 22.8e9;
  r.op_latency = 10e-6, r.kernel_bytes = 3003e9;
  r.gemm_flops[0] = 54.13e12, r.gemm_flops[1] = 55.77e12;
  r.gemm_unaligned = 0.826;
  return r;
}

/// Runs the enclosed code under a configuration, restoring the old one after.
class config_scope {
 public:
  explicit config_scope(const oa::config& c) : saved_(oa::current_config()) {
    oa::set_config(c);
    oa::clear_reports();
  }
  ~config_scope() { oa::set_config(saved_); }

 private:
  oa::config saved_;
};

inline oa::config host_config() {
  oa::config c = oa::current_config();
  c.device = "host";
  c.streams = 0;
  c.sequential = false;
  c.fail_copy = c.fail_launch = 0;
  c.link_gbps = 0;
  c.progress = 0;
  c.chunk_bytes = 0;
  return c;
}

/// The emulated device with a budget; every stage is offered to it.
inline oa::config emulated_config(std::size_t budget, double link_gbps = 0) {
  oa::config c = host_config();
  c.device = "emulated";
  c.device_memory = budget;
  c.link_gbps = link_gbps;
  c.host_threshold = 0;
  return c;
}

inline Eigen::ArrayXd random_array(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Eigen::ArrayXd a(static_cast<Eigen::Index>(n));
  for (auto& x : a) x = d(g);
  return a;
}

/// A rows x cols matrix of values drawn from `d`, column by column.
template <class M, class Distribution>
M matrix_of(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, Distribution d) {
  std::mt19937_64 g(seed);
  M m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = static_cast<typename M::Scalar>(d(g));
  return m;
}

/// A rows x cols matrix of uniform values in [-1, 1), column by column.
template <class M>
M random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  return matrix_of<M>(rows, cols, seed, std::uniform_real_distribution<double>(-1.0, 1.0));
}

/// A matrix of small integers (-4 to 4): products of these are exact in float and double.
template <class M>
M integer_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  return matrix_of<M>(rows, cols, seed, std::uniform_int_distribution<int>(-4, 4));
}

inline std::vector<double> random_vector(std::size_t n, double lo, double hi, std::uint64_t seed) {
  const Eigen::ArrayXd a = random_array(n, lo, hi, seed);
  return {a.begin(), a.end()};
}

template <class A, class B>
double max_rel_error(const A& got, const B& ref) {
  double e = 0;
  for (Eigen::Index i = 0; i < static_cast<Eigen::Index>(ref.size()); ++i)
    e = std::max(e, std::abs(got[i] - ref[i]) / std::max(std::abs(ref[i]), 1e-300));
  return e;
}

// A library function that updates in place and throws on bad data part-way,
// as plain code would: elements before the bad one are already scaled.
inline void checked_scale(std::span<double> x, double k) {
  for (double& v : x) {
    if (v < 0) throw std::domain_error("test::checked_scale: negative element");
    v *= k;
  }
}
inline constexpr auto checked_scale_oa = oa::annotate<"test::checked_scale">(
    oa::cpu(&checked_scale), oa::args(oa::mut<oa::split::contiguous>("x"), oa::scalar<double>("k")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));

inline oa::stage_report run_total() { return oa::total(oa::reports()); }

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// The message of what `f` throws, or "(no exception)".
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

/// Tolerance, |got - ref| / max(|ref|, 1), of what the host computes with the
/// annotations' CPU functions against plain Eigen: exact where oa computes
/// with Eigen's functions, a few ULP's worth where it uses the vectorized
/// host math (oa::host_math) for sin, cos, asin, erf, exp and log2.
inline double host_tolerance() {
  return std::string_view(oa::host_math::implementation()) == "eigen" ? 0.0 : 1e-12;
}

/// Runs `f`, expecting oa::invalid_argument naming `function` and `argument`.
template <class F>
void expect_invalid(F&& f, const std::string& function, const std::string& argument) {
  try {
    f();
    FAIL("no oa::invalid_argument from " << function);
  } catch (const oa::invalid_argument& e) {
    CHECK(e.function() == function);
    CHECK(e.argument() == argument);
    const std::string what = e.what();
    CHECK(what.find(function) != std::string::npos);
    CHECK(what.find(": " + argument + ": ") != std::string::npos);
  }
}

}  // namespace oa_test
