// Paging and pipelining on the emulated device: data many times the device
// budget goes through in chunks, the budget is never exceeded, results equal
// the CPU reference, and with a throttled link the copies overlap compute.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>

#include <oa/annotations/eigen_array.hpp>
#include <oa/annotations/stl.hpp>

#include "bodies.hpp"
#include "support.hpp"
#include "workloads.hpp"

using Eigen::ArrayXd;
using oa_test::config_scope;

namespace {
struct bs_inputs {
  ArrayXd price, strike, t, rate, vol, call_ref, put_ref;
  explicit bs_inputs(std::size_t n, std::uint64_t seed)
      : price(oa_test::random_array(n, 10, 50, seed)),
        strike(oa_test::random_array(n, 10, 50, seed + 1)),
        t(oa_test::random_array(n, 0.1, 2, seed + 2)),
        rate(oa_test::random_array(n, 0.01, 0.05, seed + 3)),
        vol(oa_test::random_array(n, 0.1, 0.5, seed + 4)) {
    oa_workloads::blackscholes(price, strike, t, rate, vol, call_ref, put_ref);
  }
  std::size_t data_bytes() const { return static_cast<std::size_t>(price.size()) * 8 * 7; }
  // Runs through oa; returns the stage totals.
  oa::stage_report run(double* max_err = nullptr) const {
    oa::clear_reports();
    oa::lazy<ArrayXd> call, put;
    oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);
    const double e = std::max(oa_test::mixed_error(call.get(), call_ref), oa_test::mixed_error(put.get(), put_ref));
    if (max_err) *max_err = e;
    return oa_test::run_total();
  }
};
}  // namespace

TEST_CASE("paging: data 16x and more the budget, peak within the budget, results exact") {
  const bs_inputs in(1 << 20, 100);
  for (const std::size_t budget : {in.data_bytes() / 16, in.data_bytes() / 40}) {
    CAPTURE(budget);
    config_scope cs(oa_test::emulated_config(budget));
    double err = 1;
    const auto r = in.run(&err);
    CHECK(err <= 1e-12);
    CHECK(r.peak_device_bytes <= budget);
    CHECK(r.peak_device_bytes >= budget / 2);  // the planner uses the budget it has
    CHECK(r.chunks >= 16);
    CHECK(r.h2d_bytes == 5 * (std::size_t{1} << 20) * 8);  // each input copied in once
    CHECK(r.d2h_bytes == 2 * (std::size_t{1} << 20) * 8);  // only call and put come back
  }
}

TEST_CASE("paging: over a modelled link, chunks are planned for overlap, not as few as fit") {
  // Data as large as the budget: as few chunks as fit would be one per slot,
  // and the first one's copy in and the last one's copy out would overlap
  // nothing. With the link's rates the planner cuts more.
  const std::size_t n = std::size_t{1} << 20;
  const ArrayXd x = oa_test::random_array(n, -1, 1, 300), y = oa_test::random_array(n, -1, 1, 301);
  const ArrayXd ref = (x + y) * 0.5;
  const std::size_t budget = 3 * n * 8;
  const auto run = [&](double link_gbps) {
    oa::config c = oa_test::emulated_config(budget, link_gbps);
    c.link_latency_us = 20;
    config_scope cs(c);
    oa::lazy<ArrayXd> mean = (oa::ref(x) + oa::ref(y)) * 0.5;
    CHECK((mean.get() - ref).abs().maxCoeff() == 0.0);
    const oa::stage_report r = oa_test::run_total();
    CHECK(r.peak_device_bytes <= budget);
    return r;
  };
  const oa::stage_report unmodelled = run(0), modelled = run(0.5);
  CHECK(unmodelled.chunks <= 8);
  CHECK(modelled.chunks >= 2 * unmodelled.chunks);
  CHECK(modelled.h2d_bytes == unmodelled.h2d_bytes);
}

TEST_CASE("paging: an allocation that fails makes the chunks smaller, not the run fail") {
  const bs_inputs in(1 << 19, 200);
  const std::size_t budget = 2 << 20;
  config_scope cs(oa_test::emulated_config(budget));
  oa::device& dev = oa::current_device();
  void* squatter = dev.allocate(budget / 2);  // memory the planner does not know is taken
  double err = 1;
  const auto r = in.run(&err);
  dev.deallocate(squatter, budget / 2);
  CHECK(err <= 1e-12);
  CHECK(r.peak_device_bytes <= budget);
  CHECK(r.error.empty());
}

