// oa::stl (annotations/oa/annotations/stl.hpp): each algorithm against the
// standard one on random inputs, for int32, int64, float and double; empty,
// one-element and odd sizes; on the host device, and on the emulated device
// with a budget far smaller than the data, staged and fused (one generated
// kernel per chunk).

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <oa/annotations/stl.hpp>

#include "support.hpp"

using oa_test::config_scope;

namespace {

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int> d(-50, 50);  // small: sums and products stay in range
    for (auto& x : v) x = static_cast<T>(d(g));
  } else {
    std::uniform_real_distribution<double> d(0.5, 2.0);
    for (auto& x : v) x = static_cast<T>(d(g));
  }
  return v;
}

/// Integers exactly; floating point within a relative tolerance (chunked
/// reductions add in another order than the sequential algorithm).
template <class T>
void check_close(T got, T want) {
  if constexpr (std::is_integral_v<T>) {
    CHECK(got == want);
  } else {
    const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-11;
    CHECK(std::abs(double(got) - double(want)) <= tol * std::max(1.0, std::abs(double(want))));
  }
}

template <class T>
void check_all_close(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  if constexpr (std::is_integral_v<T>) {
    CHECK(got == want);
  } else {
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(double(got[i]) - double(want[i])) / std::max(1.0, std::abs(double(want[i]))));
    CHECK(worst <= (std::is_same_v<T, float> ? 1e-4 : 1e-11));
  }
}

/// Runs `f(n)` for n = 0, 1, 1000 and 50001 elements on the host device and
/// on the emulated one (64 KiB: paged), staged and fused.
template <class F>
void on_every_config(F f) {
  oa::config fused = oa_test::emulated_config(64 << 10);
  fused.emulated_fused = true;
  for (const oa::config& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10), fused}) {
    CAPTURE(cfg.device);
    CAPTURE(cfg.emulated_fused);
    config_scope cs(cfg);
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{50001}}) {
      CAPTURE(n);
      f(n);
    }
  }
}

/// Stages that ran on the device (not the host) since the last clear_reports().
std::size_t device_stages() {
  std::size_t n = 0;
  for (const auto& r : oa::reports()) n += r.device != "host" && r.error.empty();
  return n;
}

struct square_plus_one {  // a user functor: the host path
  template <class T>
  T operator()(T x) const {
    return x * x + T(1);
  }
};

}  // namespace

TEST_CASE_TEMPLATE("element-wise algorithms equal the standard ones", T, OA_TEST_ELEMENT_TYPES) {
  on_every_config([](std::size_t n) {
      const std::vector<T> a = random_vector<T>(n, 1 + n), b = random_vector<T>(n, 2 + n);
      std::vector<T> want(n);

      std::transform(a.begin(), a.end(), want.begin(), std::negate<>{});
      CHECK(oa::stl::transform(a, std::negate<>{}).get() == want);
      std::transform(a.begin(), a.end(), b.begin(), want.begin(), std::plus<>{});
      CHECK(oa::stl::transform(a, b, std::plus<>{}).get() == want);
      std::transform(a.begin(), a.end(), b.begin(), want.begin(), std::multiplies<T>{});
      CHECK(oa::stl::transform(a, std::span<const T>(b), std::multiplies<T>{}).get() == want);
      std::transform(a.begin(), a.end(), want.begin(), square_plus_one{});
      CHECK(oa::stl::transform(a, square_plus_one{}).get() == want);
      const T k = T(3);
      std::transform(a.begin(), a.end(), want.begin(), [k](T x) { return x * k; });
      CHECK(oa::stl::transform(a, [k](T x) { return x * k; }).get() == want);

      std::vector<char> less_want(n);
      for (std::size_t i = 0; i < n; ++i) less_want[i] = a[i] < b[i];
      CHECK(oa::stl::transform(a, b, std::less<>{}).get() == less_want);

      CHECK(oa::stl::copy(a).get() == a);
      std::vector<T> filled = a;
      oa::stl::fill(filled, T(7));
      oa::evaluate();
      CHECK(std::all_of(filled.begin(), filled.end(), [](T x) { return x == T(7); }));
  });
}

