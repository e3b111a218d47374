// The planner. plan_chunks: the budget holds every pipeline slot, chunks tile
// the units evenly and are as few as the budget and the chunk cap allow,
// fewer streams are tried before failing (table and random sweep).
// live_calls, form_stages and layout_stage on graphs recorded through the
// Eigen array annotations and taken before they run.

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/fingerprint.hpp"
#include "core/planner.hpp"
#include "oa/annotations/eigen_array.hpp"
#include "oa/core/error.hpp"
#include "oa/core/runtime.hpp"
#include "support.hpp"

namespace {

using oa::detail::call_node;
using oa::detail::chunk_plan;
using oa::detail::stage_layout;
using oa::detail::value_class;
using std::size_t;

// ---- plan_chunks ---------------------------------------------------------------------

struct plan_case {
  size_t units, bytes_per_unit, fixed, budget;
  int streams;
  size_t chunk_bytes;
};

/// Whether one unit per chunk on `s` streams fits the budget.
bool fits(const plan_case& c, size_t s) { return (c.bytes_per_unit + c.fixed) * s <= c.budget; }

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/// Checks every law of a plan, or that it throws when nothing fits. With
/// `costs`, the count of chunks is the time model's (checked elsewhere), not
/// the fewest.
void check_plan(const plan_case& c, const oa::detail::chunk_costs* costs = nullptr) {
  CAPTURE(c.units);
  CAPTURE(c.bytes_per_unit);
  CAPTURE(c.fixed);
  CAPTURE(c.budget);
  CAPTURE(c.streams);
  CAPTURE(c.chunk_bytes);
  const std::string what = "stage 3/7 (test::kernel)";
  auto plan = [&] {
    return oa::detail::plan_chunks(c.units, c.bytes_per_unit, c.fixed, c.budget, c.streams, c.chunk_bytes, what,
                                   costs);
  };
  if (c.units == 0) {
    const chunk_plan p = plan();
    CHECK(p.chunks == 0);
    return;
  }
  const size_t requested = static_cast<size_t>(std::max(c.streams, 1));
  size_t s_fit = 0;  // the most streams, up to those requested, on which one unit fits
  for (size_t s = requested; s >= 1 && s_fit == 0; --s)
    if (fits(c, s)) s_fit = s;
  if (s_fit == 0) {
    try {
      plan();
      FAIL("no plan_error although one unit on one stream does not fit");
    } catch (const oa::plan_error& e) {
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
    return;
  }
  const chunk_plan p = plan();
  CAPTURE(p.chunk_units);
  CAPTURE(p.chunks);
  CAPTURE(p.streams);
  const size_t s = static_cast<size_t>(p.streams);
  REQUIRE(p.chunk_units >= 1);
  REQUIRE(p.chunks >= 1);
  // Every slot's buffers and fixed bytes fit.
  CHECK(p.chunk_units * c.bytes_per_unit * s + c.fixed * s <= c.budget);
  // Chunks tile the units, evenly.
  CHECK(p.chunks * p.chunk_units >= c.units);
  CHECK((p.chunks - 1) * p.chunk_units < c.units);
  // Even chunks, large ones rounded up to a multiple of 64 units so that they
  // start aligned: the last chunk is short by less than 64 units per chunk.
  const size_t even = ceil_div(c.units, p.chunks);
  if (p.chunks > 1 && even >= 128) {
    CHECK(p.chunk_units % 64 == 0);
    CHECK(p.chunk_units >= even);
    CHECK(p.chunk_units < even + 64);
  } else {
    CHECK(p.chunk_units == even);
    CHECK(c.units - (p.chunks - 1) * p.chunk_units + p.chunks > p.chunk_units);  // the last chunk is not much smaller
  }
  // Streams: as many as fit one unit each, no more than chunks.
  CHECK(p.streams >= 1);
  CHECK(s == std::min(s_fit, p.chunks));
  // The chunk cap.
  if (c.chunk_bytes != 0 && c.bytes_per_unit != 0)
    CHECK(p.chunk_units * c.bytes_per_unit <= std::max(c.chunk_bytes, c.bytes_per_unit));
  // As few chunks as possible: one chunk fewer would break the budget or the cap.
  if (p.chunks > 1 && !costs) {
    size_t bigger = ceil_div(c.units, p.chunks - 1);
    if (p.chunks - 1 > 1 && bigger >= 128) bigger = ceil_div(bigger, 64) * 64;
    const bool over_budget = bigger * c.bytes_per_unit * s_fit + c.fixed * s_fit > c.budget;
    const bool over_cap = c.chunk_bytes != 0 && c.bytes_per_unit != 0 && bigger * c.bytes_per_unit > c.chunk_bytes;
    CHECK((over_budget || over_cap));
  }
}

TEST_CASE("plan_chunks: a table of stage shapes") {
  const plan_case table[] = {
      // units, bytes/unit, fixed, budget, streams, chunk_bytes
      {1000, 8, 0, 8000, 1, 0},         // fits whole
      {1000, 8, 0, 8000, 2, 0},         // two slots of half
      {1000, 8, 0, 7999, 1, 0},         // one byte short: two even chunks
      {10, 8, 0, 24, 4, 0},             // four streams do not fit one unit: three do
      {100, 1, 10, 40, 4, 0},           // fixed bytes take four slots' budget: three streams
      {100, 50, 50, 100, 4, 0},         // exactly one unit on one stream
      {100, 100, 0, 99, 4, 0},          // nothing fits: plan_error
      {100, 50, 50, 99, 1, 0},          // nothing fits with fixed bytes
      {100, 1, 200, 150, 2, 0},         // fixed bytes alone over budget
      {1000, 8, 0, 1 << 30, 2, 800},    // the cap: 100 units per chunk
      {1000, 8, 0, 1 << 30, 2, 4},      // a cap below one unit: one unit per chunk
      {1000, 0, 0, 1, 4, 0},            // nothing per unit
      {1000, 0, 8, 100, 4, 64},         // nothing per unit, fixed bytes per slot
      {10, 1, 0, 4, 1, 0},              // three chunks of 4 (the last 2)
      {5, 1, 0, 4, 1, 0},               // 3 + 2 rather than 4 + 1
      {7, 1, 0, 1, 1, 0},               // one unit per chunk
      {1, 1 << 20, 0, 1 << 20, 8, 0},   // one unit, one stream
      {3, 8, 0, 1 << 20, 8, 0},         // fewer chunks than streams
      {1000, 8, 0, 1 << 20, 0, 0},      // zero streams asked: one
      {1000, 8, 0, 1 << 20, -3, 0},     // negative streams asked: one
      {0, 8, 0, 8, 4, 0},               // no units: no chunks
      {0, 100, 0, 1, 4, 0},             // no units, even where nothing fits
      {(size_t{1} << 32) + 7, 4, 64, size_t{1} << 30, 4, 0},  // a large stage
  };
  for (const plan_case& c : table) check_plan(c);
}

TEST_CASE("plan_chunks: the documented values") {
  auto plan = [](size_t u, size_t b, size_t f, size_t budget, int s, size_t cap) {
    return oa::detail::plan_chunks(u, b, f, budget, s, cap, "stage");
  };
  chunk_plan p = plan(1000, 8, 0, 8000, 2, 0);
  // 500 per chunk fits, but 512 (aligned) does not: three chunks of 384.
  CHECK((p.chunk_units == 384 && p.chunks == 3 && p.streams == 2));
  p = plan(1000, 8, 0, 8192, 2, 0);
  CHECK((p.chunk_units == 512 && p.chunks == 2 && p.streams == 2));
  p = plan(10, 8, 0, 24, 4, 0);
  CHECK((p.chunk_units == 1 && p.chunks == 10 && p.streams == 3));
  p = plan(10, 1, 0, 4, 1, 0);
  CHECK((p.chunk_units == 4 && p.chunks == 3));
  p = plan(1000, 8, 0, 1 << 30, 2, 800);
  CHECK((p.chunk_units == 100 && p.chunks == 10 && p.streams == 2));
  p = plan(0, 8, 0, 8, 4, 0);
  CHECK(p.chunks == 0);
  CHECK_THROWS_AS(plan(100, 100, 0, 99, 4, 0), oa::plan_error);
  CHECK_THROWS_WITH_AS(plan(100, 100, 0, 99, 4, 0), doctest::Contains("stage"), oa::plan_error);
}

TEST_CASE("plan_chunks: exact fit with nothing per unit") {
  // One unit on one stream needs 0 + fixed bytes, which the budget holds exactly.
  check_plan({10, 0, 100, 100, 1, 0});
  check_plan({10, 0, 50, 100, 2, 0});
  check_plan({10, 0, 100, 101, 1, 0});
}

TEST_CASE("plan_chunks: random sweep") {
  std::mt19937_64 g(7);
  auto log_uniform = [&](double hi) {  // 0 .. hi, spread over orders of magnitude
    return static_cast<size_t>(std::exp(std::uniform_real_distribution<double>(0, std::log(hi + 1))(g)) - 1);
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; };
  for (int i = 0; i < 4000; ++i) {
    plan_case c;
    c.units = chance(0.02) ? 0 : log_uniform(1e8);
    c.bytes_per_unit = chance(0.05) ? 0 : log_uniform(1e5);
    c.fixed = chance(0.5) ? 0 : log_uniform(1e7);
    c.budget = 1 + log_uniform(1e11);
    c.streams = std::uniform_int_distribution<int>(-1, 8)(g);
    c.chunk_bytes = chance(0.5) ? 0 : 1 + log_uniform(1e9);
    check_plan(c);
  }
}

// ---- the time model ------------------------------------------------------------------

/// The H100's link as measured (bench/results/2026-11-23-h100): 54.7 GB/s in,
/// 55.2 out, 88.4 both ways at once; 10 us per operation.
oa::device_rates h100_link() {
  oa::device_rates r;
  r.h2d = 54.7e9, r.d2h = 55.2e9, r.both_ways = 88.4e9, r.op_latency = 10e-6;
  return r;
}

/// Black-Scholes as the CUDA device runs it: five double inputs, two
/// outputs, one fused kernel per chunk.
oa::detail::chunk_costs blackscholes_costs(const oa::device_rates& r) {
  oa::detail::chunk_costs c;
  c.in_bytes_per_unit = 40, c.out_bytes_per_unit = 16, c.kernel_bytes_per_unit = 56;
  c.copies_in = 5, c.copies_out = 2, c.launches = 1;
  c.rates = r;
  c.rates.kernel_bytes = 2.4e12;
  return c;
}

TEST_CASE("link_seconds: each way alone, then both within the shared cap in proportion") {
  oa::device_rates r = h100_link();
  CHECK(oa::detail::link_seconds(r, 54.7e9, 0) == doctest::Approx(1.0));
  CHECK(oa::detail::link_seconds(r, 0, 55.2e9) == doctest::Approx(1.0));
  // Black-Scholes at 8x a 4 GiB budget: 24.5 GB in, 9.8 GB out. Both run at
  // their share of 88.4 GB/s while the outputs move, the inputs finish alone:
  // 0.492 s, not the 0.449 s of the inputs alone.
  const double in = 613566756.0 * 40, out = 613566756.0 * 16;
  const double sh = 54.7e9 * 88.4 / (54.7 + 55.2), sd = 55.2e9 * 88.4 / (54.7 + 55.2);
  const double both = out / sd;
  CHECK(oa::detail::link_seconds(r, in, out) == doctest::Approx(both + (in - sh * both) / 54.7e9));
  CHECK(oa::detail::link_seconds(r, in, out) == doctest::Approx(0.4919).epsilon(0.001));
  r.both_ways = 0;  // no cap: each way alone
  CHECK(oa::detail::link_seconds(r, in, out) == doctest::Approx(in / 54.7e9));
  CHECK(oa::detail::link_seconds(oa::device_rates{}, in, out) == 0);
}

TEST_CASE("device_rates::snapped: measured rates on a ladder, so that plans do not follow their noise") {
  oa::device_rates r = h100_link();
  r.kernel_bytes = 3.0e12;
  r.gemm_flops[1] = 55.8e12;
  const oa::device_rates s = r.snapped();
  for (auto rates : {std::pair{r.h2d, s.h2d}, {r.d2h, s.d2h}, {r.both_ways, s.both_ways},
                     {r.kernel_bytes, s.kernel_bytes}, {r.gemm_flops[1], s.gemm_flops[1]}}) {
    const double raw = rates.first, snapped = rates.second;
    CAPTURE(raw);
    CHECK(snapped <= raw);
    CHECK(snapped > raw / std::sqrt(2.0));
    const double steps = 2 * std::log2(snapped);
    CHECK(steps == doctest::Approx(std::round(steps)));
  }
  CHECK(s.h2d == doctest::Approx(std::exp2(35.5)));  // 54.7 GB/s -> 48.6
  CHECK(s.snapped().h2d == s.h2d);
  CHECK(s.op_latency == r.op_latency);  // not a rate
  CHECK(oa::device_rates{}.snapped().h2d == 0);
  // Noise of a few percent either side of a measurement away from a step: the same rate.
  for (double noise : {0.95, 0.98, 1.02, 1.05}) {
    oa::device_rates n = r;
    n.h2d *= noise;
    CHECK(n.snapped().h2d == s.h2d);
  }
}

TEST_CASE("pipeline_seconds: one round trip, then the busiest engine per further chunk") {
  oa::detail::chunk_costs c;
  c.in_bytes_per_unit = 3, c.out_bytes_per_unit = 1, c.copies_in = 1, c.copies_out = 1;
  c.rates.h2d = c.rates.d2h = 1;  // a byte a second
  c.launches = 0;
  // 4 chunks of 10 units: 30 s in, 10 s out each; in is the bottleneck.
  CHECK(oa::detail::pipeline_seconds(c, 40, 4, 4) == doctest::Approx(40 + 3 * 30));
  // One slot: every chunk's whole round trip.
  CHECK(oa::detail::pipeline_seconds(c, 40, 4, 1) == doctest::Approx(4 * 40));
  // Two slots: half a round trip per chunk when that passes the busiest engine.
  c.in_bytes_per_unit = 1;
  CHECK(oa::detail::pipeline_seconds(c, 40, 4, 2) == doctest::Approx(20 + 3 * 10));
  // Latency per operation.
  c.rates.op_latency = 0.5;
  CHECK(oa::detail::pipeline_seconds(c, 40, 4, 4) == doctest::Approx(21 + 3 * 10.5));
}

TEST_CASE("plan_chunks: the time model cuts more chunks where the pipeline's edges cost time") {
  // Black-Scholes at 1x a 4 GiB budget (fused buffers: 56 bytes per unit):
  // five chunks fit on four slots; the first chunk's copy in and the last
  // one's copy out cannot overlap anything.
  const size_t units = 76695844, budget = size_t{4} << 30;
  const chunk_plan fewest = oa::detail::plan_chunks(units, 56, 0, budget, 4, 0, "bs");
  CHECK(fewest.chunks == 5);
  for (double cap : {0.0, 88.4e9}) {
    CAPTURE(cap);
    oa::device_rates r = h100_link();
    r.both_ways = cap;
    const oa::detail::chunk_costs k = blackscholes_costs(r);
    const chunk_plan timed = oa::detail::plan_chunks(units, 56, 0, budget, 4, 0, "bs", &k);
    CHECK(timed.chunks >= 2 * fewest.chunks);
    CHECK(timed.streams == 4);
    const double t_fewest = oa::detail::pipeline_seconds(k, units, fewest.chunks, fewest.streams);
    const double t_timed = oa::detail::pipeline_seconds(k, units, timed.chunks, timed.streams);
    const double link = oa::detail::link_seconds(k.rates, units * 40.0, units * 16.0);
    // Without the shared cap the edges are a tenth of the time at five chunks.
    if (cap == 0) CHECK(t_fewest > 1.08 * link);
    CHECK(t_timed < 0.97 * t_fewest);
    CHECK(t_timed < 1.06 * link);
  }
  const oa::detail::chunk_costs c = blackscholes_costs(h100_link());

  // Operations so costly that more chunks never pay: the fewest.
  oa::detail::chunk_costs slow = c;
  slow.rates.op_latency = 1.0;
  CHECK(oa::detail::plan_chunks(units, 56, 0, budget, 4, 0, "bs", &slow).chunks == fewest.chunks);
  // Rates that say nothing of the link: the fewest.
  oa::detail::chunk_costs unknown = c;
  unknown.rates = {};
  CHECK(oa::detail::plan_chunks(units, 56, 0, budget, 4, 0, "bs", &unknown).chunks == fewest.chunks);
  // One slot: more chunks only add operations.
  CHECK(oa::detail::plan_chunks(units, 56, 0, budget, 1, 0, "bs", &c).chunks ==
        oa::detail::plan_chunks(units, 56, 0, budget, 1, 0, "bs").chunks);
  // Never finer than 64 units a chunk.
  const chunk_plan small = oa::detail::plan_chunks(1000, 56, 0, budget, 4, 0, "bs", &c);
  CHECK(small.chunk_units >= 64);
}

TEST_CASE("plan_chunks: random sweep with the time model") {
  std::mt19937_64 g(11);
  auto log_uniform = [&](double hi) {
    return static_cast<size_t>(std::exp(std::uniform_real_distribution<double>(0, std::log(hi + 1))(g)) - 1);
  };
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); };
  for (int i = 0; i < 1500; ++i) {
    plan_case c;
    c.units = 1 + log_uniform(1e8);
    c.bytes_per_unit = 1 + log_uniform(1e4);
    c.fixed = uniform(0, 1) < 0.5 ? 0 : log_uniform(1e6);
    c.budget = 1 + log_uniform(1e11);
    c.streams = std::uniform_int_distribution<int>(1, 8)(g);
    c.chunk_bytes = uniform(0, 1) < 0.7 ? 0 : 1 + log_uniform(1e9);
    oa::detail::chunk_costs k;
    k.in_bytes_per_unit = log_uniform(1e4), k.out_bytes_per_unit = log_uniform(1e4);
    k.kernel_bytes_per_unit = log_uniform(1e4);
    k.copies_in = log_uniform(8), k.copies_out = log_uniform(8), k.launches = 1 + log_uniform(8);
    k.rates.h2d = std::exp(uniform(std::log(1e8), std::log(1e11)));
    k.rates.d2h = std::exp(uniform(std::log(1e8), std::log(1e11)));
    k.rates.both_ways = uniform(0, 1) < 0.5 ? 0 : k.rates.h2d;
    k.rates.kernel_bytes = uniform(0, 1) < 0.3 ? 0 : std::exp(uniform(std::log(1e9), std::log(1e13)));
    k.rates.op_latency = std::exp(uniform(std::log(1e-7), std::log(1e-2)));
    check_plan(c, &k);  // budget, cap, tiling, streams
    if (!fits(c, 1)) continue;
    const chunk_plan fewest =
        oa::detail::plan_chunks(c.units, c.bytes_per_unit, c.fixed, c.budget, c.streams, c.chunk_bytes, "t");
    const chunk_plan timed =
        oa::detail::plan_chunks(c.units, c.bytes_per_unit, c.fixed, c.budget, c.streams, c.chunk_bytes, "t", &k);
    CAPTURE(fewest.chunks);
    CAPTURE(timed.chunks);
    CHECK(timed.chunks >= fewest.chunks);
    // Never predicted slower than the fewest chunks.
    CHECK(oa::detail::pipeline_seconds(k, c.units, timed.chunks, timed.streams) <=
          1.01 * oa::detail::pipeline_seconds(k, c.units, fewest.chunks, fewest.streams));
  }
}

