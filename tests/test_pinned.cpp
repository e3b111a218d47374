// The pinned memory pool, the registry of pinned ranges, pin/unpin and
// pinned_vector. Without a GPU the pool's backend is anonymous memory,
// pre-touched and mlock'ed when RLIMIT_MEMLOCK permits; with one, the
// process-wide pool's is cudaHostAlloc.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <oa/core/error.hpp>
#include <oa/core/pinned.hpp>
#if defined(OA_HAS_CUDA)
#include <oa/cuda/device.hpp>
#endif
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

/// The process-wide pool's backend: cudaHostAlloc where a GPU is usable.
std::string process_backend() {
#if defined(OA_HAS_CUDA)
  if (oa::cuda::usable_devices() > 0) return "cuda";
#endif
  return "mmap";
}

oa::pinned_memory_resource::options small_arenas(std::size_t arena = 2 * MiB) {
  oa::pinned_memory_resource::options o;
  o.arena_bytes = arena;
  o.backend = oa::pinned_memory_resource::backend_kind::host;
  o.touch_threads = 2;
  return o;
}

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }


}  // namespace

TEST_CASE("pinned pool: a freed block is reused, stats follow") {
  oa::pinned_memory_resource pool(small_arenas());
  CHECK(pool.stats().backend == "");
  void* a = pool.allocate(1000);
  const auto s = pool.stats();
  CHECK(s.backend == "mmap");
  CHECK(s.reserved_bytes == 2 * MiB);
  CHECK(s.arenas == 1);
  CHECK(s.backend_allocations == 1);
  CHECK(s.backend_seconds > 0);
  CHECK(s.in_use_bytes == 1024);  // rounded up to 64 bytes
  CHECK(pool.block_size(a) == 1024);
  // Locked, or the stats say why not.
  CHECK((s.locked_bytes == s.reserved_bytes || s.not_locked_reason.find("RLIMIT_MEMLOCK") != std::string::npos));
  void* b = pool.allocate(5000);
  CHECK(pool.stats().peak_in_use_bytes == 1024 + 5056);
  pool.deallocate(a, 1000);
  CHECK(pool.stats().in_use_bytes == 5056);
  CHECK(pool.block_size(a) == 0);
  void* c = pool.allocate(900);
  CHECK(c == a);  // first fit: the freed block
  pool.deallocate(b, 5000);
  pool.deallocate(c, 900);
  const auto e = pool.stats();
  CHECK(e.in_use_bytes == 0);
  CHECK(e.peak_in_use_bytes == 1024 + 5056);
  CHECK(e.backend_allocations == 1);
  CHECK(e.reserved_bytes == 2 * MiB);  // kept for reuse
}

TEST_CASE("pinned pool: freed neighbours coalesce into one block") {
  oa::pinned_memory_resource pool(small_arenas());
  const std::size_t third = 2 * MiB / 3 / 64 * 64;
  void* a = pool.allocate(third);
  void* b = pool.allocate(third);
  void* c = pool.allocate(third);
  CHECK(pool.stats().arenas == 1);
  // Freed out of order: a and c first (not adjacent), then b joins them.
  pool.deallocate(a, third);
  pool.deallocate(c, third);
  pool.deallocate(b, third);
  // The whole arena is one free block again: a request of all of it fits.
  void* whole = pool.allocate(2 * MiB);
  CHECK(whole == a);
  CHECK(pool.stats().backend_allocations == 1);
  pool.deallocate(whole, 2 * MiB);
}

