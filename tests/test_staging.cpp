// The staging engine on a port of its own: each stream a thread running its
// work in order (waits on words, copies, word writes), "device memory" in
// host memory. Random copies in and out of random shapes through a few small
// slots arrive whole and in order; faults of fills and drains reach the
// stream whose copy failed and nothing hangs; an abort lets the engine go.

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/staging.hpp"
#include "oa/core/error.hpp"

namespace {

using oa::region;
using oa::detail::flag_word;
using oa::detail::staging_engine;
using oa::detail::staging_options;

/// Streams as threads, each running its queue in order.
class thread_port final : public oa::detail::staging_port {
 public:
  explicit thread_port(int streams) {
    for (int i = 0; i < streams; ++i) streams_.push_back(std::make_unique<stream>());
  }

  void wait_value(oa::stream_id s, const flag_word& w, std::uint32_t v) override {
    submitted.emplace_back('w', v);
    at(s).push([&w, v](bool) {
      while (!oa::detail::reached(w.load(std::memory_order_acquire), v)) std::this_thread::yield();
    });
  }
  void write_value(oa::stream_id s, flag_word& w, std::uint32_t v, flag_word* failed) override {
    at(s).push([&w, v, failed](bool stream_failed) {
      if (failed && stream_failed) failed->store(v, std::memory_order_release);
      w.store(v, std::memory_order_release);
    });
  }
  void dma(const region& dst, const region& src, oa::phase, oa::stream_id s) override {
    ++dmas;
    submitted.emplace_back('d', 0);
    at(s).push([dst, src](bool failed) {
      if (!failed) oa::copy_region(dst, src);
    });
  }
  void fail(oa::stream_id s, std::exception_ptr e) noexcept override {
    std::lock_guard lock(at(s).m);
    if (!at(s).error) at(s).error = e;
  }
  void host_wrote(const flag_word&) noexcept override {}

  /// Stream s does nothing for `d` before its next work.
  void hold(oa::stream_id s, std::chrono::milliseconds d) {
    at(s).push([d](bool) { std::this_thread::sleep_for(d); });
  }

  /// Waits for stream s's queue; its first error, if any.
  std::exception_ptr synchronize(oa::stream_id s) {
    stream& st = at(s);
    std::unique_lock lock(st.m);
    st.cv.wait(lock, [&] { return st.queue.empty() && !st.busy; });
    return st.error;
  }

  std::atomic<int> dmas{0};
  /// What the engine asked of the streams, in order: ('w', value) a wait, ('d', 0) a DMA.
  std::vector<std::pair<char, std::uint32_t>> submitted;

 private:
  struct stream {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::function<void(bool)>> queue;
    bool busy = false, stopping = false;
    std::exception_ptr error;
    std::thread thread{[this] { loop(); }};
    ~stream() {
      {
        std::lock_guard lock(m);
        stopping = true;
      }
      cv.notify_all();
      thread.join();
    }
    void push(std::function<void(bool)> f) {
      {
        std::lock_guard lock(m);
        queue.push_back(std::move(f));
      }
      cv.notify_all();
    }
    void loop() {
      for (;;) {
        std::function<void(bool)> f;
        bool failed;
        {
          std::unique_lock lock(m);
          cv.wait(lock, [&] { return stopping || !queue.empty(); });
          if (queue.empty()) return;
          f = std::move(queue.front());
          queue.pop_front();
          busy = true;
          failed = error != nullptr;
        }
        f(failed);
        {
          std::lock_guard lock(m);
          busy = false;
        }
        cv.notify_all();
      }
    }
  };
  stream& at(oa::stream_id s) { return *streams_.at(static_cast<std::size_t>(s)); }
  std::vector<std::unique_ptr<stream>> streams_;
};

struct copy_case {
  std::vector<std::byte> host, device, back;
  region host_r, device_r, back_r;
  int stream;
};

/// A random region shape of at most ~64 KiB: one row, or rows with a pitch.
copy_case random_case(std::mt19937_64& g, int streams) {
  copy_case c;
  const std::size_t width = std::uniform_int_distribution<std::size_t>(1, 20000)(g);
  const std::size_t rows = std::uniform_int_distribution<std::size_t>(1, 6)(g);
  const std::size_t pitch = width + std::uniform_int_distribution<std::size_t>(0, 64)(g);
  const std::size_t span = (rows - 1) * pitch + width;
  c.host.resize(span);
  c.device.resize(span);
  c.back.assign(span, std::byte{0});
  for (auto& b : c.host) b = static_cast<std::byte>(g());
  c.host_r = {c.host.data(), width, rows, pitch};
  c.device_r = {c.device.data(), width, rows, pitch};
  c.back_r = {c.back.data(), width, rows, pitch};
  c.stream = std::uniform_int_distribution<int>(0, streams - 1)(g);
  return c;
}

bool same_region(const copy_case& c) {
  for (std::size_t r = 0; r < c.host_r.rows; ++r)
    if (std::memcmp(c.host.data() + r * c.host_r.pitch, c.back.data() + r * c.back_r.pitch, c.host_r.width) != 0)
      return false;
  return true;
}

staging_options small_slots(int slots, int threads) {
  staging_options o;
  o.slot_bytes = 8192;  // rows wider than this go in parts of a row
  o.slots = slots;
  o.fill_threads = threads;
  o.drain_threads = threads;
  return o;
}

}  // namespace