/// a * b, or nothing when it overflows.
std::optional<size_t> checked_mul(size_t a, size_t b) {
  if (b != 0 && a > SIZE_MAX / b) return std::nullopt;
  return a * b;
}

/// Any input: a plan within the budget that tiles the units, a plan_error
/// when one unit does not fit, or an invalid_argument naming the stage and
/// the size when the units' bytes pass the largest object; never a hang or
/// a division by zero. Arithmetic here cannot overflow.
void check_any_plan(const plan_case& c) {
  CAPTURE(c.units);
  CAPTURE(c.bytes_per_unit);
  CAPTURE(c.fixed);
  CAPTURE(c.budget);
  CAPTURE(c.streams);
  CAPTURE(c.chunk_bytes);
  const std::string what = "stage 1/1 (test::huge)";
  const auto bytes = checked_mul(c.units, c.bytes_per_unit);
  if (!bytes || *bytes > static_cast<size_t>(PTRDIFF_MAX)) {
    CHECK_THROWS_WITH_AS(oa::detail::plan_chunks(c.units, c.bytes_per_unit, c.fixed, c.budget, c.streams,
                                                 c.chunk_bytes, what),
                         doctest::Contains(std::to_string(c.units).c_str()), oa::invalid_argument);
    return;
  }
  chunk_plan p;
  try {
    p = oa::detail::plan_chunks(c.units, c.bytes_per_unit, c.fixed, c.budget, c.streams, c.chunk_bytes, what);
  } catch (const oa::plan_error&) {
    CHECK((c.bytes_per_unit > c.budget || c.fixed > c.budget - c.bytes_per_unit));  // one unit does not fit
    return;
  }
  if (c.units == 0) {
    CHECK(p.chunks == 0);
    return;
  }
  REQUIRE(p.chunk_units >= 1);
  REQUIRE(p.chunks >= 1);
  REQUIRE(p.streams >= 1);
  CHECK(p.chunk_units <= c.units);
  CHECK(p.chunks == c.units / p.chunk_units + (c.units % p.chunk_units != 0));
  const auto slot = checked_mul(p.chunk_units, c.bytes_per_unit);
  REQUIRE(slot);
  const auto all = checked_mul(*slot + c.fixed, static_cast<size_t>(p.streams));
  REQUIRE(all);
  CHECK(*all <= c.budget);
}