TEST_CASE("pinned pool: alignment") {
  oa::pinned_memory_resource pool(small_arenas());
  void* small = pool.allocate(1, 1);
  CHECK(aligned(small, 64));
  void* page = pool.allocate(100, 4096);
  CHECK(aligned(page, 4096));
  void* huge = pool.allocate(3 * MiB, 1 * MiB);  // beyond the arena size: its own arena
  CHECK(aligned(huge, 1 * MiB));
  CHECK(pool.stats().arenas == 2);
  std::size_t not_a_power_of_two = 48;  // a variable: a constant is a compile-time warning
  CHECK_THROWS_AS((void)pool.allocate(64, not_a_power_of_two), std::bad_alloc);
  pool.deallocate(small, 1, 1);
  pool.deallocate(page, 100, 4096);
  pool.deallocate(huge, 3 * MiB, 1 * MiB);
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("pinned pool: a request beyond the arena size gets an arena of its own, release() returns free arenas") {
  oa::pinned_memory_resource pool(small_arenas());
  void* a = pool.allocate(100);
  void* big = pool.allocate(5 * MiB);
  auto s = pool.stats();
  CHECK(s.arenas == 2);
  CHECK(s.reserved_bytes == 2 * MiB + 6 * MiB);  // 5 MiB rounded up to huge pages
  CHECK(oa::is_pinned(big, 5 * MiB));
  pool.deallocate(big, 5 * MiB);
  CHECK(pool.release() == 6 * MiB);  // the arena with a still in use stays
  s = pool.stats();
  CHECK(s.arenas == 1);
  CHECK(s.reserved_bytes == 2 * MiB);
  CHECK_FALSE(oa::is_pinned(big, 64));
  CHECK(oa::is_pinned(a, 100));
  pool.deallocate(a, 100);
}

TEST_CASE("pinned pool: failure is std::bad_alloc with the reason") {
  oa::pinned_memory_resource pool(small_arenas());
  try {
    (void)pool.allocate(std::size_t{1} << 61);
    FAIL("no bad_alloc");
  } catch (const std::bad_alloc& e) {
    CHECK(std::string(e.what()).find("mmap") != std::string::npos);
  }
  CHECK(pool.stats().reserved_bytes == 0);
  CHECK_THROWS_AS(oa::pinned_memory_resource(oa::pinned_memory_resource::options{0}), oa::invalid_argument);
}

TEST_CASE("pinned pool: threads allocating and freeing at once") {
  oa::pinned_memory_resource pool(small_arenas());
  std::atomic<int> corrupted{0};
  auto work = [&](unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_int_distribution<std::size_t> size(1, 64 * 1024);
    std::vector<std::pair<unsigned char*, std::size_t>> held;
    for (int i = 0; i < 3000; ++i) {
      if (held.size() < 16 && g() % 3 != 0) {
        const std::size_t n = size(g);
        auto* p = static_cast<unsigned char*>(pool.allocate(n));
        std::memset(p, static_cast<int>(seed), n);
        held.emplace_back(p, n);
      } else if (!held.empty()) {
        const std::size_t k = g() % held.size();
        auto [p, n] = held[k];
        for (std::size_t j = 0; j < n; ++j)
          if (p[j] != static_cast<unsigned char>(seed)) {
            ++corrupted;  // another thread was given overlapping memory
            break;
          }
        pool.deallocate(p, n);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (auto [p, n] : held) pool.deallocate(p, n);
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t <= 4; ++t) threads.emplace_back(work, t);
  for (auto& t : threads) t.join();
  CHECK(corrupted == 0);
  const auto s = pool.stats();
  CHECK(s.in_use_bytes == 0);
  CHECK(s.peak_in_use_bytes > 0);
  CHECK(pool.release() == s.reserved_bytes);  // everything coalesced back into whole free arenas
}

TEST_CASE("is_pinned: inside, straddling and outside pinned ranges") {
  auto* pool = new oa::pinned_memory_resource(small_arenas());
  auto* p = static_cast<char*>(pool->allocate(MiB));
  REQUIRE(pool->owns(p));
  // The arena is [p, p + 2 MiB) (the first block starts it).
  CHECK(oa::is_pinned(p, MiB));
  CHECK(oa::is_pinned(p + 100, 1000));
  CHECK(oa::is_pinned(p, 2 * MiB));
  CHECK(oa::is_pinned(p + 2 * MiB - 8, 0));
  CHECK_FALSE(oa::is_pinned(p + 2 * MiB - 8, 16));  // straddles the arena's end
  CHECK_FALSE(oa::is_pinned(p - 8, 16));            // straddles its start
  CHECK_FALSE(oa::is_pinned(p + 2 * MiB, 8));       // just past it
  int on_stack = 0;
  CHECK_FALSE(oa::is_pinned(&on_stack, sizeof on_stack));
  CHECK_FALSE(oa::is_pinned(nullptr, 8));
  CHECK_FALSE(oa::is_pinned(p, SIZE_MAX));
  CHECK_FALSE(pool->owns(&on_stack));
  pool->deallocate(p, MiB);
  delete pool;  // its arenas leave the registry with it
  CHECK_FALSE(oa::is_pinned(p, 8));
}

TEST_CASE("pin and unpin a user's memory") {
  std::vector<char> data(MiB + 100, 'x');
  char* p = data.data();
  CHECK_FALSE(oa::is_pinned(p, data.size()));
  oa::pin(p, data.size());
  CHECK(oa::is_pinned(p, data.size()));
  CHECK(oa::is_pinned(p + 10, 100));
  CHECK_FALSE(oa::is_pinned(p, data.size() + 1));
  CHECK(std::all_of(data.begin(), data.end(), [](char c) { return c == 'x'; }));  // left as it was

  oa_test::expect_invalid([&] { oa::pin(p + 100, 10); }, "oa::pin", "p");              // inside
  oa_test::expect_invalid([&] { oa::pin(p - 10, 20); }, "oa::pin", "p");               // straddling the start
  oa_test::expect_invalid([&] { oa::pin(p + data.size() - 1, 20); }, "oa::pin", "p");  // straddling the end
  oa_test::expect_invalid([&] { oa::pin(nullptr, 10); }, "oa::pin", "p");
  oa_test::expect_invalid([&] { oa::pin(p, 0); }, "oa::pin", "bytes");
  oa_test::expect_invalid([&] { oa::unpin(p + 1); }, "oa::unpin", "p");
  oa_test::expect_invalid([&] { oa::unpin(nullptr); }, "oa::unpin", "p");
  CHECK(oa::is_pinned(p, data.size()));  // failures changed nothing

  oa::unpin(p);
  CHECK_FALSE(oa::is_pinned(p, 1));
  oa_test::expect_invalid([&] { oa::unpin(p); }, "oa::unpin", "p");
  // Pinned again after unpin; a neighbour that does not overlap may be pinned too.
  oa::pin(p, 1000);
  oa::pin(p + 1000, 1000);
  CHECK(oa::is_pinned(p + 1000, 1000));
  CHECK_FALSE(oa::is_pinned(p + 900, 200));  // two ranges, not one
  oa::unpin(p);
  oa::unpin(p + 1000);

  // The pool's memory is pinned already, and goes back through its pool.
  oa::pinned_memory_resource pool(small_arenas());
  void* q = pool.allocate(64);
  oa_test::expect_invalid([&] { oa::pin(q, 64); }, "oa::pin", "p");
  oa_test::expect_invalid([&] { oa::unpin(q); }, "oa::unpin", "p");
  pool.deallocate(q, 64);
}

TEST_CASE("pinned_vector<double> of 10^7 elements") {
  const std::size_t n = 10'000'000;
  const auto before = oa::pinned_memory().stats();
  oa::pinned_vector<double> v(n);
  CHECK(v[n - 1] == 0.0);  // value-initialised
  std::iota(v.begin(), v.end(), 0.0);
  CHECK(v[n - 1] == double(n - 1));
  CHECK(oa::is_pinned(v.data(), n * sizeof(double)));
  CHECK(aligned(v.data(), 64));
  CHECK(oa::pinned_memory().owns(v.data()));
  const auto s = oa::pinned_memory().stats();
  CHECK(s.in_use_bytes >= before.in_use_bytes + n * sizeof(double));
  CHECK(s.backend == process_backend());
  oa::pinned_vector<double> w = v;  // stateless allocator: copies share the pool
  CHECK(w == v);
  CHECK(oa::pinned_allocator<double>{} == oa::pinned_allocator<int>{});
  v.clear();
  v.shrink_to_fit();
  oa::pinned_vector<double>().swap(w);
  CHECK(oa::pinned_memory().stats().in_use_bytes == before.in_use_bytes);
  struct alignas(128) wide {
    double x[16];
  };
  oa::pinned_vector<wide> ws(3);
  CHECK(aligned(ws.data(), 128));
}

// Prints the pool's first-allocation cost beside a std::vector's first touch
// (OA_TEST_PINNED_BYTES bytes, default 256 MiB).
TEST_CASE("pinned pool: first-allocation cost") {
  std::size_t bytes = 256 * MiB;
  if (const char* e = std::getenv("OA_TEST_PINNED_BYTES")) bytes = std::strtoull(e, nullptr, 10);
  const double gib = double(bytes) / double(std::size_t{1} << 30);
  oa::pinned_memory_resource pool(small_arenas(bytes));
  auto t0 = std::chrono::steady_clock::now();
  void* p = pool.allocate(bytes);
  const double pool_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto s = pool.stats();
  t0 = std::chrono::steady_clock::now();
  std::vector<double> v(bytes / sizeof(double));
  const double vec_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("pool first allocation: " << pool_s / gib << " s/GiB (backend " << s.backend << ", locked "
                                    << s.locked_bytes << " of " << s.reserved_bytes << " bytes"
                                    << (s.not_locked_reason.empty() ? "" : ": " + s.not_locked_reason)
                                    << ", huge pages " << s.huge_pages << "); std::vector<double> first touch: "
                                    << vec_s / gib << " s/GiB");
  CHECK(s.backend_seconds <= pool_s);
  CHECK(s.backend_seconds > 0);
  CHECK(v[v.size() / 2] == 0.0);
  pool.deallocate(p, bytes);
}
