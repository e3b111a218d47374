// oa::dist against one process: run under `mpirun -np 1|2|4` (ctest does),
// every rank runs every case and computes the one-process reference itself
// from the same generated data. Each rank's device is the one the test's
// environment gives (ctest: an emulated device of a small budget, so every
// block pages through it).

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <oa/dist.hpp>
#include <oa/oa.hpp>

#include "dist/gpu_choice.hpp"
#include "workloads.hpp"
#include <string>
#include <thread>
#include <vector>

namespace {

oa::dist::communicator& world() { return oa::dist::world(); }
int rank() { return world().rank(); }
int ranks() { return world().size(); }

std::int64_t int_at(std::size_t i) { return static_cast<std::int64_t>((i * 2654435761u) % 2001) - 1000; }
double real_at(std::size_t i) { return std::sin(static_cast<double>(i) * 0.37) * 100.0 + 0.5; }

template <class T, class F>
std::vector<T> whole(std::size_t n, F f) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = f(i);
  return v;
}

/// Sizes that leave ranks empty, divide unevenly, and span many chunks.
std::vector<std::size_t> sizes() {
  const auto r = static_cast<std::size_t>(ranks());
  return {0, 1, r > 1 ? r - 1 : 2, 7, 1000, 100003};
}

/// The device budget set to `bytes` while it lives, then the configuration as it was.
struct budget_scope {
  oa::config was = oa::current_config();
  explicit budget_scope(std::size_t bytes) {
    oa::config c = was;
    c.device_memory = bytes;
    oa::set_config(c);
  }
  ~budget_scope() { oa::set_config(was); }
  budget_scope(const budget_scope&) = delete;
  budget_scope& operator=(const budget_scope&) = delete;
};

void check_close(double got, double want) {
  CHECK(std::abs(got - want) <= 1e-9 * std::max(1.0, std::abs(want)));
}

}  // namespace

TEST_CASE("layouts: even with the remainder first, given counts, described") {
  const oa::dist::layout l = oa::dist::layout::even(10, 4);
  CHECK(l.ranks() == 4);
  CHECK(l.total() == 10);
  CHECK(l.count(0) == 3);
  CHECK(l.count(1) == 3);
  CHECK(l.count(2) == 2);
  CHECK(l.offset(3) == 8);
  CHECK(l.describe() == "10 units over 4 ranks (3, 3, 2, 2)");
  CHECK(oa::dist::layout::of_counts({0, 5, 0}).offset(2) == 5);
  CHECK_THROWS_WITH_AS(oa::dist::layout::even(3, 0), "oa: oa::dist::layout::even: ranks: must be at least 1",
                       oa::invalid_argument);
}

TEST_CASE("generate, gather on every rank and on one, the rank-local block") {
  for (std::size_t n : sizes()) {
    CAPTURE(n);
    const auto x = oa::dist::generate<std::int64_t>(n, int_at);
    CHECK(x.size() == n);
    CHECK(x.local().get().size() == x.layout().count(rank()));
    if (!x.local().get().empty()) CHECK(x.local().get().front() == int_at(x.offset()));
    CHECK(x.gather() == whole<std::int64_t>(n, int_at));
    const int root = ranks() - 1;
    const auto at_root = x.gather(root);
    CHECK(at_root == (rank() == root ? whole<std::int64_t>(n, int_at) : std::vector<std::int64_t>{}));
  }
}

TEST_CASE("reductions equal one process's: integers exactly, floating point within a reordered sum") {
  for (std::size_t n : sizes()) {
    CAPTURE(n);
    const auto xi = oa::dist::generate<std::int64_t>(n, int_at);
    const auto wi = whole<std::int64_t>(n, int_at);
    CHECK(oa::dist::reduce(xi, std::int64_t{7}) == std::reduce(wi.begin(), wi.end(), std::int64_t{7}));
    CHECK(oa::dist::reduce(xi, std::int64_t{5000}, oa::ops::min{}) ==
          std::min<std::int64_t>(5000, wi.empty() ? 5000 : *std::min_element(wi.begin(), wi.end())));
    CHECK(oa::dist::count_if(xi, [](std::int64_t v) { return v > 100; }) ==
          std::count_if(wi.begin(), wi.end(), [](std::int64_t v) { return v > 100; }));

    const auto x = oa::dist::generate<double>(n, real_at);
    const auto y = oa::dist::generate<double>(n, [](std::size_t i) { return real_at(i + 11); });
    const auto wx = whole<double>(n, real_at);
    const auto wy = whole<double>(n, [](std::size_t i) { return real_at(i + 11); });
    check_close(oa::dist::reduce(x, 1.5), std::reduce(wx.begin(), wx.end(), 1.5));
    check_close(oa::dist::transform_reduce(x, y, 0.0), std::transform_reduce(wx.begin(), wx.end(), wy.begin(), 0.0));
    check_close(oa::dist::transform_reduce(x, 0.0, std::plus<>{}, oa::ops::square{}),
                std::transform_reduce(wx.begin(), wx.end(), 0.0, std::plus<>{}, [](double v) { return v * v; }));
    // Every rank holds the same bits: partials are combined in rank order.
    const double mine = oa::dist::reduce(x, 0.0);
    const auto all = world().exchange("test", [&] { return oa::dist::detail::to_bytes(&mine, 1); });
    for (const auto& b : all) CHECK(oa::dist::detail::from_bytes<double>(b).at(0) == mine);
  }
}