TEST_CASE("plan_chunks: sizes up to SIZE_MAX plan at once or are refused, by table") {
  constexpr size_t max = SIZE_MAX;
  const plan_case table[] = {
      // units, bytes/unit, fixed, budget, streams, chunk_bytes
      {size_t{1} << 63, 1, 0, 64 << 10, 4, 0},         // 2^63 bytes: past the largest object
      {size_t{1} << 63, 8, 0, 64 << 10, 4, 0},         // bytes overflow
      {max, 1, 0, max, 4, 0},                           // every unit there is
      {max, 0, 0, 1, 4, 0},                             // nothing per unit: one chunk
      {max, 0, 64, 100, 4, 0},
      {max, 8, 0, 64 << 10, 4, 0},
      {size_t{1} << 62, 1, 0, 64 << 10, 4, 0},          // 2^62 bytes: planned (2^46 chunks)
      {size_t{1} << 62, 1, 0, 1000, 1, 0},              // an aligned size past the fit (the old loop spun)
      {(size_t{1} << 62) + 12345, 1, 7, 65000, 3, 0},
      {size_t{1} << 59, 8, 0, max, 1, 0},               // 2^62 bytes in one chunk
      {size_t{1} << 59, 16, 0, max, 1, 0},              // 2^63 bytes: refused
      {(size_t{1} << 62) - 1, 2, 0, max / 2, 2, 3},     // the cap below one unit
      {1000, max, 0, max, 1, 0},                        // one unit of SIZE_MAX bytes: refused
      {1, max / 2, 0, max, 8, 0},
      {3, 1, max, max, 4, 0},                           // fixed bytes of SIZE_MAX
      {12345, 1, 0, max, std::numeric_limits<int>::max(), 0},
      {1200, 1, 0, 600, 1, 0},                          // the fewest aligned chunks: 3 of 448
  };
  for (const plan_case& c : table) check_any_plan(c);
  // 1200 units, 600 fit: two chunks of 600 round up to 640; three of 448.
  const chunk_plan p = oa::detail::plan_chunks(1200, 1, 0, 600, 1, 0, "stage");
  CHECK((p.chunk_units == 448 && p.chunks == 3));
}

