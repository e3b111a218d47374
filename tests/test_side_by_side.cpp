// The CPU and the device side by side: a stage placed on the host runs on a
// thread of its own while later stages that need not follow it run on the
// device; a stage that reads its results waits for it. Results, errors and
// the report's order are those of one stage at a time.

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>

#include "support.hpp"

using namespace std::chrono_literals;
using oa_test::config_scope;

namespace {

/// A function with no device version (so its stage runs on the host), slow
/// by design: it waits 40 ms a chunk, which shows an overlap on any machine.
/// A negative first element is an error of the call.
inline constexpr auto slow_double = oa::annotate<"test::slow_double">(
    oa::cpu([](const auto& in, auto& out) {
      std::this_thread::sleep_for(40ms);
      if (!in.empty() && in[0] < 0) throw std::domain_error("slow_double: a negative sample");
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = 2 * in[i];
    }),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<double>>("y")));

std::vector<double> ramp(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i % 977);
  return v;
}

/// The emulated device over a 0.25 GB/s link: negating 8 MB takes about
/// 35 ms of link each way, overlapped.
oa::config slow_link() {
  oa::config c = oa_test::emulated_config(std::size_t{4} << 20, 0.25);
  c.host_threshold = 0;
  return c;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A host stage (slow_double of `small`) then an independent device stage
/// (negating `big`), evaluated together after the device was made (its
/// making is in neither stage's time): the evaluation's wall seconds.
double host_then_device(const std::vector<double>& small, const std::vector<double>& big,
                        oa::lazy<std::vector<double>>& doubled, oa::lazy<std::vector<double>>& negated) {
  CHECK(oa::stl::transform(small, std::negate<>{}).get()[1] == -1);
  oa::clear_reports();
  return seconds_of([&] {
    doubled = slow_double(small);
    negated = oa::stl::transform(big, std::negate<>{});
    oa::evaluate();
  });
}

}  // namespace

TEST_CASE("side by side: a host stage and an independent device stage overlap") {
  config_scope cs(slow_link());
  const std::vector<double> small = ramp(1000), big = ramp(std::size_t{1} << 20);
  std::vector<double> want_small(small.size()), want_big(big.size());
  for (std::size_t i = 0; i < small.size(); ++i) want_small[i] = 2 * small[i];
  for (std::size_t i = 0; i < big.size(); ++i) want_big[i] = -big[i];
  oa::lazy<std::vector<double>> doubled, negated;
  const double wall = host_then_device(small, big, doubled, negated);
  CHECK(doubled.get() == want_small);
  CHECK(negated.get() == want_big);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 2);
  CHECK(reps[0].calls.front() == "test::slow_double");  // stage order kept in the log
  CHECK(reps[0].device == "host");
  CHECK(reps[1].device == "emulated");
  const double serial = reps[0].seconds + reps[1].seconds;
  CAPTURE(wall);
  CAPTURE(reps[0].seconds);
  CAPTURE(reps[1].seconds);
  // At least half of the shorter stage ran beside the longer one (one at a
  // time, the evaluation takes their sum and more).
  CHECK(wall < serial - 0.5 * std::min(reps[0].seconds, reps[1].seconds));
}

TEST_CASE("side by side: a device stage that reads a host stage's result waits for it") {
  config_scope cs(slow_link());
  const std::vector<double> x = ramp(std::size_t{1} << 16);
  std::vector<double> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = -2 * x[i];
  oa::lazy<std::vector<double>> r;
  r = oa::stl::transform(slow_double(x), std::negate<>{});
  CHECK(r.get() == want);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 2);
  CHECK(reps[0].device == "host");
  CHECK(reps[1].device == "emulated");
}

TEST_CASE("side by side: an error of the host stage reaches its caller, the device stage's result stands") {
  config_scope cs(slow_link());
  std::vector<double> bad = ramp(1000);
  bad[0] = -1;
  const std::vector<double> big = ramp(std::size_t{1} << 20);
  oa::lazy<std::vector<double>> doubled = slow_double(bad);
  oa::lazy<std::vector<double>> negated = oa::stl::transform(big, std::negate<>{});
  CHECK_THROWS_WITH_AS(doubled.get(), doctest::Contains("a negative sample"), std::domain_error);
  const std::vector<double> n = negated.get();
  CHECK(n[5] == -5);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 2);
  CHECK(!reps[0].error.empty());
  CHECK(reps[1].error.empty());
}

TEST_CASE("OA_SERIAL_STAGES: one stage at a time, the same results") {
  oa::config c = slow_link();
  c.serial_stages = true;
  config_scope cs(c);
  const std::vector<double> small = ramp(1000), big = ramp(std::size_t{1} << 20);
  oa::lazy<std::vector<double>> doubled, negated;
  const double wall = host_then_device(small, big, doubled, negated);
  CHECK(doubled.get()[3] == 6);
  CHECK(negated.get()[3] == -3);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 2);
  CAPTURE(wall);
  CHECK(wall >= 0.95 * (reps[0].seconds + reps[1].seconds));
}

TEST_CASE("side by side: a device fault while a host stage runs re-runs its chunks on the host, exactly") {
  for (const bool sticky : {false, true}) {
    CAPTURE(sticky);
    oa::config c = slow_link();
    c.fail_launch = 2;  // after the warm-up's launch: the device stage's first chunk (the host stage launches nothing there)
    c.fail_sticky = sticky;
    config_scope cs(c);
    const std::vector<double> small = ramp(1000), big = ramp(std::size_t{1} << 20);
    oa::lazy<std::vector<double>> doubled, negated;
    host_then_device(small, big, doubled, negated);
    const std::vector<double> d = doubled.get(), n = negated.get();
    for (std::size_t i = 0; i < small.size(); ++i) REQUIRE(d[i] == 2 * small[i]);
    for (std::size_t i = 0; i < big.size(); ++i) REQUIRE(n[i] == -big[i]);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 2);
    CHECK(reps[0].device == "host");
    CHECK(reps[1].host_reruns >= 1);
    CHECK(reps[1].error.empty());
  }
}