TEST_CASE("transforms run on each rank's block, lazily, and gather to one process's") {
  for (std::size_t n : sizes()) {
    CAPTURE(n);
    const auto x = oa::dist::generate<double>(n, real_at);
    const auto y = oa::dist::generate<double>(n, [](std::size_t i) { return real_at(3 * i); });
    const auto sum = oa::dist::transform(x, y, std::plus<>{});
    const auto neg = oa::dist::transform(sum, std::negate<>{});
    CHECK_FALSE(neg.local().ready());
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = -(real_at(i) + real_at(3 * i));
    CHECK(neg.gather() == want);
  }
}

TEST_CASE("scans equal one process's: each rank starts from the blocks before it") {
  for (std::size_t n : sizes()) {
    CAPTURE(n);
    const auto xi = oa::dist::generate<std::int64_t>(n, int_at);
    const auto wi = whole<std::int64_t>(n, int_at);
    std::vector<std::int64_t> inc(n), exc(n);
    std::inclusive_scan(wi.begin(), wi.end(), inc.begin());
    std::exclusive_scan(wi.begin(), wi.end(), exc.begin(), std::int64_t{3});
    CHECK(oa::dist::inclusive_scan(xi).gather() == inc);
    CHECK(oa::dist::exclusive_scan(xi, std::int64_t{3}).gather() == exc);

    const auto x = oa::dist::generate<double>(n, real_at);
    const auto wx = whole<double>(n, real_at);
    std::vector<double> want(n);
    std::inclusive_scan(wx.begin(), wx.end(), want.begin());
    const auto got = oa::dist::inclusive_scan(x).gather();
    REQUIRE(got.size() == n);
    for (std::size_t i = 0; i < n; i += 97) check_close(got[i], want[i]);
  }
}

TEST_CASE("a NaN on any rank is the minimum and maximum, and carries through max scans, as on one process") {
  const std::size_t n = 100;
  for (const std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
    CAPTURE(at);
    const auto f = [at](std::size_t i) { return i == at ? std::nan("") : real_at(i); };
    const auto x = oa::dist::generate<double>(n, f);
    const auto a = oa::dist::generate_array<double>(n, f);
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(std::isnan(oa::dist::reduce(x, inf, oa::ops::min{})));
    CHECK(std::isnan(oa::dist::reduce(x, -inf, oa::ops::max{})));
    CHECK(std::isnan(oa::dist::min_coeff(a)));
    CHECK(std::isnan(oa::dist::max_coeff(a)));
    // One process's scans with the same operation: NaN from the NaN on.
    const auto w = whole<double>(n, f);
    const auto inc = oa::stl::inclusive_scan(w, oa::ops::max{}).get();
    const auto exc = oa::stl::exclusive_scan(w, -inf, oa::ops::max{}).get();
    const auto dinc = oa::dist::inclusive_scan(x, oa::ops::max{}).gather();
    const auto dexc = oa::dist::exclusive_scan(x, -inf, oa::ops::max{}).gather();
    REQUIRE(dinc.size() == n);
    REQUIRE(dexc.size() == n);
    for (std::size_t i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK(std::isnan(dinc[i]) == std::isnan(inc[i]));
      CHECK(std::isnan(dexc[i]) == std::isnan(exc[i]));
      CHECK(std::isnan(dinc[i]) == (i >= at));
      if (!std::isnan(dinc[i])) CHECK(dinc[i] == inc[i]);
      if (!std::isnan(dexc[i])) CHECK(dexc[i] == exc[i]);
    }
  }
}

TEST_CASE("out of core on every rank: each block pages through the rank's device") {
  const std::size_t per_rank = std::size_t{1} << 18;  // 2 MiB of doubles per rank
  const std::size_t n = per_rank * static_cast<std::size_t>(ranks());
  const auto x = oa::dist::generate<double>(n, real_at);
  const auto y = oa::dist::generate<double>(n, [](std::size_t i) { return real_at(i + 1); });
  oa::clear_reports();
  const double got = oa::dist::transform_reduce(x, y, 0.0);
  const auto wx = whole<double>(n, real_at);
  const auto wy = whole<double>(n, [](std::size_t i) { return real_at(i + 1); });
  check_close(got, std::transform_reduce(wx.begin(), wx.end(), wy.begin(), 0.0));
  std::size_t chunks = 0;
  for (const auto& r : oa::reports()) chunks = std::max(chunks, r.chunks);
  const char* device = std::getenv("OA_DEVICE");
  const bool emulated = device && std::string(device) == "emulated";
  if (emulated) CHECK(chunks > 4);  // the block is larger than the budget

  // A scan's unit is a block of 2 MiB: 64 MiB of int64 per rank through a
  // budget of 4 MiB, a sixteenth of it. The reference of this rank's
  // elements: the sum of every element before its block, then its own.
  const budget_scope budget(std::size_t{4} << 20);
  const std::size_t block = std::size_t{1} << 23;
  const auto xi = oa::dist::generate<std::int64_t>(block * static_cast<std::size_t>(ranks()), int_at);
  oa::clear_reports();
  const auto scanned = oa::dist::inclusive_scan(xi);
  const std::vector<std::int64_t>& mine = scanned.local().get();
  std::size_t scan_chunks = 0;
  for (const auto& r : oa::reports()) scan_chunks = std::max(scan_chunks, r.chunks);
  if (emulated) CHECK(scan_chunks >= 16);
  std::int64_t acc = 0;
  for (std::size_t i = 0; i < scanned.offset(); ++i) acc += int_at(i);
  REQUIRE(mine.size() == block);
  bool same = true;
  for (std::size_t i = 0; i < block; ++i) same = same && mine[i] == (acc += int_at(scanned.offset() + i));
  CHECK(same);
}

