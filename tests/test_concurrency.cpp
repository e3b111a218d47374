// The runtime from several threads at once: runtimes of their own and a
// shared one, one handle read by several threads, configuration replaced
// while other threads read it. The values are checked here; the races are
// ThreadSanitizer's to find (the tsan preset, run by CI).

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support.hpp"
#include "user_library/vecmath_oa.hpp"

namespace {

constexpr int thread_count = 4;

/// Runs `body(i)` on `thread_count` threads at once and joins them.
template <class F>
void on_threads(F body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < thread_count; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

}  // namespace

TEST_CASE("threads with runtimes of their own compute side by side") {
  std::vector<int> right(thread_count, 0);
  on_threads([&](int i) {
    oa::runtime rt(oa_test::emulated_config(std::size_t{1} << 16));
    oa::runtime::use u(rt);
    const std::vector<double> a(5000, 1.0 + i), b(5000, 2.0);
    bool ok = true;
    for (int k = 0; k < 20; ++k) ok = ok && vecmath::oa::add(a, b).get()[4999] == 3.0 + i;
    right[static_cast<std::size_t>(i)] = ok;
  });
  for (int r : right) CHECK(r == 1);
}

TEST_CASE("threads sharing one runtime evaluate in turn on its devices") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 16)}) {
    CAPTURE(cfg.device);
    oa::runtime shared(cfg);
    std::vector<int> right(thread_count, 0);
    on_threads([&](int i) {
      oa::runtime::use u(shared);
      const std::vector<double> a(5000, 1.0 + i), b(5000, 2.0);
      bool ok = true;
      for (int k = 0; k < 20; ++k) ok = ok && vecmath::oa::mul(a, b).get()[17] == 2.0 * (1.0 + i);
      right[static_cast<std::size_t>(i)] = ok;
    });
    for (int r : right) CHECK(r == 1);
    CHECK(shared.reports().size() == thread_count * 20);
  }
}

TEST_CASE("several threads call get() on one handle while it is evaluated") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 16)}) {
    CAPTURE(cfg.device);
    oa::runtime rt(cfg);
    oa::runtime::use u(rt);
    const std::vector<double> a(20000, 1.5), b(20000, 2.5);
    for (int round = 0; round < 10; ++round) {
      const auto sum = vecmath::oa::add(a, b);  // recorded here, evaluated by whichever thread asks first
      std::atomic<int> right{0};
      on_threads([&, sum](int) {
        const std::vector<double>& v = sum.get();
        if (v.size() == a.size() && v.front() == 4.0 && v.back() == 4.0) right.fetch_add(1);
      });
      CHECK(right.load() == thread_count);
    }
  }
}

TEST_CASE("several threads receive the error of one failed handle") {
  oa::runtime rt(oa_test::host_config());
  oa::runtime::use u(rt);
  const std::vector<double> bad(1000, -1.0);
  for (int round = 0; round < 10; ++round) {
    const auto root = vecmath::oa::checked_sqrt(bad);
    std::atomic<int> thrown{0};
    on_threads([&, root](int) {
      try {
        (void)root.get();
      } catch (const std::exception& e) {
        if (std::string(e.what()).find("checked_sqrt") != std::string::npos) thrown.fetch_add(1);
      }
    });
    CHECK(thrown.load() == thread_count);
  }
}

TEST_CASE("set_config on one thread while others copy current_config()") {
  oa::config one = oa_test::host_config(), two = one;
  one.streams = 2;
  one.chunk_bytes = std::size_t{2} << 20;
  two.streams = 3;
  two.chunk_bytes = std::size_t{3} << 20;
  oa::runtime rt(one);
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::thread writer([&] {
    oa::runtime::use u(rt);
    for (int k = 0; k < 2000; ++k) oa::set_config(k % 2 ? one : two);
    done = true;
  });
  on_threads([&](int) {
    oa::runtime::use u(rt);
    do {
      // Each copy is one of the two configurations, never a mix of them.
      const oa::config c = oa::current_config();
      if (c.chunk_bytes != static_cast<std::size_t>(c.streams) << 20) torn.fetch_add(1);
    } while (!done);
  });
  writer.join();
  CHECK(torn.load() == 0);
}