TEST_CASE_TEMPLATE("reductions equal the standard ones", T, OA_TEST_ELEMENT_TYPES) {
  on_every_config([](std::size_t n) {
      const std::vector<T> a = random_vector<T>(n, 11 + n), b = random_vector<T>(n, 12 + n);
      const T init = T(5);
      check_close(oa::stl::reduce(a, init).get(), std::reduce(a.begin(), a.end(), init));
      check_close(oa::stl::reduce(a, init, oa::ops::max{}).get(),
                  std::max(init, n ? *std::max_element(a.begin(), a.end()) : init));
      check_close(oa::stl::reduce(a, init, oa::ops::min{}).get(),
                  std::min(init, n ? *std::min_element(a.begin(), a.end()) : init));
      check_close(oa::stl::inner_product(a, b, init).get(), std::inner_product(a.begin(), a.end(), b.begin(), init));
      check_close(oa::stl::transform_reduce(a, b, init).get(),
                  std::transform_reduce(a.begin(), a.end(), b.begin(), init));
      check_close(oa::stl::transform_reduce(a, init, std::plus<>{}, oa::ops::square{}).get(),
                  std::transform_reduce(a.begin(), a.end(), init, std::plus<>{}, [](T x) { return T(x * x); }));
      check_close(oa::stl::transform_reduce(a, b, T(0), oa::ops::max{}, std::minus<>{}).get(),
                  std::transform_reduce(a.begin(), a.end(), b.begin(), T(0),
                                        [](T x, T y) { return std::max(x, y); }, std::minus<>{}));
      check_close(oa::stl::transform_reduce(a, init, std::plus<>{}, square_plus_one{}).get(),
                  std::transform_reduce(a.begin(), a.end(), init, std::plus<>{}, square_plus_one{}));
      const auto lo = oa::stl::min_element(a).get(), hi = oa::stl::max_element(a).get();
      if (n == 0) {
        CHECK(lo.index == -1);
        CHECK(hi.index == -1);
      } else {
        CHECK(lo.index == std::min_element(a.begin(), a.end()) - a.begin());
        CHECK(hi.index == std::max_element(a.begin(), a.end()) - a.begin());
        CHECK(lo.value == *std::min_element(a.begin(), a.end()));
        CHECK(hi.value == *std::max_element(a.begin(), a.end()));
      }
      std::vector<T> seq(n), want_seq(n);
      oa::stl::iota(seq, T(-3));
      oa::evaluate();
      std::iota(want_seq.begin(), want_seq.end(), T(-3));
      CHECK(seq == want_seq);
      std::vector<T> want_scan(n);
      std::inclusive_scan(a.begin(), a.end(), want_scan.begin());
      check_all_close(oa::stl::inclusive_scan(a).get(), want_scan);
      std::inclusive_scan(a.begin(), a.end(), want_scan.begin(), std::plus<>{}, T(4));
      check_all_close(oa::stl::inclusive_scan(a, std::plus<>{}, T(4)).get(), want_scan);
      std::exclusive_scan(a.begin(), a.end(), want_scan.begin(), T(-2));
      check_all_close(oa::stl::exclusive_scan(a, T(-2)).get(), want_scan);
      std::inclusive_scan(a.begin(), a.end(), want_scan.begin(), [](T x, T y) { return std::max(x, y); });
      check_all_close(oa::stl::inclusive_scan(a, oa::ops::max{}).get(), want_scan);
      std::vector<T> sorted = a, want_sorted = a;
      oa::stl::sort(sorted);
      oa::evaluate();
      std::sort(want_sorted.begin(), want_sorted.end());
      CHECK(sorted == want_sorted);
      const T probe = n ? a[n / 2] : T(1);
      CHECK(oa::stl::count(a, probe).get() == std::count(a.begin(), a.end(), probe));
      CHECK(oa::stl::count_if(a, [probe](T x) { return x < probe; }).get() ==
            std::count_if(a.begin(), a.end(), [probe](T x) { return x < probe; }));
  });
  // Ties: the first of equal extremes, wherever the chunks fall.
  {
    oa::config c = oa_test::host_config();
    c.chunk_bytes = 1024;  // several chunks, on the host (where these run)
    config_scope cs(c);
    std::vector<T> flat(5000, T(1));
    flat[1234] = flat[4321] = T(0);
    flat[777] = flat[3999] = T(2);
    CHECK(oa::stl::min_element(flat).get().index == 1234);
    CHECK(oa::stl::max_element(flat).get().index == 777);
    CHECK(oa::reports().at(0).chunks > 1);
    // NaNs: std::min_element's answer whatever the chunks (a NaN first
    // element is it; any other NaN is passed over, also at a chunk's start).
    if constexpr (std::is_floating_point_v<T>) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      std::vector<T> holes(5000, nan);
      holes[0] = T(5);
      holes[4999] = T(1);
      holes[2500] = T(9);
      for (const auto& v : {holes, [&] {
                              auto w = holes;
                              w[0] = nan;  // a NaN first: the answer
                              return w;
                            }()}) {
        const auto lo = oa::stl::min_element(v).get(), hi = oa::stl::max_element(v).get();
        CHECK(lo.index == std::min_element(v.begin(), v.end()) - v.begin());
        CHECK(hi.index == std::max_element(v.begin(), v.end()) - v.begin());
      }
    }
  }
  // A product: small values, so that it stays exact in every type.
  const std::vector<T> ones_and_twos{T(1), T(2), T(1), T(2), T(2), T(1)};
  CHECK(oa::stl::reduce(ones_and_twos, T(3), std::multiplies<>{}).get() == T(24));
}