TEST_CASE("plan_chunks: random sweep over the whole size range") {
  std::mt19937_64 g(13);
  auto any_size = [&] {  // spread over every bit width, extremes included
    const int bits = std::uniform_int_distribution<int>(0, 64)(g);
    if (bits == 0) return size_t{0};
    const size_t top = bits == 64 ? SIZE_MAX : (size_t{1} << bits) - 1;
    return std::uniform_int_distribution<size_t>(top >> 1, top)(g);
  };
  for (int i = 0; i < 20000; ++i) {
    plan_case c;
    c.units = any_size();
    c.bytes_per_unit = std::uniform_int_distribution<int>(0, 3)(g) == 0 ? any_size() : any_size() % 4096;
    c.fixed = any_size() >> std::uniform_int_distribution<int>(0, 64)(g) % 64;
    c.budget = any_size();
    c.streams = std::uniform_int_distribution<int>(-2, 16)(g);
    c.chunk_bytes = std::uniform_int_distribution<int>(0, 1)(g) ? 0 : any_size();
    check_any_plan(c);
  }
}

// ---- recorded graphs -------------------------------------------------------------------

using array = Eigen::ArrayXd;
using lazy_array = oa::lazy<array>;

array random_array(Eigen::Index n) {
  static std::mt19937_64 g(11);
  array a(n);
  for (auto& x : a) x = std::uniform_real_distribution<double>(0.1, 1.0)(g);
  return a;
}

