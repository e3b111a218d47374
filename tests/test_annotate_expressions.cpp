// Element-wise device functions written as expressions of oa::ops
// operations (oa/core/expression.hpp): a density, a polynomial, a clamp and
// a sum of squares, each run on the host, on the emulated device (the CPU
// function), on the emulated device running device functions (the
// expression evaluated element by element) and with OA_EMULATED_FUSED=1
// (the stage's generated kernel, run from its description), paged through a
// 64 KiB device. Each expression uses the CPU function's operations in its
// order, so every device computes the same bits as the CPU function; sums
// of chunks' partials are compared within 1e-12 (the order of additions
// differs by chunk).

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <oa/oa.hpp>
#include <string>
#include <vector>

#include "expression_library.hpp"
#include "support.hpp"

namespace {

using namespace expression_library;

/// Whether a and b hold the same bits (NaNs included).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

struct device_case {
  const char* name;
  oa::config config;
};

std::vector<device_case> devices() {
  oa::config host = oa_test::host_config();
  oa::config emulated = oa_test::emulated_config(64 << 10);
  oa::config twins = emulated;
  twins.emulated_device_functions = true;
  oa::config fused = emulated;
  fused.emulated_fused = true;
  return {{"host", host}, {"emulated", emulated}, {"emulated, device functions", twins}, {"emulated, fused", fused}};
}

}  // namespace

TEST_CASE("an expression of oa::ops as the device function: the CPU function's bits on every device, paged") {
  std::vector<double> x = oa_test::random_vector(100000, -6.0, 6.0, 21);
  x[5] = std::numeric_limits<double>::quiet_NaN();  // NaN and infinities through the clamp's selects
  x[6] = std::numeric_limits<double>::infinity();
  x[7] = -std::numeric_limits<double>::infinity();
  std::vector<double> want_density(x.size()), want_cubic(x.size());
  lib::density(x, want_density, 0.5, 1.5);
  lib::cubic(x, want_cubic, 0.25, 1.5, -0.02, 0.001);
  std::vector<double> want_clamped = x;
  lib::clamp(want_clamped, -1.0, 1.0);
  std::vector<double> finite(x.begin() + 8, x.end());
  const double want_squares = lib::sum_squares(finite);

  for (const device_case& d : devices()) {
    CAPTURE(d.name);
    oa_test::config_scope scope(d.config);
    CHECK(same_bits(density(x, 0.5, 1.5).get(), want_density));
    std::vector<double> into(x.size(), 99.0);
    density_into(x, into, 0.5, 1.5);
    oa::evaluate();
    CHECK(same_bits(into, want_density));
    CHECK(same_bits(cubic(x, 0.25, 1.5, -0.02, 0.001).get(), want_cubic));
    std::vector<double> clamped = x;
    clamp(clamped, -1.0, 1.0);
    oa::evaluate();
    CHECK(same_bits(clamped, want_clamped));
    CHECK(sum_squares(finite).get() == doctest::Approx(want_squares).epsilon(1e-12));
    for (const oa::stage_report& s : oa::reports()) {
      CAPTURE(s.calls[0]);
      CHECK(s.error.empty());
      if (d.config.device == "emulated") {
        CHECK(s.device.rfind("emulated", 0) == 0);  // every call has a device function
        CHECK(s.chunks > 8);                        // 800 KB through 64 KiB
        CHECK(s.peak_device_bytes <= 64u << 10);
      }
    }
  }
}

TEST_CASE("oa::ops::min and max are std::min and std::max: NaNs and signed zeros give the same bits") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> pattern_a{nan, 1.0, nan, -0.0, 0.0, -0.0, 2.0, -3.0, 0.0};
  const std::vector<double> pattern_b{1.0, nan, nan, 0.0, -0.0, -0.0, -2.0, 3.0, 0.0};
  std::vector<double> a, b;
  for (int rep = 0; rep < 4000; ++rep) {  // 36,000 elements, paged through 64 KiB
    a.insert(a.end(), pattern_a.begin(), pattern_a.end());
    b.insert(b.end(), pattern_b.begin(), pattern_b.end());
  }
  std::vector<double> want_bound(a.size()), want_lesser(a.size()), want_greater(a.size());
  lib::bound(a, want_bound, -0.0, 0.0);
  lib::lesser(a, b, want_lesser);
  lib::greater(a, b, want_greater);
  for (const device_case& d : devices()) {
    CAPTURE(d.name);
    oa_test::config_scope scope(d.config);
    CHECK(same_bits(bound(a, -0.0, 0.0).get(), want_bound));
    CHECK(same_bits(lesser(a, b).get(), want_lesser));
    CHECK(same_bits(greater(a, b).get(), want_greater));
  }
}

TEST_CASE("expressions fuse with the other calls of their stage; a lazy scalar is read when the chunk runs") {
  const std::vector<double> x = oa_test::random_vector(50000, -3.0, 3.0, 22);
  std::vector<double> d(x.size()), want(x.size());
  lib::density(x, d, 0.0, 1.0);
  lib::cubic(d, want, 0.25, 1.5, -0.02, 0.001);
  std::vector<double> bound(x.size(), 0.0);
  bound[0] = 0.8;
  std::vector<double> want_clamped = want;
  lib::clamp(want_clamped, 0.3, lib::sum_squares(bound));

  for (const device_case& c : devices()) {
    CAPTURE(c.name);
    oa_test::config_scope scope(c.config);
    // The density of x, then a cubic of it: one stage (one kernel per chunk when fused).
    const oa::lazy<std::vector<double>> p = cubic(density(x, 0.0, 1.0), 0.25, 1.5, -0.02, 0.001);
    CHECK(same_bits(p.get(), want));
    REQUIRE(oa::reports().size() == 1);
    CHECK(oa::reports()[0].calls == std::vector<std::string>{"lib::density", "lib::cubic"});
    // The upper bound, a lazy sum: a kernel parameter, set once it is computed.
    std::vector<double> y = want;
    clamp(y, 0.3, sum_squares(bound));
    oa::evaluate();
    CHECK(same_bits(y, want_clamped));
  }
}