TEST_CASE("a chain of algorithms over Eigen vectors and lazy values pages through a small budget on the device") {
  const std::size_t n = std::size_t{1} << 17;  // 1 MiB per double array; the budget is 64 KiB
  const Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(static_cast<Eigen::Index>(n), 0.0, 1.0);
  const std::vector<double> w = random_vector<double>(n, 99);
  double want = 0;
  for (std::size_t i = 0; i < n; ++i) want += std::sqrt(x[static_cast<Eigen::Index>(i)] * 2.0) * w[i];
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    oa::config c = oa_test::emulated_config(64 << 10);
    c.emulated_fused = fused;
    config_scope cs(c);
    const auto twice = oa::stl::transform(x, x, std::plus<>{});           // lazy<std::vector<double>>
    const auto roots = oa::stl::transform(twice, oa::ops::sqrt{});        // chained: never on the host
    const double got = oa::stl::inner_product(roots, w, 0.0).get();
    check_close(got, want);
    CHECK(device_stages() >= 1);
    std::size_t peak = 0;
    for (const auto& r : oa::reports()) peak = std::max(peak, r.peak_device_bytes);
    CHECK(peak <= std::size_t{64} << 10);
  }
}

TEST_CASE("algorithms with the standard function objects run on the device, others on the host path") {
  const std::vector<double> a = random_vector<double>(20000, 5);
  config_scope cs(oa_test::emulated_config(1 << 20));
  (void)oa::stl::transform(a, std::negate<>{}).get();
  CHECK(device_stages() == 1);
  oa::clear_reports();
  (void)oa::stl::transform(a, [](double v) { return -v; }).get();
  CHECK(device_stages() == 0);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].placement_reason.find("std::transform") != std::string::npos);
}