/// The calls recorded so far, taken from the graph so that nothing runs, and
/// the planner's view of them. Take while the handles of interest are alive.
struct recorded {
  std::vector<call_node> nodes;
  std::vector<bool> live;
  std::vector<oa::detail::stage> stages;
  std::unordered_set<const oa::detail::value_state*> needed;

  recorded() {
    nodes = oa::detail::current_graph()->take_pending();
    live = oa::detail::live_calls(nodes);
    stages = oa::detail::form_stages(nodes, live);
    needed = oa::detail::values_needed_on_host(nodes, live, stages);
  }
  stage_layout layout(size_t s, bool in_place) const {
    return oa::detail::layout_stage(stages.at(s), nodes,
                                    in_place ? oa::detail::placement_mode::in_place : oa::detail::placement_mode::staged,
                                    needed);
  }
  size_t count(const stage_layout& L, value_class cls) const {
    return static_cast<size_t>(std::count_if(L.values.begin(), L.values.end(), [&](auto& v) { return v.cls == cls; }));
  }
  value_class class_of(const stage_layout& L, const lazy_array& h) const {
    for (const auto& v : L.values)
      if (v.v == h.state().get()) return v.cls;
    FAIL("value not in the stage");
    return value_class::input;
  }
};

/// Layout invariants: buffer sizes match their values, the totals add up, two
/// values share a buffer only when their live ranges do not overlap, and the
/// in-place layout gives buffers to temporaries only.
void check_layout(const stage_layout& L, const oa::detail::stage& s, bool in_place) {
  CHECK(L.calls.size() == s.calls.size());
  size_t buffer_total = 0, working = 0;
  for (size_t b : L.buffer_unit_bytes) buffer_total += b;
  CHECK(L.buffer_bytes_per_unit == buffer_total);
  for (size_t i = 0; i < L.values.size(); ++i) {
    const auto& v = L.values[i];
    working += v.v->shape.unit_bytes();
    if (v.buffer >= 0) {
      REQUIRE(static_cast<size_t>(v.buffer) < L.buffer_unit_bytes.size());
      CHECK(L.buffer_unit_bytes[static_cast<size_t>(v.buffer)] == v.v->shape.unit_bytes());
    }
    if (in_place) CHECK((v.buffer >= 0) == (v.cls == value_class::temporary));
    if (!in_place) CHECK(v.buffer >= 0);
    if (v.cls == value_class::input) CHECK(v.first == -1);
    if (v.cls == value_class::output) CHECK(v.last == INT_MAX);
    for (size_t j = 0; j < i; ++j) {
      const auto& w = L.values[j];
      if (w.buffer < 0 || w.buffer != v.buffer) continue;
      CHECK((w.last < v.first || v.last < w.first));
    }
  }
  CHECK(L.working_bytes_per_unit == working);
}