TEST_CASE("staging: random copies in and out through a few small slots arrive whole") {
  for (int slots : {1, 3}) {
    for (int threads : {1, 3}) {
      CAPTURE(slots);
      CAPTURE(threads);
      constexpr int streams = 3;
      thread_port port(streams);
      staging_engine engine(port, *std::pmr::new_delete_resource(), small_slots(slots, threads));
      std::mt19937_64 g(static_cast<std::uint64_t>(slots * 10 + threads));
      std::vector<copy_case> cases;
      for (int i = 0; i < 60; ++i) cases.push_back(random_case(g, streams));
      for (auto& c : cases) {
        engine.copy_in(c.device_r, c.host_r, c.stream);
        engine.copy_out(c.back_r, c.device_r, c.stream);
      }
      for (int s = 0; s < streams; ++s) CHECK(port.synchronize(s) == nullptr);
      std::size_t bytes = 0;
      for (const auto& c : cases) {
        CHECK(same_region(c));
        bytes += c.host_r.bytes();
      }
      const auto st = engine.stats();
      CHECK(st.bytes_in == bytes);
      CHECK(st.bytes_out == bytes);
      CHECK(port.dmas.load() > 120);  // wide rows went in several pieces
    }
  }
}

TEST_CASE("staging: a failed fill or drain fails its stream's later work, and nothing waits forever") {
  for (bool fill : {true, false}) {
    CAPTURE(fill);
    constexpr int streams = 2;
    thread_port port(streams);
    staging_options o = small_slots(2, 2);
    (fill ? o.fail_fill : o.fail_drain) = 3;
    staging_engine engine(port, *std::pmr::new_delete_resource(), o);
    std::mt19937_64 g(7);
    std::vector<copy_case> cases;
    for (int i = 0; i < 20; ++i) cases.push_back(random_case(g, streams));
    for (auto& c : cases) {
      engine.copy_in(c.device_r, c.host_r, c.stream);
      engine.copy_out(c.back_r, c.device_r, c.stream);
    }
    int failed = 0;
    for (int s = 0; s < streams; ++s) {
      const std::exception_ptr e = port.synchronize(s);
      if (!e) continue;
      ++failed;
      CHECK_THROWS_WITH_AS(std::rethrow_exception(e),
                           doctest::Contains(fill ? "injected fault in fill #3" : "injected fault in drain #3"),
                           oa::device_fault);
    }
    CHECK(failed == 1);
    // Copies on the stream that did not fail are whole.
    for (int s = 0; s < streams; ++s)
      if (!port.synchronize(s))
        for (const auto& c : cases)
          if (c.stream == s) CHECK(same_region(c));
  }
}

TEST_CASE("staging: an aborted engine goes, though its streams never ran") {
  thread_port port(1);
  staging_engine engine(port, *std::pmr::new_delete_resource(), small_slots(1, 1));
  // Two uses of one slot: the second fill waits for a DMA the stream will
  // not run until a word nobody sets (a lost device, as it looks to the host).
  flag_word never{0};
  port.wait_value(0, never, 1);
  std::vector<std::byte> host(4096, std::byte{1}), dev(4096);
  const region h{host.data(), host.size(), 1, host.size()}, d{dev.data(), dev.size(), 1, dev.size()};
  engine.copy_in(d, h, 0);
  engine.copy_in(d, h, 0);
  engine.abort();
  never.store(1);  // the stream runs: the aborted fill still set its word
  CHECK(port.synchronize(0) == nullptr);
}