namespace {
// A functor of the user's, marked device-callable (its operator() would be
// __host__ __device__ in code compiled by nvcc).
struct clamp_to {
  static constexpr bool oa_device_callable = true;
  double lo, hi;
  double operator()(double v) const { return v < lo ? lo : v > hi ? hi : v; }
};
struct blend {
  static constexpr bool oa_device_callable = true;
  double t;
  double operator()(double a, double b) const { return a * t + b * (1 - t); }
};
}  // namespace

TEST_CASE("user functors marked device-callable run on the device, paged; their results equal std::transform") {
  const std::vector<double> a = random_vector<double>(70000, 5), b = random_vector<double>(70000, 6);
  config_scope cs(oa_test::emulated_config(256 << 10));
  const clamp_to f{-0.5, 0.5};
  std::vector<double> want(a.size());
  std::transform(a.begin(), a.end(), want.begin(), f);
  CHECK(oa::stl::transform(a, f).get() == want);
  std::transform(a.begin(), a.end(), b.begin(), want.begin(), blend{0.25});
  CHECK(oa::stl::transform(a, b, blend{0.25}).get() == want);
  CHECK(device_stages() == 2);
  for (const auto& r : oa::reports()) {
    CHECK(r.chunks > 1);
    CHECK(r.peak_device_bytes <= std::size_t{256} << 10);
  }
}

TEST_CASE("scans carry across many blocks and chunks, and stay within the budget on the device") {
  // 2^20 + 3 elements: 17 scan blocks, the last one short; chunks of a few blocks.
  const std::size_t n = (std::size_t{1} << 20) + 3;
  const std::vector<std::int64_t> a = random_vector<std::int64_t>(n, 7);
  std::vector<std::int64_t> want(n);
  std::inclusive_scan(a.begin(), a.end(), want.begin());
  for (const bool emulated : {false, true}) {
    CAPTURE(emulated);
    oa::config c = emulated ? oa_test::emulated_config(512 << 10) : oa_test::host_config();
    c.chunk_bytes = 1 << 20;  // two blocks of int64 per chunk
    config_scope cs(c);
    CHECK(oa::stl::inclusive_scan(a).get() == want);
    std::size_t chunks = 0, peak = 0;
    for (const auto& r : oa::reports()) {
      chunks = std::max(chunks, r.chunks);
      peak = std::max(peak, r.peak_device_bytes);
    }
    CHECK(chunks >= 8);
    CHECK(peak <= std::size_t{512} << 10);
  }
}

TEST_CASE_TEMPLATE("sort: many runs, duplicates, sorted and reversed input, both orders", T, OA_TEST_ELEMENT_TYPES) {
  // 12 runs of 2^18 elements and a short one; chunks of a few runs.
  const std::size_t n = 3 * (std::size_t{1} << 20) + 12345;
  std::vector<T> random = random_vector<T>(n, 17);  // values from a small set: many duplicates
  if constexpr (std::is_floating_point_v<T>) {
    random[5] = T(-0.0);
    random[6] = T(0.0);
    random[7] = -std::numeric_limits<T>::infinity();
    random[8] = std::numeric_limits<T>::max();
  } else {
    random[5] = std::numeric_limits<T>::min();
    random[6] = std::numeric_limits<T>::max();
  }
  std::vector<T> ascending = random;
  std::sort(ascending.begin(), ascending.end());
  std::vector<T> descending = ascending;
  std::reverse(descending.begin(), descending.end());
  for (const bool emulated : {false, true}) {
    CAPTURE(emulated);
    oa::config c = emulated ? oa_test::emulated_config(std::size_t{1} << 20) : oa_test::host_config();
    c.chunk_bytes = std::size_t{8} << 20;
    config_scope cs(c);
    for (const auto* input : {&random, &ascending, &descending}) {
      std::vector<T> up = *input, down = *input;
      oa::stl::sort(up);
      oa::stl::sort(down, std::greater<>{});
      oa::evaluate();
      // By value: std::sort leaves -0.0 and +0.0 (equal) in either order.
      CHECK(up == ascending);
      CHECK(down == descending);
      // A vector given up: the same order, with no bytes kept for a rollback.
      oa::clear_reports();
      CHECK(oa::stl::sorted(std::vector<T>(*input)) == ascending);
      CHECK(oa::stl::sorted(std::vector<T>(*input), std::greater<>{}) == descending);
      const auto reps = oa::reports();
      CHECK(reps.size() >= 4);  // runs and merge, twice
      for (const auto& r : reps) CHECK(r.rollback_bytes == 0);
    }
    for (const std::size_t small : {0, 1, 2})
      CHECK(oa::stl::sorted(std::vector<T>(ascending.end() - small, ascending.end())) ==
            std::vector<T>(ascending.end() - small, ascending.end()));
    std::size_t chunks = 0;
    for (const auto& r : oa::reports()) chunks = std::max(chunks, r.chunks);
    CHECK(chunks >= 2);
  }
}

