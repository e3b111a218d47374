#pragma once
// Test bodies run on every device: host and emulated in test_engine and
// test_paging, cuda in test_cuda. Each takes the configuration to run under
// and the tolerance of its results against plain Eigen on the CPU: exact
// where the device runs the CPU functions, a mixed relative/absolute bound
// where it runs device code with its own math library.

#include <doctest/doctest.h>

#include <oa/annotations/eigen_array.hpp>

#include "support.hpp"
#include "user_library/vecmath_oa.hpp"
#include "workloads.hpp"

namespace oa_test {

/// |got - ref| / max(|ref|, 1): relative for large values, absolute near zero.
template <class A, class B>
double mixed_error(const A& got, const B& ref) {
  double e = 0;
  for (Eigen::Index i = 0; i < static_cast<Eigen::Index>(ref.size()); ++i)
    e = std::max(e, std::abs(got[i] - ref[i]) / std::max(std::abs(ref[i]), 1.0));
  return e;
}

/// Black-Scholes, Haversine and the crime index on random inputs.
inline void workloads_match_eigen(const oa::config& cfg, double tol) {
  using Eigen::ArrayXd;
  const std::size_t n = 123457;  // not a multiple of anything
  const ArrayXd price = random_array(n, 10, 50, 11), strike = random_array(n, 10, 50, 12),
                t = random_array(n, 0.1, 2, 13), rate = random_array(n, 0.01, 0.05, 14),
                vol = random_array(n, 0.1, 0.5, 15);
  ArrayXd call_ref, put_ref, hav_ref;
  oa_workloads::blackscholes(price, strike, t, rate, vol, call_ref, put_ref);
  const ArrayXd lat = price / 40.0, lon = strike / 40.0;
  oa_workloads::haversine(lat, lon, hav_ref);
  const ArrayXd tp = price * 2e4, ad = strike * 1e4, rb = t * 50;
  const double crime_ref = oa_workloads::crime_index(tp, ad, rb);

  config_scope cs(cfg);
  oa::lazy<ArrayXd> call, put, hav;
  oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);
  oa_workloads::haversine(oa::ref(lat), oa::ref(lon), hav);
  auto crime = oa_workloads::crime_index(oa::ref(tp), oa::ref(ad), oa::ref(rb));
  CHECK(mixed_error(call.get(), call_ref) <= tol);
  CHECK(mixed_error(put.get(), put_ref) <= tol);
  CHECK(mixed_error(hav.get(), hav_ref) <= tol);
  CHECK(crime.get() == doctest::Approx(crime_ref).epsilon(std::max(tol, 1e-12)));
}

/// Black-Scholes over data 16 times the budget: the budget holds, results agree.
inline void paging_within_budget(oa::config cfg, double tol) {
  using Eigen::ArrayXd;
  const std::size_t n = std::size_t{1} << 20;
  const ArrayXd price = random_array(n, 10, 50, 101), strike = random_array(n, 10, 50, 102),
                t = random_array(n, 0.1, 2, 103), rate = random_array(n, 0.01, 0.05, 104),
                vol = random_array(n, 0.1, 0.5, 105);
  ArrayXd call_ref, put_ref;
  oa_workloads::blackscholes(price, strike, t, rate, vol, call_ref, put_ref);
  cfg.device_memory = n * 8 * 7 / 16;
  config_scope cs(cfg);
  oa::lazy<ArrayXd> call, put;
  oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);
  CHECK(mixed_error(call.get(), call_ref) <= tol);
  CHECK(mixed_error(put.get(), put_ref) <= tol);
  const auto r = run_total();
  CHECK(r.peak_device_bytes <= cfg.device_memory);
  CHECK(r.chunks >= 4);
  CHECK(r.h2d_bytes == 5 * n * 8);
  CHECK(r.d2h_bytes == 2 * n * 8);
}

/// A user library: in-place updates, a reduction feeding a later call, dependencies.
inline void library_calls(const oa::config& cfg, double tol) {
  config_scope cs(cfg);
  const std::size_t n = 300001;
  std::vector<double> a = random_vector(n, -1, 1, 201), b = random_vector(n, -1, 1, 202);
  const std::vector<double> a0 = a;
  auto before = vecmath::oa::add(a, b);
  vecmath::oa::scale(a, 2.0);
  auto dot = vecmath::oa::dot(a, b);
  const auto& x = before.get();
  double ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(std::abs(x[i] - (a0[i] + b[i])) <= tol);
    REQUIRE(a[i] == a0[i] * 2.0);
    ref += a[i] * b[i];
  }
  CHECK(dot.get() == doctest::Approx(ref).epsilon(1e-10));
  Eigen::ArrayXd v = random_array(n, 1, 2, 203);
  auto lv = oa::ref(v);
  auto normalized = oa::eigen::detail::div_as<double>(lv, oa::sum(lv));
  CHECK(mixed_error(normalized.get(), (v / v.sum()).eval()) <= std::max(tol, 1e-12));
}

}  // namespace oa_test