TEST_CASE("element-wise calls on values laid out differently are refused, naming the argument") {
  const auto a = oa::dist::generate<double>(10, real_at);
  const oa::dist::vector<double> b(oa::dist::layout::of_counts([] {
                                     std::vector<std::size_t> c(static_cast<std::size_t>(ranks()), 0);
                                     c.back() = 10;
                                     if (ranks() == 1) c.back() = 9;
                                     return c;
                                   }()),
                                   oa::hold(std::vector<double>(rank() == ranks() - 1 ? (ranks() == 1 ? 9 : 10) : 0)));
  CHECK_THROWS_AS(oa::dist::transform(a, b, std::plus<>{}), oa::invalid_argument);
  try {
    (void)oa::dist::transform_reduce(a, b, 0.0);
  } catch (const oa::invalid_argument& e) {
    CHECK(std::string(e.what()).find("oa::dist::transform_reduce: second range: laid out as") != std::string::npos);
  }
}

TEST_CASE("an error on one rank reaches every rank's caller, naming the rank and the call") {
  const int last = ranks() - 1;
  const std::size_t n = 100 * static_cast<std::size_t>(ranks());
  const auto x = oa::dist::generate<double>(n, [](std::size_t i) { return static_cast<double>(i); });
  const double bad = static_cast<double>(n - 1);  // on the last rank only
  const auto y = oa::dist::transform(x, [bad](double v) {
    if (v == bad) throw std::runtime_error("a value the caller's function refuses");
    return v;
  });
  bool thrown = false;
  try {
    (void)oa::dist::reduce(y, 0.0);
  } catch (const oa::dist::error& e) {
    thrown = true;
    CHECK(e.rank() == last);
    CHECK(e.call() == "oa::dist::reduce");
    const std::string what = e.what();
    CHECK(what.find("oa::dist::reduce: rank " + std::to_string(last) + " of " + std::to_string(ranks()) +
                    " failed: ") == 0);
    CHECK(what.find("a value the caller's function refuses") != std::string::npos);
    // The failing rank keeps its own exception, nested.
    bool nested = false;
    try {
      std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
      nested = std::string(inner.what()).find("refuses") != std::string::npos;
    }
    CHECK(nested == (rank() == last));
  }
  CHECK(thrown);
  // The ranks go on together.
  CHECK(oa::dist::reduce(x, 0.0) == static_cast<double>(n * (n - 1) / 2));
}

TEST_CASE("read_binary: each rank reads its block of a file; a file no rank can read fails every rank") {
  const std::string path = "oa_test_dist_" + std::to_string(ranks()) + ".bin";
  const auto want = whole<std::int64_t>(1001, int_at);
  if (rank() == 0) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(std::int64_t)));
  }
  world().barrier();
  const auto x = oa::dist::read_binary<std::int64_t>(path);
  CHECK(x.local().get().size() == x.layout().count(rank()));
  CHECK(x.gather() == want);
  world().barrier();
  if (rank() == 0) std::remove(path.c_str());
  CHECK_THROWS_AS(oa::dist::read_binary<std::int64_t>("no_such_file.bin"), oa::dist::error);
}

TEST_CASE("read_binary over a split communicator: files of different sizes are named by the run's ranks") {
  if (ranks() < 4) return;  // the odd ranks' communicator needs two: ranks 1 and 3
  const auto odd = world().split("test split", rank() % 2, rank());
  const int last = ranks() % 2 == 0 ? ranks() - 1 : ranks() - 2;  // the odd communicator's last rank
  // The last odd rank's file is shorter: the message names it and the odd
  // communicator's first rank (1), as the run numbers them.
  const std::string path = "oa_test_dist_split_" + std::to_string(rank()) + ".bin";
  {
    const std::vector<std::int64_t> data(rank() == last ? 50 : 100, 7);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(std::int64_t)));
  }
  if (rank() % 2 == 1) {
    try {
      (void)oa::dist::read_binary<std::int64_t>(path, *odd);
      FAIL("read_binary read files of different sizes as one");
    } catch (const oa::dist::error& e) {
      CHECK(e.rank() == last);
      CHECK(std::string(e.what()).find("holds 800 bytes on rank 1 and 400 on rank " + std::to_string(last)) !=
            std::string::npos);
    }
  }
  world().barrier();
  std::remove(path.c_str());
}