TEST_CASE("sort and scan on the device: runs and blocks paged through its memory; a unit larger than the budget goes to the host") {
  const std::size_t n = 3 * (std::size_t{1} << 20) + 12345;  // 13 runs, 49 scan blocks
  const std::vector<std::int64_t> a = random_vector<std::int64_t>(n, 23);
  std::vector<std::int64_t> want = a;
  std::sort(want.begin(), want.end());
  std::vector<std::int64_t> want_scan(n);
  std::inclusive_scan(a.begin(), a.end(), want_scan.begin());
  const std::size_t budget = std::size_t{16} << 20;  // a sixth of the data: a run, its output and scratch fit
  {
    config_scope cs(oa_test::emulated_config(budget));
    std::vector<std::int64_t> v = a;
    oa::stl::sort(v);
    oa::evaluate();
    CHECK(v == want);
    CHECK(oa::stl::inclusive_scan(a).get() == want_scan);
    bool runs_on_device = false;
    for (const auto& r : oa::reports()) {
      CAPTURE(r.calls.front());
      CHECK(r.peak_device_bytes <= budget);
      if (r.calls.front() == "oa::stl::sort (runs)") {
        runs_on_device = r.device == "emulated" && r.chunks >= 2 && r.h2d_bytes == n * sizeof(std::int64_t);
        // A run in, its sorted copy out (CUB's scratch is fixed per slot).
        CHECK(r.bytes_per_unit == 2 * (std::size_t{1} << 18) * sizeof(std::int64_t));
      }
      if (r.calls.front() == "oa::stl::sort (merge)") CHECK(r.device == "host");
      if (r.calls.front().rfind("oa::stl::scan", 0) == 0) CHECK(r.device == "emulated");
    }
    CHECK(runs_on_device);
  }
  // 1 MiB cannot hold one run: that stage runs on the host, and says why.
  config_scope cs(oa_test::emulated_config(std::size_t{1} << 20));
  std::vector<std::int64_t> v = a;
  oa::stl::sort(v);
  oa::evaluate();
  CHECK(v == want);
  const auto reps = oa::reports();
  REQUIRE(!reps.empty());
  CHECK(reps.front().calls.front() == "oa::stl::sort (runs)");
  CHECK(reps.front().device == "host");
  CHECK(reps.front().placement_reason.find("more than the device's budget") != std::string::npos);
}