TEST_CASE("pipelining: with a throttled link, copies overlap compute; sequential does not") {
  // A copy-bound stage (two arrays in, one out, little arithmetic) over a slow
  // link, so the measurement holds on a loaded machine and under sanitizers.
  const std::size_t n = std::size_t{1} << 21;
  const ArrayXd x = oa_test::random_array(n, -1, 1, 400), y = oa_test::random_array(n, -1, 1, 401);
  const ArrayXd ref = (x + y) * 0.5;
  const auto run = [&](bool sequential) {
    oa::config c = oa_test::emulated_config(4 << 20, 0.25);  // 0.25 GB/s each way
    c.sequential = sequential;
    config_scope cs(c);
    oa::lazy<ArrayXd> mean = (oa::ref(x) + oa::ref(y)) * 0.5;
    CHECK((mean.get() - ref).abs().maxCoeff() == 0.0);
    return oa_test::run_total();
  };
  const auto efficiency = [](const oa::stage_report& r) {
    return std::max({r.h2d_seconds, r.compute_seconds, r.d2h_seconds}) / r.seconds;
  };
  // Load from other processes only lowers the overlap measured: the best of
  // up to three pipelined runs is the claim's measurement.
  oa::stage_report pipelined = run(false);
  for (int again = 0; again < 2 && efficiency(pipelined) < 0.8; ++again) {
    const oa::stage_report r = run(false);
    if (efficiency(r) > efficiency(pipelined)) pipelined = r;
  }
  const oa::stage_report sequential = run(true);
  const auto busy = [](const oa::stage_report& r) { return r.h2d_seconds + r.compute_seconds + r.d2h_seconds; };
  MESSAGE("pipelined ", pipelined.seconds, " s, efficiency ", efficiency(pipelined), "; sequential ",
          sequential.seconds, " s, efficiency ", efficiency(sequential));
  CHECK(pipelined.chunks == sequential.chunks);
  CHECK(pipelined.chunks >= 8);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer serialises memory accesses across threads: no timing claim holds.
  MESSAGE("timing checks skipped under ThreadSanitizer");
  return;
#endif
  CHECK(pipelined.streams >= 2);
  CHECK(sequential.streams == 1);
  // Measured, not assumed: the pipelined phases overlap (their busy times add
  // up to more than the wall time); the sequential ones do not.
  CHECK(efficiency(pipelined) >= 0.8);
  CHECK(busy(pipelined) >= 1.3 * pipelined.seconds);
  CHECK(busy(sequential) <= 1.02 * sequential.seconds);
  CHECK(sequential.seconds >= 1.25 * pipelined.seconds);
  // Copy time is what the link allows: bytes / (0.25 GB/s).
  CHECK(pipelined.h2d_seconds >= 0.95 * static_cast<double>(pipelined.h2d_bytes) / 0.25e9);
}

TEST_CASE("paging: the shared body on the emulated device, with CPU and with device functions") {
  oa_test::paging_within_budget(oa_test::emulated_config(0), oa_test::host_tolerance());
  oa::config twins = oa_test::emulated_config(0);
  twins.emulated_device_functions = true;
  oa_test::paging_within_budget(twins, 1e-12);
  oa::config fused = oa_test::emulated_config(0);
  fused.emulated_fused = true;  // the CUDA device's path: one generated kernel per chunk
  oa_test::paging_within_budget(fused, 1e-12);
}

TEST_CASE("paging: copies kept on the device give way to a stage that needs the budget") {
  // A sort's runs take 2^18 elements per unit: beside the copy a scan kept
  // of its input, or a whole copy of it, one unit no longer fits 4 MiB.
  // The stage runs without them instead of being refused.
  config_scope cs(oa_test::emulated_config(std::size_t{4} << 20));
  std::vector<std::int32_t> v(300000);
  std::mt19937 g(5);
  for (auto& x : v) x = static_cast<std::int32_t>(g() % 1000);
  std::vector<std::int32_t> want_scan(v.size());
  std::inclusive_scan(v.begin(), v.end(), want_scan.begin());
  std::vector<std::int32_t> want = v;
  std::sort(want.begin(), want.end());

  oa::clear_reports();
  std::vector<std::int32_t> scanned = oa::stl::inclusive_scan(v).get();  // keeps a copy of v
  CHECK(scanned == want_scan);
  oa::stl::sort(v);  // reads the copy the scan kept, pinned for the stage
  oa::evaluate();
  CHECK(v == want);
  std::shuffle(v.begin(), v.end(), g);
  oa::stl::sort(v);  // beside a whole copy of its input
  oa::evaluate();
  CHECK(v == want);
  const auto reps = oa::reports();
  CHECK(reps.size() == 6);
  for (const auto& r : reps) {
    CAPTURE(r.placement_reason);
    CHECK(r.error.empty());
  }
  CHECK(reps.at(2).device == "emulated");  // the first sort's runs
  CHECK(reps.at(4).device == "emulated");
}

TEST_CASE_TEMPLATE("paging: a scan runs at a budget its whole copies would not leave room in", T, std::int32_t,
                   std::int64_t) {
  config_scope cs(oa_test::emulated_config(std::size_t{2} << 20));
  std::vector<T> v(200000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i % 7) - 3;
  std::vector<T> want(v.size());
  std::inclusive_scan(v.begin(), v.end(), want.begin());
  CHECK(oa::stl::inclusive_scan(v).get() == want);
  std::exclusive_scan(v.begin(), v.end(), want.begin(), T{3});
  CHECK(oa::stl::exclusive_scan(v, T{3}).get() == want);
}
