// Stages that conflict with no stage not yet run run together on one
// device's streams, each in a share of its memory: results bit for bit
// those of one stage at a time (OA_SERIAL_STAGES), each stage's records its
// own, budgets kept, and errors, faults and rollback as when run alone.

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>

#include "support.hpp"

using oa_test::checked_scale_oa;
using oa_test::config_scope;
using oa_test::contains;

namespace {

constexpr std::size_t budget = std::size_t{1} << 20;

std::vector<double> ramp(std::size_t n, double step) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5 + static_cast<double>(i % 1013) * step;
  return v;
}

oa::config device(bool serial, double link_gbps = 0) {
  oa::config c = oa_test::emulated_config(budget, link_gbps);
  c.serial_stages = serial;
  return c;
}

/// Three branches over arrays of different lengths (separate stages, none
/// reading another's data), each then reduced: six stages, three pairs.
struct branches {
  std::vector<std::vector<double>> y;
  std::vector<double> sums;
};

branches run_branches(const std::vector<std::vector<double>>& xs) {
  std::vector<oa::lazy<std::vector<double>>> ys;
  std::vector<oa::lazy<double>> ss;
  for (const auto& x : xs) {
    ys.push_back(oa::stl::transform(x, std::negate<>{}));
    ss.push_back(oa::stl::transform_reduce(ys.back(), ys.back(), 0.0));
  }
  branches b;
  for (auto& s : ss) b.sums.push_back(s.get());
  for (auto& y : ys) b.y.push_back(y.get());
  return b;
}

std::vector<std::vector<double>> inputs() {
  const std::size_t n = std::size_t{1} << 18;  // 2 MiB each, twice the budget
  return {ramp(n, 0.25), ramp(n + 1001, 0.5), ramp(n + 2002, 0.125)};
}

std::vector<oa::stage_report> large_stages() {
  std::vector<oa::stage_report> out;
  for (const auto& r : oa::reports())
    if (r.units > 1) out.push_back(r);
  return out;
}

bool together(const oa::stage_report& r) { return contains(r.placement_reason, "together with stages"); }

}  // namespace

TEST_CASE("independent stages run together on one device: results and bytes those of one stage at a time") {
  const auto xs = inputs();
  branches serial, dag;
  std::vector<oa::stage_report> one, many;
  {
    config_scope cs(device(true));
    serial = run_branches(xs);
    one = large_stages();
  }
  {
    config_scope cs(device(false));
    dag = run_branches(xs);
    many = large_stages();
  }
  CHECK(dag.y == serial.y);
  CHECK(dag.sums == serial.sums);
  REQUIRE(one.size() == many.size());
  std::size_t joined = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(!together(one[i]));
    joined += together(many[i]) ? 1 : 0;
    // Each stage's records are its own: the bytes it moved, whoever ran beside it.
    CHECK(many[i].h2d_bytes == one[i].h2d_bytes);
    // (Smaller shares mean more chunks: a reduction's partial per chunk.)
    CHECK(many[i].d2h_bytes - one[i].d2h_bytes == (many[i].chunks - one[i].chunks) * sizeof(double));
    CHECK(many[i].calls == one[i].calls);
    CHECK(many[i].device == one[i].device);
    if (together(many[i])) CHECK(many[i].peak_device_bytes <= budget / 2);
    CHECK(many[i].peak_device_bytes <= budget);
  }
  // The three transforms together, then the three reductions.
  CHECK(joined == one.size());
  CHECK(contains(many[0].placement_reason, "together with stages 1, 3, 5"));
}

TEST_CASE("a stage that reads what another writes waits for it; a later independent one goes ahead") {
  const auto xs = inputs();
  config_scope cs(device(false));
  auto y = oa::stl::transform(xs[0], std::negate<>{});  // stage 1, with the reduction
  oa::lazy<double> s = oa::stl::transform_reduce(y, y, 0.0);
  std::vector<double> w = xs[2];
  checked_scale_oa(w, s);                                // stage 3 reads s: after stages 1 and 2
  auto v = oa::stl::transform(xs[1], std::negate<>{});  // stage 4 conflicts with none
  oa::evaluate();
  double ref = 0;
  for (double e : xs[0]) ref += e * e;
  REQUIRE(s.get() == doctest::Approx(ref).epsilon(1e-12));
  for (std::size_t i = 0; i < w.size(); i += 911) REQUIRE(w[i] == xs[2][i] * s.get());
  const std::vector<double> got = v.get();
  for (std::size_t i = 0; i < got.size(); i += 911) REQUIRE(got[i] == -xs[1][i]);
  const auto reps = large_stages();
  REQUIRE(reps.size() == 3);
  CHECK(contains(reps[0].placement_reason, "together with stages 1, 4 "));
  CHECK(!together(reps[1]));
  CHECK(contains(reps[2].placement_reason, "together with stages 1, 4 "));
}

TEST_CASE("faults in stages run together: re-runs on the host, results exact; a lost device sends later stages on") {
  const auto xs = inputs();
  branches ref;
  {
    config_scope cs(device(true));
    ref = run_branches(xs);
  }
  for (const char* fault : {"fail_launch=3", "fail_copy=4", "fail_launch=3:sticky=1", "fail_copy=6:sticky=1"}) {
    CAPTURE(fault);
    oa::config c = device(false);
    c.devices = std::string("emulated:memory=1MiB:") + fault;
    config_scope cs(c);
    const branches got = run_branches(xs);
    CHECK(got.y == ref.y);
    CHECK(got.sums == ref.sums);
    std::size_t reruns = 0;
    bool lost = false;
    for (const auto& r : large_stages()) {
      reruns += r.host_reruns;
      lost = lost || !r.device_fault.empty();
    }
    CHECK(reruns >= 1);
    CHECK(lost == contains(fault, "sticky"));
  }
}

TEST_CASE("a call's error in a stage run together: its caller's object put back, the others' stages complete") {
  const auto xs = inputs();
  std::vector<double> bad = xs[0], good = xs[1];
  bad[bad.size() - 5] = -1;  // in the last chunk: earlier chunks of it ran
  const std::vector<double> bad_before = bad;
  config_scope cs(device(false, 4));
  checked_scale_oa(bad, 3.0);
  checked_scale_oa(good, 2.0);
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative element"), std::domain_error);
  CHECK(bad == bad_before);
  for (std::size_t i = 0; i < good.size(); i += 877) REQUIRE(good[i] == xs[1][i] * 2.0);
  const auto reps = large_stages();
  REQUIRE(reps.size() == 2);
  CHECK(together(reps[0]));
  CHECK(together(reps[1]));
  CHECK(!reps[0].error.empty());
  CHECK(reps[1].error.empty());
}