TEST_CASE("graphs: a chain of element-wise calls forms one stage") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(1000);
  lazy_array x = oa::ref(a);
  lazy_array y = oa::exp(x) * 2.0 + x;
  const recorded g;
  REQUIRE(g.nodes.size() == 3);
  CHECK(g.live == std::vector<bool>{true, true, true});
  REQUIRE(g.stages.size() == 1);
  CHECK(g.stages[0].calls == std::vector<int>{0, 1, 2});
  CHECK(g.stages[0].units == 1000);
  CHECK(g.stages[0].device_capable);
  CHECK(oa::detail::describe(g.stages[0], g.nodes) ==
        "Eigen::ArrayBase::exp, Eigen::ArrayBase::operator* (scalar), Eigen::ArrayBase::operator+");
  for (bool in_place : {false, true}) {
    const stage_layout L = g.layout(0, in_place);
    check_layout(L, g.stages[0], in_place);
    CHECK(g.count(L, value_class::input) == 1);
    CHECK(g.count(L, value_class::temporary) == 2);
    CHECK(g.count(L, value_class::output) == 1);
    CHECK(g.class_of(L, y) == value_class::output);
    CHECK(L.in_bytes_per_unit == 8);
    CHECK(L.out_bytes_per_unit == 8);
    CHECK(L.working_bytes_per_unit == 4 * 8);
    // Every call's regions name its arguments: exp(a), mul(exp) and add(mul, a).
    REQUIRE(L.calls.size() == 3);
    CHECK(L.calls[0].regions.size() == 2);
    CHECK(L.calls[1].regions[0] == L.calls[0].regions[1]);
    CHECK(L.calls[2].regions[0] == L.calls[1].regions[1]);
    CHECK(L.calls[2].regions[1] == L.calls[0].regions[0]);
  }
}

TEST_CASE("graphs: calls over arrays of different lengths form separate stages") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(100), b = random_array(50);
  lazy_array q, r, p;
  {
    lazy_array t = oa::exp(oa::ref(a));
    q = oa::exp(oa::ref(b));
    r = t * 2.0;  // joins t's stage, over the stage of b between them
    p = q + 1.0;
  }
  const recorded g;
  REQUIRE(g.nodes.size() == 4);
  CHECK(g.live == std::vector<bool>{true, true, true, true});
  REQUIRE(g.stages.size() == 2);
  CHECK(g.stages[0].units == 100);
  CHECK(g.stages[0].calls == std::vector<int>{0, 2});
  CHECK(g.stages[1].units == 50);
  CHECK(g.stages[1].calls == std::vector<int>{1, 3});
  // t never leaves its stage: a temporary.
  const stage_layout L0 = g.layout(0, false);
  check_layout(L0, g.stages[0], false);
  CHECK(g.count(L0, value_class::input) == 1);
  CHECK(g.count(L0, value_class::temporary) == 1);
  CHECK(g.class_of(L0, r) == value_class::output);
  const stage_layout L1 = g.layout(1, false);
  check_layout(L1, g.stages[1], false);
  CHECK(g.class_of(L1, q) == value_class::output);
  CHECK(g.class_of(L1, p) == value_class::output);
}

TEST_CASE("graphs: dead calls are not live and do not split stages") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(64);
  lazy_array x = oa::ref(a);
  lazy_array y = oa::sqrt(x);
  {
    lazy_array d1 = oa::exp(x);
    lazy_array d2 = oa::log(d1);  // d1 is read only by a dead call
  }
  lazy_array z = y + 1.0;
  const recorded g;
  REQUIRE(g.nodes.size() == 4);
  CHECK(g.live == std::vector<bool>{true, false, false, true});
  REQUIRE(g.stages.size() == 1);
  CHECK(g.stages[0].calls == std::vector<int>{0, 3});
  const stage_layout L = g.layout(0, false);
  check_layout(L, g.stages[0], false);
  CHECK(L.values.size() == 3);
  CHECK(g.class_of(L, y) == value_class::output);
  CHECK(g.class_of(L, z) == value_class::output);
}

TEST_CASE("graphs: nothing held, nothing live") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(64);
  {
    lazy_array x = oa::ref(a);
    lazy_array y = oa::exp(x) + x;
  }
  const recorded g;
  CHECK(g.nodes.size() == 2);
  CHECK(g.live == std::vector<bool>{false, false});
  CHECK(g.stages.empty());
}

TEST_CASE("graphs: held values are outputs, values nobody holds temporaries") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(256);
  lazy_array x = oa::ref(a);
  lazy_array y = oa::exp(x);
  lazy_array z = oa::log(oa::sqrt(y));
  const recorded g;
  REQUIRE(g.stages.size() == 1);
  for (bool in_place : {false, true}) {
    const stage_layout L = g.layout(0, in_place);
    check_layout(L, g.stages[0], in_place);
    REQUIRE(L.values.size() == 4);
    CHECK(g.class_of(L, y) == value_class::output);
    CHECK(g.class_of(L, z) == value_class::output);
    CHECK(g.count(L, value_class::temporary) == 1);  // sqrt(y)
    CHECK(g.count(L, value_class::input) == 1);      // a
    CHECK(L.in_bytes_per_unit == 8);
    CHECK(L.out_bytes_per_unit == 16);
    CHECK(L.buffer_bytes_per_unit == (in_place ? 8 : 24));
  }
}