TEST_CASE("a span of a vector and the vector: a call through one sees what a call through the other updated") {
  for (const bool emulated : {false, true}) {
    CAPTURE(emulated);
    config_scope cs(emulated ? oa_test::emulated_config(std::size_t{1} << 20) : oa_test::host_config());
    std::vector<double> v(std::size_t{1} << 19, 1.0);
    std::span<double> s(v);
    oa::stl::fill(s, 2.0);  // through the span
    CHECK(oa::stl::reduce(v, 0.0).get() == 2.0 * static_cast<double>(v.size()));
    oa::stl::iota(v, 0.0);  // through the vector
    CHECK(oa::stl::reduce(s, 0.0).get() == static_cast<double>(v.size()) * static_cast<double>(v.size() - 1) / 2);
    // The vector bound first, then a span of it updated, then the vector read again.
    auto negated = oa::stl::transform(v, std::negate<>{});
    oa::stl::fill(s, 5.0);
    CHECK(oa::stl::reduce(oa::stl::transform(v, std::negate<>{}), 0.0).get() == -5.0 * static_cast<double>(v.size()));
    CHECK(negated.get()[1] == -1.0);  // the iota's values, read before the fill
    std::span<double> tail = s.subspan(v.size() / 2);
    oa::stl::sort(tail, std::greater<>{});  // half of it, through a span
    oa::stl::fill(v, 3.0);                  // then all of it
    oa::evaluate();
    CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x == 3.0; }));
  }
}

namespace {
struct add_one {
  static constexpr bool oa_device_callable = true;
  void operator()(double& x) const { x += 1.0; }
};
}  // namespace

TEST_CASE("for_each and contiguous iterator ranges: the standard algorithms' results, on host and device") {
  for (const bool emulated : {false, true}) {
    CAPTURE(emulated);
    config_scope cs(emulated ? oa_test::emulated_config(std::size_t{256} << 10) : oa_test::host_config());
    const std::vector<std::int64_t> a = random_vector<std::int64_t>(100003, 31);
    std::vector<std::int64_t> v = a, want = a;
    // In place, over part of the vector: run before they return.
    oa::stl::sort(v.begin() + 10, v.end());
    std::sort(want.begin() + 10, want.end());
    CHECK(v == want);
    oa::stl::fill(v.data(), v.data() + 5, std::int64_t{7});
    std::fill(want.begin(), want.begin() + 5, 7);
    oa::stl::iota(v.begin() + 5, v.begin() + 1005, std::int64_t{-3});
    std::iota(want.begin() + 5, want.begin() + 1005, -3);
    CHECK(v == want);
    oa::stl::for_each(v.begin(), v.end(), [](std::int64_t& x) { x *= 2; });
    std::for_each(want.begin(), want.end(), [](std::int64_t& x) { x *= 2; });
    CHECK(v == want);
    // Read: lazy values.
    CHECK(oa::stl::reduce(v.cbegin(), v.cend(), std::int64_t{0}).get() == std::reduce(want.begin(), want.end()));
    CHECK(oa::stl::count(v.begin(), v.end(), want[77]).get() == std::count(want.begin(), want.end(), want[77]));
    CHECK(oa::stl::count_if(v.begin(), v.end(), [](std::int64_t x) { return x % 3 == 0; }).get() ==
          std::count_if(want.begin(), want.end(), [](std::int64_t x) { return x % 3 == 0; }));
    const auto lo = oa::stl::min_element(v.begin(), v.end()).get();
    CHECK(lo.index == std::min_element(want.begin(), want.end()) - want.begin());
    std::vector<std::int64_t> scanned(want.size()), tripled(want.size());
    std::inclusive_scan(want.begin(), want.end(), scanned.begin());
    CHECK(oa::stl::inclusive_scan(v.begin(), v.end()).get() == scanned);
    // Temporaries the scan's two passes both read: a span, a vector made for the call.
    CHECK(oa::stl::inclusive_scan(std::span<const std::int64_t>(v)).get() == scanned);
    CHECK(oa::stl::inclusive_scan(std::vector<std::int64_t>(v)).get() == scanned);
    std::exclusive_scan(want.begin(), want.end(), scanned.begin(), std::int64_t{5});
    CHECK(oa::stl::exclusive_scan(v.begin(), v.end(), std::int64_t{5}).get() == scanned);
    // Sums of another type than the elements (as std's: init's type), int32 into int64.
    const std::vector<std::int32_t> narrow = random_vector<std::int32_t>(70001, 32);
    std::vector<std::int64_t> wide(narrow.size());
    std::exclusive_scan(narrow.begin(), narrow.end(), wide.begin(), std::int64_t{1} << 40);
    CHECK(oa::stl::exclusive_scan(narrow, std::int64_t{1} << 40).get() == wide);
    std::inclusive_scan(narrow.begin(), narrow.end(), wide.begin(), std::plus<>{}, std::int64_t{-7});
    CHECK(oa::stl::inclusive_scan(narrow, std::plus<>{}, std::int64_t{-7}).get() == wide);
    std::transform(want.begin(), want.end(), tripled.begin(), [](std::int64_t x) { return 3 * x; });
    CHECK(oa::stl::transform(v.begin(), v.end(), [](std::int64_t x) { return 3 * x; }).get() == tripled);
    // A device-callable functor updating in place: on the device, paged.
    std::vector<double> d(70000, 0.5);
    oa::clear_reports();
    oa::stl::for_each(d, add_one{});
    oa::evaluate();
    CHECK(std::all_of(d.begin(), d.end(), [](double x) { return x == 1.5; }));
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 1);
    CHECK(reps[0].device == (emulated ? "emulated" : "host"));
    if (emulated) CHECK(reps[0].chunks > 1);
  }
}