TEST_CASE("staging: large drains into fresh pages are faulted in ahead, and bytes between rows stay as they were") {
  // 48 MiB of rows with gaps between them, never touched before the copy
  // out: several threads fault the pages in, piece by piece, ahead of the
  // drains; the gaps' bytes (written before) and the rows arrive unchanged.
  constexpr std::size_t width = (std::size_t{3} << 20) + 100, pitch = width + 4096 + 17, rows = 16;
  constexpr std::size_t span = (rows - 1) * pitch + width;
  std::vector<std::byte> device(span);
  std::mt19937_64 g(5);
  for (auto& b : device) b = static_cast<std::byte>(g());
  void* fresh = std::malloc(span + 64);  // large: fresh pages from the system, untouched
  REQUIRE(fresh);
  auto* back = static_cast<std::byte*>(fresh) + 33;  // not page-aligned
  for (std::size_t r = 0; r + 1 < rows; ++r) std::memset(back + r * pitch + width, 0x5a, pitch - width);
  thread_port port(1);
  staging_options o = small_slots(4, 4);
  o.slot_bytes = std::size_t{1} << 20;
  auto engine_owner = std::make_unique<staging_engine>(port, *std::pmr::new_delete_resource(), o);
  staging_engine& engine = *engine_owner;
  // The DMAs wait a while, as a busy GPU's would: the faulting threads start
  // before any drain has run (once a copy's drains have all run they skip).
  port.hold(0, std::chrono::milliseconds(200));
  engine.copy_out({back, width, rows, pitch}, {device.data(), width, rows, pitch}, 0);
  CHECK(port.synchronize(0) == nullptr);
  bool rows_same = true, gaps_same = true;
  for (std::size_t r = 0; r < rows; ++r) {
    rows_same = rows_same && std::memcmp(back + r * pitch, device.data() + r * pitch, width) == 0;
    if (r + 1 < rows)
      for (std::size_t i = width; i < pitch; ++i) gaps_same = gaps_same && back[r * pitch + i] == std::byte{0x5a};
  }
  CHECK(rows_same);
  CHECK(gaps_same);
  CHECK(engine.stats().bytes_out == width * rows);
  // The faulting threads run beside the drains: they may finish after them.
  for (int i = 0; i < 500 && engine.stats().prefault_seconds == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(engine.stats().prefault_seconds > 0);
  engine_owner.reset();  // its faulting threads are done with the memory before it goes
  std::free(fresh);
}

TEST_CASE("staging: the pieces of one copy out cross the link without waiting for each other's drains") {
  // Four pieces through four slots, first use of each: the stream waits for
  // the slots' earlier drains (value 0) before each DMA and for this copy's
  // drains (value 1) only after the last DMA, so the drains of one copy run
  // on several threads at once. Waiting after each piece made them one at a
  // time, each DMA after the previous piece's drain.
  thread_port port(1);
  staging_options o = small_slots(4, 4);
  o.slot_bytes = 4096;
  staging_engine engine(port, *std::pmr::new_delete_resource(), o);
  std::vector<std::byte> device(4 * 4096), back(4 * 4096);
  std::mt19937_64 g(13);
  for (auto& b : device) b = static_cast<std::byte>(g());
  engine.copy_out({back.data(), back.size(), 1, back.size()}, {device.data(), device.size(), 1, device.size()}, 0);
  CHECK(port.synchronize(0) == nullptr);
  CHECK(back == device);
  std::size_t last_dma = 0, first_drain_wait = port.submitted.size();
  for (std::size_t i = 0; i < port.submitted.size(); ++i) {
    if (port.submitted[i].first == 'd') last_dma = i;
    if (port.submitted[i] == std::pair<char, std::uint32_t>{'w', 1}) first_drain_wait = std::min(first_drain_wait, i);
  }
  CHECK(port.dmas == 4);
  CHECK(std::count(port.submitted.begin(), port.submitted.end(), std::pair<char, std::uint32_t>{'w', 1}) == 4);
  CHECK(last_dma < first_drain_wait);
}

TEST_CASE("staging: recorded spans account for every byte filled and drained, and none while off") {
  constexpr int streams = 2;
  thread_port port(streams);
  staging_engine engine(port, *std::pmr::new_delete_resource(), small_slots(2, 2));
  std::mt19937_64 g(9);
  std::vector<copy_case> cases;
  for (int i = 0; i < 20; ++i) cases.push_back(random_case(g, streams));
  const auto epoch = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (i == 10) engine.record_spans(true, epoch);  // the first ten are not recorded
    engine.copy_in(cases[i].device_r, cases[i].host_r, cases[i].stream);
    engine.copy_out(cases[i].back_r, cases[i].device_r, cases[i].stream);
  }
  for (int s = 0; s < streams; ++s) CHECK(port.synchronize(s) == nullptr);
  engine.record_spans(false, epoch);
  std::size_t recorded = 0;
  for (std::size_t i = 10; i < cases.size(); ++i) recorded += cases[i].host_r.bytes();
  std::size_t filled = 0, drained = 0;
  for (const oa::op_record& r : engine.take_spans()) {
    CHECK(r.begin >= 0);
    CHECK(r.end >= r.begin);
    CHECK((r.stream == 0 || r.stream == 1));
    CHECK((r.what == oa::phase::fill || r.what == oa::phase::drain));  // no destination here is large enough to prefault
    (r.what == oa::phase::fill ? filled : drained) += r.bytes;
  }
  // A fill queued before recording began may run after: at least the later ones.
  CHECK(filled >= recorded);
  CHECK(drained >= recorded);
  CHECK(filled <= engine.stats().bytes_in);
  CHECK(drained <= engine.stats().bytes_out);
  CHECK(engine.take_spans().empty());  // taken
}