TEST_CASE("graphs: buffers are reused along a long chain") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(4096);
  lazy_array x = oa::ref(a);
  for (int i = 0; i < 20; ++i) x = oa::exp(x);
  const recorded g;
  REQUIRE(g.nodes.size() == 20);
  CHECK(std::all_of(g.live.begin(), g.live.end(), [](bool b) { return b; }));
  REQUIRE(g.stages.size() == 1);
  CHECK(oa::detail::describe(g.stages[0], g.nodes) ==
        "Eigen::ArrayBase::exp, Eigen::ArrayBase::exp, Eigen::ArrayBase::exp, Eigen::ArrayBase::exp (+16 more)");

  const stage_layout staged = g.layout(0, false);
  check_layout(staged, g.stages[0], false);
  CHECK(staged.values.size() == 21);
  CHECK(g.count(staged, value_class::temporary) == 19);
  CHECK(g.class_of(staged, x) == value_class::output);
  CHECK(staged.working_bytes_per_unit == 21 * 8);
  CHECK(staged.buffer_bytes_per_unit <= 3 * 8);
  CHECK(staged.buffer_unit_bytes.size() <= 3);
  CHECK(staged.in_bytes_per_unit == 8);
  CHECK(staged.out_bytes_per_unit == 8);

  const stage_layout in_place = g.layout(0, true);
  check_layout(in_place, g.stages[0], true);
  CHECK(in_place.working_bytes_per_unit == 21 * 8);
  CHECK(in_place.buffer_bytes_per_unit <= 2 * 8);
}

TEST_CASE("graphs: buffers are keyed by element size") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(300);
  lazy_array x = oa::ref(a);
  lazy_array y;
  {
    oa::lazy<Eigen::Array<bool, Eigen::Dynamic, 1>> c = x < 0.5;
    y = oa::select(c, x, 0.0);
  }
  const recorded g;
  REQUIRE(g.stages.size() == 1);
  CHECK(g.stages[0].calls.size() == 2);
  const stage_layout staged = g.layout(0, false);
  check_layout(staged, g.stages[0], false);
  CHECK(staged.working_bytes_per_unit == 8 + 1 + 8);
  CHECK(staged.buffer_bytes_per_unit == 8 + 1 + 8);  // a is read by the select: y needs its own buffer
  const stage_layout in_place = g.layout(0, true);
  check_layout(in_place, g.stages[0], true);
  CHECK(in_place.buffer_unit_bytes == std::vector<size_t>{1});
}

TEST_CASE("graphs: a lazy scalar produced in a stage is read by a later one") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(500);
  lazy_array x = oa::ref(a);
  lazy_array y;
  {
    lazy_array t = oa::exp(x);
    oa::lazy<double> s = oa::sum(t);
    y = oa::eigen::detail::mul_as<double>(t, s);  // t * s, s not yet computed
  }
  const recorded g;
  REQUIRE(g.nodes.size() == 3);
  CHECK(g.nodes[2].scalars.size() == 1);
  CHECK(g.live == std::vector<bool>{true, true, true});  // the sum is read by a live call
  REQUIRE(g.stages.size() == 2);
  CHECK(g.stages[0].calls == std::vector<int>{0, 1});
  CHECK(g.stages[1].calls == std::vector<int>{2});
  CHECK(g.needed.count(g.nodes[1].reduction.get()) == 1);
  const stage_layout L = g.layout(0, false);
  check_layout(L, g.stages[0], false);
  CHECK(L.reductions.size() == 1);
  CHECK(L.partial_bytes == sizeof(double));
  REQUIRE(L.calls.size() == 2);
  CHECK(L.calls[0].partial == -1);
  CHECK(L.calls[1].partial == 0);
  // t, read by the later stage, reaches the host although nobody holds it.
  CHECK(g.needed.count(g.nodes[0].args[1].value.get()) == 1);
  CHECK(g.count(L, value_class::output) == 1);
  CHECK(g.count(L, value_class::temporary) == 0);
  const stage_layout L1 = g.layout(1, false);
  check_layout(L1, g.stages[1], false);
  CHECK(g.count(L1, value_class::input) == 1);
  CHECK(g.class_of(L1, y) == value_class::output);
}

// A call with no device function: its stages run on the host.
inline constexpr auto host_copy = oa::annotate<"test::host_copy">(
    oa::cpu([](const auto& a, auto& out) { out = a; }),
    oa::args(oa::in<oa::split::contiguous>, oa::out<oa::split::contiguous, array>));

TEST_CASE("graphs: calls without a device function form their own stages") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(64);
  lazy_array x = oa::ref(a);
  lazy_array y = oa::exp(x);
  lazy_array c = host_copy(y);
  lazy_array z = oa::exp(c);   // reads the host stage's result: after it
  lazy_array w = oa::log(x);   // depends on nothing later: the latest capable stage
  const recorded g;
  REQUIRE(g.stages.size() == 3);
  CHECK(g.stages[0].calls == std::vector<int>{0});
  CHECK(g.stages[0].device_capable);
  CHECK(g.stages[1].calls == std::vector<int>{1});
  CHECK_FALSE(g.stages[1].device_capable);
  CHECK(g.stages[2].calls == std::vector<int>{2, 3});
  CHECK(g.stages[2].device_capable);
}

// An in-place update, for the mut layout.
inline constexpr auto square_in_place = oa::annotate<"test::square_in_place">(
    oa::cpu([](auto& a) { a = a.square(); }), oa::args(oa::mut<oa::split::contiguous>),
    oa::device_fn(oa::elementwise(oa::ops::square{})));