// ---- operations with state: the caller's object is the one used ---------------------

namespace {

/// A sum modulo m: the modulus is state. Default-constructed, another modulus.
struct sum_modulo {
  std::int64_t m = 1000003;
  template <class R>
  static R identity() {
    return R(0);
  }
  template <class R>
  R operator()(R a, R b) const {
    return (a + b) % m;
  }
};

/// Multiplies by a factor: a transform with state.
struct scale_by {
  std::int64_t k;
  std::int64_t operator()(std::int64_t x) const { return k * x; }
};

}  // namespace

TEST_CASE("reductions and scans use the caller's operation object, its state included, on every chunk") {
  on_every_config([](std::size_t n) {
    std::vector<std::int64_t> a(n), b(n);
    std::iota(a.begin(), a.end(), std::int64_t{0});
    std::iota(b.begin(), b.end(), std::int64_t{3});
    const sum_modulo mod97{97};
    const std::int64_t init = 5;
    CHECK(oa::stl::reduce(a, init, mod97).get() == std::accumulate(a.begin(), a.end(), init, mod97));
    CHECK(oa::stl::reduce(a.begin(), a.end(), init, mod97).get() == std::accumulate(a.begin(), a.end(), init, mod97));
    std::int64_t want = init;
    for (std::size_t i = 0; i < n; ++i) want = mod97(want, 3 * a[i]);
    CHECK(oa::stl::transform_reduce(a, init, mod97, scale_by{3}).get() == want);
    CHECK(oa::stl::transform_reduce(a, init, mod97, [](std::int64_t x) { return 3 * x; }).get() == want);
    want = init;
    for (std::size_t i = 0; i < n; ++i) want = mod97(want, a[i] * b[i]);
    CHECK(oa::stl::transform_reduce(a, b, init, mod97, std::multiplies<>{}).get() == want);
    std::vector<std::int64_t> want_scan(n);
    std::inclusive_scan(a.begin(), a.end(), want_scan.begin(), mod97);
    CHECK(oa::stl::inclusive_scan(a, mod97).get() == want_scan);
    CHECK(oa::stl::inclusive_scan(a.begin(), a.end(), mod97).get() == want_scan);
    std::inclusive_scan(a.begin(), a.end(), want_scan.begin(), mod97, init);
    CHECK(oa::stl::inclusive_scan(a, mod97, init).get() == want_scan);
    std::exclusive_scan(a.begin(), a.end(), want_scan.begin(), init, mod97);
    CHECK(oa::stl::exclusive_scan(a, init, mod97).get() == want_scan);
    CHECK(oa::stl::exclusive_scan(a.begin(), a.end(), init, mod97).get() == want_scan);
  });
  // 0..9999 summed modulo 97 is 36 (modulo the default 1000003: 994853).
  std::vector<std::int64_t> v(10000);
  std::iota(v.begin(), v.end(), std::int64_t{0});
  CHECK(std::reduce(v.begin(), v.end(), std::int64_t{0}, sum_modulo{97}) == 36);
  CHECK(oa::stl::reduce(v, std::int64_t{0}, sum_modulo{97}).get() == 36);
  // No device function takes the object: the device's report says so.
  config_scope cs(oa_test::emulated_config(64 << 10));
  CHECK(oa::stl::reduce(v, std::int64_t{0}, sum_modulo{97}).get() == 36);
  bool said = false;
  for (const auto& r : oa::reports()) {
    CHECK(r.device == "host");
    said = said || r.placement_reason.find("stateful operation") != std::string::npos;
  }
  CHECK(said);
}