TEST_CASE("from_local: blocks of every size, some empty, laid out in rank order") {
  std::vector<std::int64_t> mine(static_cast<std::size_t>(rank()));
  std::iota(mine.begin(), mine.end(), std::int64_t{100} * rank());
  const auto x = oa::dist::from_local(mine);
  std::vector<std::int64_t> want;
  for (int r = 0; r < ranks(); ++r)
    for (int i = 0; i < r; ++i) want.push_back(std::int64_t{100} * r + i);
  CHECK(x.size() == want.size());
  CHECK(x.gather() == want);
  std::vector<std::int64_t> scanned(want.size());
  std::inclusive_scan(want.begin(), want.end(), scanned.begin());
  CHECK(oa::dist::inclusive_scan(x).gather() == scanned);  // rank 0 empty, the others start after it
}

TEST_CASE("sort of blocks of very different sizes: shares near even all the same") {
  // Rank 0 holds almost everything, its keys below the others'.
  const std::size_t big = 100000, small = 200;
  std::vector<std::int64_t> mine(rank() == 0 ? big : small);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<std::int64_t>(rank()) * 1000000 + static_cast<std::int64_t>(i);
  const auto x = oa::dist::from_local(mine);
  const auto sorted = oa::dist::sort(x);
  const std::size_t n = x.size(), r = static_cast<std::size_t>(ranks());
  CHECK(sorted.local().get().size() <= n / r + n / (4 * r) + 64);
  auto want = x.gather();
  std::sort(want.begin(), want.end());
  CHECK(sorted.gather() == want);
}

TEST_CASE("sort out of core on every rank: runs of 2 MiB through a device of 8 MiB, each block 16 MiB") {
  // A sort's unit is a run of 2^18 elements, which with its GPU scratch
  // needs 7 MiB of device memory: the test's 128 KiB budget sends it to the
  // host, so this case gives it 8 MiB, an eighth of each rank's block.
  const budget_scope budget(std::size_t{8} << 20);
  const std::size_t block = std::size_t{1} << 21;
  const std::size_t n = block * static_cast<std::size_t>(ranks());
  const auto at = [](std::size_t i) { return int_at(i) * 1000003 + static_cast<std::int64_t>(i % 13); };
  const auto x = oa::dist::generate<std::int64_t>(n, at);
  oa::clear_reports();
  const auto sorted = oa::dist::sort(x);
  const std::vector<std::int64_t>& mine = sorted.local().get();
  const char* device = std::getenv("OA_DEVICE");
  if (device && std::string(device) == "emulated") {
    std::size_t run_chunks = 0;
    for (const auto& r : oa::reports())
      if (!r.calls.empty() && r.calls.front() == "oa::stl::sort (runs)" && r.device == "emulated")
        run_chunks = std::max(run_chunks, r.chunks);
    CHECK(run_chunks >= 4);  // the block's runs (7 or 8 of them) paged through the device
  }
  // Sorted within each block and across them, and the same multiset: the
  // ranks' counts, sums and sums of squares (mod 2^64) against the input's.
  CHECK(std::is_sorted(mine.begin(), mine.end()));
  const auto firsts = oa::dist::each_rank<std::int64_t>(world(), "test", [&] {
    return mine.empty() ? std::numeric_limits<std::int64_t>::max() : mine.front();
  });
  const auto lasts = oa::dist::each_rank<std::int64_t>(world(), "test", [&] {
    return mine.empty() ? std::numeric_limits<std::int64_t>::min() : mine.back();
  });
  for (std::size_t k = 1; k < firsts.size(); ++k) CHECK(lasts[k - 1] <= firsts[k]);
  const auto digest = [](const std::vector<std::int64_t>& v) {
    std::uint64_t sum = 0, squares = 0;
    for (const std::int64_t e : v) {
      sum += static_cast<std::uint64_t>(e);
      squares += static_cast<std::uint64_t>(e) * static_cast<std::uint64_t>(e);
    }
    return std::array<std::uint64_t, 3>{v.size(), sum, squares};
  };
  const auto have = oa::dist::each_rank<std::array<std::uint64_t, 3>>(world(), "test", [&] { return digest(mine); });
  std::array<std::uint64_t, 3> total{};
  for (const auto& d : have)
    for (std::size_t k = 0; k < 3; ++k) total[k] += d[k];
  CHECK(total == digest(whole<std::int64_t>(n, at)));
}