TEST_CASE("graphs: mut updates take over the buffer of the version they update") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(128);
  for (int i = 0; i < 3; ++i) square_in_place(a);
  const recorded g;
  REQUIRE(g.nodes.size() == 3);
  CHECK(g.live == std::vector<bool>{true, true, true});
  REQUIRE(g.stages.size() == 1);
  // Only the last version reaches the caller's storage.
  CHECK(g.needed.size() == 1);
  CHECK(g.needed.count(g.nodes[2].args[0].new_value.get()) == 1);
  const stage_layout staged = g.layout(0, false);
  REQUIRE(staged.values.size() == 4);
  CHECK(g.count(staged, value_class::input) == 1);
  CHECK(g.count(staged, value_class::temporary) == 2);
  CHECK(g.count(staged, value_class::output) == 1);
  CHECK(staged.buffer_unit_bytes == std::vector<size_t>{8});
  for (const auto& v : staged.values) CHECK(v.buffer == 0);
  const stage_layout in_place = g.layout(0, true);
  CHECK(in_place.buffer_unit_bytes.empty());
}

TEST_CASE("graphs: an update in place waits for the stages reading the old version") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(64);
  lazy_array y = oa::exp(oa::ref(a));
  lazy_array c = host_copy(oa::ref(a));  // a host stage reads a before the update
  square_in_place(a);                    // may not join the first stage, before that read
  const recorded g;
  REQUIRE(g.nodes.size() == 3);
  REQUIRE(g.stages.size() == 3);
  CHECK(g.stages[0].calls == std::vector<int>{0});
  CHECK(g.stages[1].calls == std::vector<int>{1});
  CHECK(g.stages[2].calls == std::vector<int>{2});
}

TEST_CASE("graphs: an update in place with no later reader joins the stage") {
  REQUIRE(oa::detail::current_graph()->empty());
  array a = random_array(64), b = random_array(32);
  lazy_array y = oa::exp(oa::ref(a));
  lazy_array q = oa::exp(oa::ref(b));
  square_in_place(a);
  const recorded g;
  REQUIRE(g.stages.size() == 2);
  CHECK(g.stages[0].calls == std::vector<int>{0, 2});
  CHECK(g.stages[1].calls == std::vector<int>{1});
}

}  // namespace


TEST_CASE("graphs: a long chain lays out in time linear in its calls") {
  // Each position of the stage frees the buffers of the values it reads last,
  // not a scan of every value: 4x the calls take about 4x the time (16x
  // when quadratic). Both chains are well past the caches' sizes, whose
  // misses would otherwise grow with the chain alone (3000 against 24000
  // calls took 17-38x the time on a loaded 2-core machine, 6000 against
  // 24000 4-17x). The best of three runs of each, against noise.
  const auto layout_seconds = [](int calls) {
    array a = random_array(64);
    lazy_array x = oa::ref(a);
    for (int i = 0; i < calls; ++i) x = x + 1.0;
    const recorded g;
    REQUIRE(g.stages.size() == 1);
    double best = 1e9;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const stage_layout L = g.layout(0, false);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      CHECK(L.values.size() == static_cast<size_t>(calls) + 1);
      CHECK(L.buffer_unit_bytes.size() <= 3);
    }
    return best;
  };
  const double small = layout_seconds(24000), large = layout_seconds(96000);
  CAPTURE(small);
  CAPTURE(large);
  CHECK(large < 10 * small);
}

TEST_CASE("a chain's chunks on the host device do not shrink with its temporaries") {
  // In place, a chunk's working set is its inputs, outputs and the buffers
  // its temporaries reuse: as many chunks for 400 calls as for 4.
  oa::runtime rt(oa_test::host_config());
  const oa::runtime::use u(rt);
  const auto chunks_of_chain = [&](int calls) {
    rt.clear_reports();
    array a = array::Constant(1 << 18, 0.5);
    lazy_array x = oa::ref(a);
    for (int i = 0; i < calls; ++i) x = x + 1.0;
    const array& r = x.get();
    CHECK(r[5] == 0.5 + calls);
    REQUIRE(rt.reports().size() == 1);
    return rt.reports()[0].chunks;
  };
  const size_t short_chain = chunks_of_chain(4), long_chain = chunks_of_chain(400);
  CHECK(short_chain >= 1);
  CHECK(long_chain == short_chain);
}

TEST_CASE("a fingerprint changes with any one word, and with the region's shape") {
  std::vector<std::uint64_t> words(1000);
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = i * 0x9E3779B97F4A7C15ull;
  auto* data = reinterpret_cast<std::byte*>(words.data());
  const oa::region whole{data, words.size() * 8, 1, words.size() * 8};
  const oa::detail::fingerprint base = oa::detail::fingerprint_of(whole);
  CHECK(base == oa::detail::fingerprint_of(whole));
  for (std::size_t i = 0; i < words.size(); i += 7) {
    const std::uint64_t keep = words[i];
    words[i] ^= std::uint64_t{1} << (i % 64);
    CHECK(oa::detail::fingerprint_of(whole) != base);
    words[i] = keep;
  }
  // The same bytes as 10 rows of 800: another shape. A tail shorter than a
  // word counts too.
  CHECK(oa::detail::fingerprint_of({data, 800, 10, 800}) != base);
  const oa::region odd{data, 8 * 999 + 3, 1, 8 * 999 + 3};
  const oa::detail::fingerprint odd_print = oa::detail::fingerprint_of(odd);
  data[8 * 999 + 2] ^= std::byte{1};
  CHECK(oa::detail::fingerprint_of(odd) != odd_print);
}