// ---- reversed ranges and sizes past the address space ------------------------------

TEST_CASE("a reversed iterator range is an invalid_argument naming the call; the data is untouched") {
  std::vector<std::int64_t> v = random_vector<std::int64_t>(1000, 41);
  const std::vector<std::int64_t> before = v;
  const auto names = [](const char* call) { return doctest::Contains(call); };
  CHECK_THROWS_WITH_AS(oa::stl::sort(v.end(), v.begin()), names("oa::stl::sort"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::fill(v.end(), v.begin(), std::int64_t{1}), names("oa::stl::fill"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::iota(v.end(), v.begin(), std::int64_t{1}), names("oa::stl::iota"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::for_each(v.end(), v.begin(), [](std::int64_t& x) { x = 0; }),
                       names("oa::stl::for_each"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::transform(v.end(), v.begin(), std::negate<>{}), names("oa::stl::transform"),
                       oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::reduce(v.end(), v.begin(), std::int64_t{0}), names("oa::stl::reduce"),
                       oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::count(v.end(), v.begin(), std::int64_t{0}), names("oa::stl::count"),
                       oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::count_if(v.end(), v.begin(), [](std::int64_t) { return true; }),
                       names("oa::stl::count_if"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::min_element(v.end(), v.begin()), names("oa::stl::min_element"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::max_element(v.end(), v.begin()), names("oa::stl::max_element"), oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::inclusive_scan(v.end(), v.begin()), names("oa::stl::inclusive_scan"),
                       oa::invalid_argument);
  CHECK_THROWS_WITH_AS(oa::stl::exclusive_scan(v.end(), v.begin(), std::int64_t{0}), names("oa::stl::exclusive_scan"),
                       oa::invalid_argument);
  CHECK(v == before);
  // An empty range is no error.
  oa::stl::sort(v.begin(), v.begin());
  CHECK(oa::stl::reduce(v.begin(), v.begin(), std::int64_t{4}).get() == 4);
}

TEST_CASE("a range whose bytes pass what the machine can address is an error naming the call and the size") {
  // Spans claiming 2^61 and 2^63 elements of 8 bytes: the bytes overflow, or
  // pass the largest object; planning refuses them before any is read.
  std::vector<double> v(16, 1.0);
  for (const std::size_t n : {std::size_t{1} << 61, std::size_t{1} << 63, (std::size_t{1} << 60) + 1}) {
    CAPTURE(n);
    for (const oa::config& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
      CAPTURE(cfg.device);
      config_scope cs(cfg);
      const std::span<const double> huge(v.data(), n);
      CHECK_THROWS_WITH_AS(oa::stl::reduce(huge, 0.0).get(), doctest::Contains(std::to_string(n).c_str()),
                           oa::invalid_argument);
      CHECK_THROWS_WITH_AS(oa::stl::transform(huge, std::negate<>{}).get(), doctest::Contains("std::transform"),
                           oa::invalid_argument);
    }
  }
}