TEST_CASE("sort equals std::sort of the whole: duplicates, skewed keys, descending, shares near even") {
  const std::size_t r = static_cast<std::size_t>(ranks());
  struct keys {
    const char* name;
    std::int64_t (*at)(std::size_t);
  };
  const keys kinds[] = {
      {"spread", [](std::size_t i) { return int_at(i) * 1000003 + static_cast<std::int64_t>(i % 7); }},
      {"all equal", [](std::size_t) { return std::int64_t{42}; }},
      {"three values", [](std::size_t i) { return static_cast<std::int64_t>((i * 7919) % 3); }},
      {"skewed", [](std::size_t i) { return i % 16 == 0 ? static_cast<std::int64_t>(i) : std::int64_t{0}; }},
      {"sorted already", [](std::size_t i) { return static_cast<std::int64_t>(i); }},
  };
  for (const auto& k : kinds)
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, r + 1, std::size_t{5000}, std::size_t{200003}}) {
      CAPTURE(k.name);
      CAPTURE(n);
      const auto x = oa::dist::generate<std::int64_t>(n, k.at);
      const auto sorted = oa::dist::sort(x);
      auto want = whole<std::int64_t>(n, k.at);
      std::sort(want.begin(), want.end());
      CHECK(sorted.size() == n);
      CHECK(sorted.gather() == want);
      // No rank gets much more than its share, even of equal keys.
      if (n >= 5000) CHECK(sorted.local().get().size() <= n / r + n / (4 * r) + 64);
      const auto down = oa::dist::sort(x, std::greater<>{});
      std::reverse(want.begin(), want.end());
      CHECK(down.gather() == want);
    }
  const auto f = oa::dist::generate<float>(30011, [](std::size_t i) { return static_cast<float>(real_at(i)); });
  auto want = whole<float>(30011, [](std::size_t i) { return static_cast<float>(real_at(i)); });
  std::sort(want.begin(), want.end());
  CHECK(oa::dist::sort(f).gather() == want);
}

TEST_CASE("a collective begun inside another's local part, or from a second thread, is refused, never a hang") {
  const auto x = oa::dist::generate<double>(100, [](std::size_t i) { return static_cast<double>(i); });
  // A call evaluated for a reduction that itself calls a collective.
  const auto y = oa::dist::transform(x, [&x](double v) { return v + oa::dist::reduce(x, 0.0); });
  bool refused = false;
  try {
    (void)oa::dist::reduce(y, 0.0);
  } catch (const oa::dist::error& e) {
    refused = std::string(e.what()).find("collectives are called") != std::string::npos;
  }
  CHECK(refused);
  // Rank 0's second thread while its first waits in a collective for rank 1.
  std::string second;
  std::thread other;
  if (rank() == 0 && ranks() > 1)
    other = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      try {
        world().barrier();
      } catch (const oa::dist::error& e) {
        second = e.what();
      }
    });
  if (rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(oa::dist::reduce(x, 0.0) == 4950.0);
  if (other.joinable()) {
    other.join();
    CHECK(second.find("another thread of this rank is in an oa::dist collective") != std::string::npos);
  }
  CHECK(oa::dist::reduce(x, 1.0) == 4951.0);  // in step still
}

TEST_CASE("a block that holds other than its layout's count fails every rank's call") {
  const oa::dist::layout l = oa::dist::layout::even(10, ranks());
  const oa::dist::vector<double> b(l, oa::hold(std::vector<double>(rank() == 0 ? l.count(0) + 1 : l.count(rank()), 1.0)));
  bool named = false;
  try {
    (void)oa::dist::reduce(b, 0.0);
  } catch (const oa::dist::error& e) {
    named = e.rank() == 0 && std::string(e.what()).find("rank 0 of " + std::to_string(ranks()) + " failed: "
                                                        "oa::dist::reduce: this rank's block holds") != std::string::npos;
  }
  CHECK(named);
}

TEST_CASE("gemm over 1 x N, N x 1 and near-square grids equals one process's product") {
  std::vector<oa::dist::grid> grids{oa::dist::grid::near_square(ranks()), {1, ranks()}, {ranks(), 1}};
  struct shape {
    std::size_t m, k, n;
  };
  for (const auto& g : grids)
    for (const shape sh : {shape{37, 53, 29}, shape{1, 1, 1}, shape{5, 1, 7}, shape{64, 300, 48}}) {
      CAPTURE(g.rows);
      CAPTURE(g.cols);
      CAPTURE(sh.k);
      const auto fa = [](std::size_t i, std::size_t j) { return real_at(i * 131 + j); };
      const auto fb = [](std::size_t i, std::size_t j) { return real_at(i * 7 + j * 1009 + 5); };
      const auto a = oa::dist::generate_matrix<double>(sh.m, sh.k, fa, g);
      const auto b = oa::dist::generate_matrix<double>(sh.k, sh.n, fb, g);
      const auto c = oa::dist::gemm(a, b);
      CHECK(c.rows() == sh.m);
      CHECK(c.cols() == sh.n);
      const Eigen::MatrixXd got = c.gather(0);
      if (rank() != 0) continue;
      Eigen::MatrixXd wa(sh.m, sh.k), wb(sh.k, sh.n);
      for (std::size_t i = 0; i < sh.m; ++i)
        for (std::size_t j = 0; j < sh.k; ++j) wa(i, j) = fa(i, j);
      for (std::size_t i = 0; i < sh.k; ++i)
        for (std::size_t j = 0; j < sh.n; ++j) wb(i, j) = fb(i, j);
      const Eigen::MatrixXd want = wa * wb;
      CHECK((got - want).cwiseAbs().maxCoeff() <= 1e-9 * std::max(1.0, want.cwiseAbs().maxCoeff()));
    }
  {
    // A grid's row and column communicators are split once, kept for later products over it.
    const auto g = oa::dist::grid::near_square(ranks());
    const auto m = oa::dist::generate_matrix<double>(8, 8, [](std::size_t i, std::size_t j) { return real_at(i + j); }, g);
    const std::size_t before = oa::dist::world().kept_splits();
    (void)oa::dist::gemm(m, m);
    const std::size_t after_one = oa::dist::world().kept_splits();
    CHECK(after_one <= before + 2);
    CHECK(after_one >= 2);
    const Eigen::MatrixXd twice = oa::dist::gemm(m, m).gather(0);
    CHECK(oa::dist::world().kept_splits() == after_one);
    if (rank() == 0) CHECK(twice.rows() == 8);
  }
  const auto a = oa::dist::generate_matrix<double>(4, 5, [](std::size_t, std::size_t) { return 1.0; });
  // Operands checked in a collective: every rank fails alike, naming the argument.
  CHECK_THROWS_WITH_AS(oa::dist::gemm(a, a), doctest::Contains("oa::dist::gemm: b: 4 rows for A's 5 columns"),
                       oa::dist::error);
}

TEST_CASE("the paging workloads over distributed Eigen arrays equal plain Eigen's on the whole") {
  using A = oa::dist::array<double>;
  const auto in = [](int k, double lo, double hi) {
    return [=](std::size_t i) { return lo + (hi - lo) * (0.5 + 0.5 * std::sin(static_cast<double>(i) * 0.7 + k)); };
  };
  const auto whole_of = [](std::size_t n, auto f) {
    Eigen::ArrayXd w(static_cast<Eigen::Index>(n));
    for (std::size_t i = 0; i < n; ++i) w[static_cast<Eigen::Index>(i)] = f(i);
    return w;
  };
  const auto close = [](const Eigen::ArrayXd& got, const Eigen::ArrayXd& want) {
    REQUIRE(got.size() == want.size());
    for (Eigen::Index i = 0; i < got.size(); ++i)
      if (std::abs(got[i] - want[i]) > 1e-12 * std::max(1.0, std::abs(want[i]))) return false;
    return true;
  };
  for (std::size_t n : {std::size_t{1}, static_cast<std::size_t>(ranks()) + 1, std::size_t{3}, std::size_t{20011}}) {
    CAPTURE(n);
    const auto fp = in(1, 10, 50), fs = in(2, 10, 50), ft = in(3, 0.1, 2), fr = in(4, 0.01, 0.05), fv = in(5, 0.1, 0.5);
    const A price = oa::dist::generate_array<double>(n, fp), strike = oa::dist::generate_array<double>(n, fs),
            t = oa::dist::generate_array<double>(n, ft), rate = oa::dist::generate_array<double>(n, fr),
            vol = oa::dist::generate_array<double>(n, fv);
    A call, put;
    oa_workloads::blackscholes(price, strike, t, rate, vol, call, put);
    Eigen::ArrayXd wcall, wput;
    oa_workloads::blackscholes(whole_of(n, fp), whole_of(n, fs), whole_of(n, ft), whole_of(n, fr), whole_of(n, fv),
                               wcall, wput);
    CHECK(close(call.gather(), wcall));
    CHECK(close(put.gather(), wput));

    const auto flat = in(6, -1.5, 1.5), flon = in(7, -1.5, 1.5);
    A dist;
    oa_workloads::haversine(oa::dist::generate_array<double>(n, flat), oa::dist::generate_array<double>(n, flon), dist);
    Eigen::ArrayXd wdist;
    oa_workloads::haversine(whole_of(n, flat), whole_of(n, flon), wdist);
    CHECK(close(dist.gather(), wdist));

    const auto fpop = in(8, 1e5, 1e6), fadult = in(9, 5e4, 5e5), frob = in(10, 0, 100);
    const double crime = oa_workloads::crime_index(oa::dist::generate_array<double>(n, fpop),
                                                   oa::dist::generate_array<double>(n, fadult),
                                                   oa::dist::generate_array<double>(n, frob));
    const double wcrime = oa_workloads::crime_index(whole_of(n, fpop), whole_of(n, fadult), whole_of(n, frob));
    CHECK(std::abs(crime - wcrime) <= 1e-12 * std::max(1.0, std::abs(wcrime)));
    CHECK(oa::dist::max_coeff(price) == whole_of(n, fp).maxCoeff());
    CHECK(oa::dist::min_coeff(price) == whole_of(n, fp).minCoeff());
  }
  const A a = oa::dist::generate_array<double>(10, [](std::size_t i) { return double(i); });
  const A b(oa::dist::layout::of_counts([] {
              std::vector<std::size_t> c(static_cast<std::size_t>(ranks()), 0);
              c.back() = 10;
              if (ranks() == 1) c.back() = 10;
              return c;
            }()),
            oa::hold(Eigen::ArrayXd(rank() == ranks() - 1 ? 10 : 0)));
  if (ranks() > 1) CHECK_THROWS_AS(a + b, oa::invalid_argument);
  A none;
  CHECK_THROWS_WITH_AS(a * none, "oa: oa::dist::array operator*: right operand: an array with no layout (default-constructed)",
                       oa::invalid_argument);
}

TEST_CASE("a GPU per rank on a node: local rank modulo the GPUs the driver lists, none for one rank or no GPU") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("oa_gpus_" + std::to_string(rank()));
  fs::remove_all(dir);
  CHECK(oa::dist::detail::gpus_listed(dir.string()) == 0);  // no driver
  for (const char* bus : {"0000:17:00.0", "0000:65:00.0", "0000:b3:00.0"}) fs::create_directories(dir / bus);
  CHECK(oa::dist::detail::gpus_listed(dir.string()) == 3);
  fs::remove_all(dir);
  CHECK(oa::dist::detail::gpu_for(4, 8, 3) == 1);
  CHECK(oa::dist::detail::gpu_for(2, 8, 3) == 2);
  CHECK_FALSE(oa::dist::detail::gpu_for(0, 1, 3).has_value());  // the only rank keeps every GPU
  CHECK_FALSE(oa::dist::detail::gpu_for(1, 2, 0).has_value());
  CHECK(world().local_size() >= 1);
  CHECK(world().local_rank() < world().local_size());
}

TEST_CASE("ranks that take a value to be laid out differently fail alike, and go on together") {
  if (ranks() < 2) return;
  // Rank 1 thinks the 10 elements lie on rank 1 alone; the others, evenly.
  std::vector<std::size_t> counts(static_cast<std::size_t>(ranks()), 0);
  counts[1] = 10;
  const oa::dist::layout mine = rank() == 1 ? oa::dist::layout::of_counts(counts) : oa::dist::layout::even(10, ranks());
  const oa::dist::vector<double> v(mine, oa::hold(std::vector<double>(mine.count(rank()), 1.0)));
  bool named = false;
  try {
    (void)oa::dist::reduce(v, 0.0);
  } catch (const oa::dist::error& e) {
    named = e.rank() == 1 &&
            std::string(e.what()).find("rank 1 takes the value's layout or the call's arguments to be other than rank 0") !=
                std::string::npos;
  }
  CHECK(named);
  const auto x = oa::dist::generate<double>(10, [](std::size_t i) { return double(i); });
  CHECK(oa::dist::reduce(x, 0.0) == 45.0);
}

TEST_CASE("split communicators: numbered by key, broadcasts of their own, several under way at once") {
  const int me = rank(), half = me % 2;
  // Ranks of one parity, numbered from the highest.
  const auto part = world().split("test split", half, -me);
  const int members = (ranks() + 1 - half) / 2;
  CHECK(part->size() == members);
  CHECK(part->rank() == (ranks() - 1 - me) / 2);
  const std::uint64_t before = world().network_bytes();
  // Two broadcasts begun before either is waited for: from the first and
  // from the last of the part, each of its own bytes.
  std::vector<std::int64_t> first(1000), last(3);
  if (part->rank() == 0) std::iota(first.begin(), first.end(), 100 * me);
  if (part->rank() == members - 1) std::fill(last.begin(), last.end(), -me);
  const auto bytes = [](auto& v) { return std::as_writable_bytes(std::span(v)); };
  auto r1 = part->broadcast("test broadcast", 0, bytes(first));
  auto r2 = part->broadcast("test broadcast", members - 1, bytes(last));
  while (!r2->done()) std::this_thread::yield();
  r1->wait();
  r1->wait();  // finished: returns at once
  // The first of the part is the highest rank of this parity, the last the lowest.
  const int highest = ranks() - 1 - ((ranks() - 1 - half) % 2), lowest = half;
  CHECK(first.front() == 100 * highest);
  CHECK(first.back() == 100 * highest + 999);
  CHECK(last == std::vector<std::int64_t>(3, -lowest));
  if (members > 1) CHECK(world().network_bytes() > before);
  // The parts' collectives are apart from the world's, and name ranks as the run does.
  CHECK(oa::dist::each_rank<int>(*part, "test part", [&] { return me; }).size() == static_cast<std::size_t>(members));
  bool thrown = false;
  try {
    (void)oa::dist::each_rank<int>(*part, "test part", [&]() -> int {
      if (part->rank() == 0) throw std::runtime_error("refused");
      return 0;
    });
  } catch (const oa::dist::error& e) {
    thrown = true;
    CHECK(e.rank() == highest);
  }
  CHECK(thrown);
  // A root or a size wrong on one rank fails every rank's broadcast, before a byte moves.
  CHECK_THROWS_WITH_AS(part->broadcast("test broadcast", part->rank() == 0 ? members : 0, bytes(last)),
                       doctest::Contains("is not a rank of"), oa::dist::error);
  std::vector<std::int64_t> more(part->rank() == members - 1 ? 4 : 3);
  if (members > 1)
    CHECK_THROWS_WITH_AS(part->broadcast("test broadcast", 0, bytes(more)), doctest::Contains("bytes from root"),
                         oa::dist::error);
  // ... and the next one goes on.
  if (part->rank() == 0) last.assign(3, 42);
  part->broadcast("test broadcast", 0, bytes(last))->wait();
  CHECK(last == std::vector<std::int64_t>(3, 42));
  // A request may outlive its communicator: that finishes it.
  std::vector<std::int64_t> late(5, part->rank() == 0 ? 7 : 0);
  std::unique_ptr<oa::dist::communicator::request> kept;
  {
    const auto brief = world().split("test split", half, -me);
    kept = brief->broadcast("test broadcast", 0, bytes(late));
  }
  kept->wait();
  CHECK(late == std::vector<std::int64_t>(5, 7));
  // A color refused on one rank fails the split on every rank.
  CHECK_THROWS_AS(world().split("test split", me == ranks() - 1 ? -1 : 0, 0), oa::dist::error);
}

TEST_CASE("gemm: a product that fails on one rank fails every rank's call, naming it; the next one runs") {
  const oa::dist::grid g = oa::dist::grid::near_square(ranks());
  const auto f = [](std::size_t i, std::size_t j) { return real_at(i * 17 + j); };
  const auto a = oa::dist::generate_matrix<double>(40, 40, f, g);
  const int last = ranks() - 1;
  {
    // The last rank's products go to a runtime whose device cannot be made
    // (a GPU no machine has): they run on a thread of their own, on the
    // caller's runtime.
    std::optional<oa::runtime> broken;
    std::optional<oa::runtime::use> on;
    if (rank() == last) {
      oa::config c = oa::current_config();
      c.devices = "cuda:63";
      broken.emplace(c);
      on.emplace(*broken);
    }
    bool thrown = false;
    try {
      (void)oa::dist::gemm(a, a);
    } catch (const oa::dist::error& e) {
      thrown = true;
      CHECK(e.call() == "oa::dist::gemm");
      CHECK(e.rank() == last);
    }
    CHECK(thrown);
  }
  const Eigen::MatrixXd got = oa::dist::gemm(a, a).gather(0);
  if (rank() == 0) {
    Eigen::MatrixXd w(40, 40);
    for (std::size_t i = 0; i < 40; ++i)
      for (std::size_t j = 0; j < 40; ++j) w(i, j) = f(i, j);
    CHECK((got - w * w).cwiseAbs().maxCoeff() <= 1e-9 * (w * w).cwiseAbs().maxCoeff());
  }
}

TEST_CASE("a communicator of every rank, split: its broadcasts cross ranks, their buffers made in the agreement") {
  const int me = rank();
  const auto all = world().split("test split", 7, -me);  // every rank, numbered from the last
  CHECK(all->size() == ranks());
  CHECK(all->rank() == ranks() - 1 - me);
  std::vector<double> got;
  const auto before = world().network_bytes();
  all->broadcast("test broadcast", 0, [&] {
    got.assign(100, all->rank() == 0 ? 2.5 : 0.0);
    return std::as_writable_bytes(std::span(got));
  })->wait();
  CHECK(got == std::vector<double>(100, 2.5));
  if (ranks() > 1) CHECK(world().network_bytes() - before >= 100 * sizeof(double));
  // A buffer that cannot be made on one rank fails every rank's broadcast.
  CHECK_THROWS_WITH_AS(all->broadcast("test broadcast", 0, [&]() -> std::span<std::byte> {
    if (me == ranks() - 1) throw std::bad_alloc();
    return std::as_writable_bytes(std::span(got));
  }), doctest::Contains("failed"), oa::dist::error);
  // Sizes that differ fail every rank, naming the sizes.
  std::vector<double> mine(me == 0 ? 3 : 4);
  if (ranks() > 1)
    CHECK_THROWS_WITH_AS(all->broadcast("test broadcast", 0, std::as_writable_bytes(std::span(mine))),
                         doctest::Contains("bytes from root"), oa::dist::error);
}

TEST_CASE("what one rank gets wrong in a collective fails every rank's call: roots, shapes, communicators, names") {
  const int me = rank(), last = ranks() - 1;
  const auto x = oa::dist::generate<double>(10, [](std::size_t i) { return static_cast<double>(i); });
  // A root out of range on one rank.
  CHECK_THROWS_WITH_AS(x.gather(me == last ? ranks() : 0), doctest::Contains("root"), oa::dist::error);
  // Ranks naming different roots.
  if (ranks() > 1) CHECK_THROWS_AS(x.gather(me == last ? 1 : 0), oa::dist::error);
  CHECK(x.gather(0).size() == (me == 0 ? 10u : 0u));
  const auto m = oa::dist::generate_matrix<double>(6, 6, [](std::size_t i, std::size_t j) { return double(i + j); });
  CHECK_THROWS_AS(m.gather(me == last ? -1 : 0), oa::dist::error);
  // A product whose inner sizes differ on one rank only.
  const auto b = oa::dist::generate_matrix<double>(me == last ? 5 : 6, 4, [](std::size_t, std::size_t) { return 1.0; });
  CHECK_THROWS_WITH_AS(oa::dist::gemm(m, b), doctest::Contains("rows for A's 6 columns"), oa::dist::error);
  // Values over different communicators are refused, naming the argument.
  const auto part = world().split("test split", 0, -me);
  const auto y = oa::dist::generate<double>(10, [](std::size_t i) { return static_cast<double>(i); }, *part);
  CHECK_THROWS_WITH_AS(oa::dist::transform(x, y, std::plus<>{}), doctest::Contains("second range"),
                       oa::invalid_argument);
  CHECK_THROWS_AS(oa::dist::transform_reduce(x, y, 0.0), oa::invalid_argument);
}

