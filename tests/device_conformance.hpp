#pragma once
// The launch contract, checked the same way on every device: test_devices
// runs these on the host and emulated devices, test_cuda on a GPU. Work is
// host functions and copies only, so that no body touches device memory from
// the host. `Enqueue::run(view, f)` makes f the entry's work in stream
// order: on devices that run entries on the stream's turn it calls f; on
// the CUDA device (called at submission) it enqueues f on the stream.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "oa/core/device.hpp"
#include "oa/core/process_clock.hpp"

namespace oa_conformance {

using namespace std::chrono_literals;

/// Devices whose entries run on the stream's turn: the work runs in the entry.
struct direct {
  static void run(const oa::stream_view&, std::function<void()> f) { f(); }
};

template <class Enqueue>
oa::launch host_work(std::string name, std::function<void()> f) {
  return {std::move(name), [f = std::move(f)](const oa::stream_view& v) { Enqueue::run(v, f); }, {}};
}

inline oa::region whole(void* p, std::size_t bytes) { return {static_cast<std::byte*>(p), bytes, 1, bytes}; }

/// Launches on one stream run in submission order.
template <class Enqueue>
void entries_in_order(oa::device& dev) {
  const auto s = dev.create_stream();
  std::vector<int> seen;
  for (int i = 0; i < 300; ++i) dev.launch_async(host_work<Enqueue>("append", [&seen, i] { seen.push_back(i); }), s);
  dev.synchronize(s);
  std::vector<int> expected(300);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(seen == expected);
  dev.destroy_stream(s);
}

/// An event recorded on one stream orders work on another after it.
template <class Enqueue>
void events_order_streams(oa::device& dev) {
  const auto a = dev.create_stream(), b = dev.create_stream();
  std::atomic<int> flag{0}, observed{-1};
  dev.launch_async(host_work<Enqueue>("produce", [&] {
                     std::this_thread::sleep_for(20ms);
                     flag = 1;
                   }),
                   a);
  const oa::event e = dev.record_event(a);
  dev.wait_event(b, e);
  dev.launch_async(host_work<Enqueue>("consume", [&] { observed = flag.load(); }), b);
  dev.synchronize(b);
  CHECK(observed == 1);
  CHECK(dev.synchronize_event(e) == nullptr);
  dev.destroy_stream(a);
  dev.destroy_stream(b);
}

/// Copies in and out, contiguous and strided, on two streams at once, come
/// back as they went.
template <class Enqueue>
void copies_round_trip(oa::device& dev) {
  constexpr std::size_t n = 1 << 16;
  const auto a = dev.create_stream(), b = dev.create_stream();
  std::vector<double> in(2 * n), out(2 * n, -1.0);
  std::iota(in.begin(), in.end(), 0.5);
  void* d = dev.allocate(2 * n * sizeof(double));
  auto* half = static_cast<std::byte*>(d) + n * sizeof(double);
  dev.copy_to_device_async(whole(d, n * sizeof(double)), whole(in.data(), n * sizeof(double)), a);
  dev.copy_to_device_async(whole(half, n * sizeof(double)), whole(in.data() + n, n * sizeof(double)), b);
  dev.copy_to_host_async(whole(out.data(), n * sizeof(double)), whole(d, n * sizeof(double)), a);
  dev.copy_to_host_async(whole(out.data() + n, n * sizeof(double)), whole(half, n * sizeof(double)), b);
  dev.synchronize(a);
  dev.synchronize(b);
  CHECK(out == in);
  // A strided host region (every other row of 8 doubles) packed on the device and back.
  const std::size_t rows = 64, width = 8 * sizeof(double);
  std::vector<double> grid(rows * 16), back(rows * 16, 0.0);
  std::iota(grid.begin(), grid.end(), 1.0);
  const oa::region host_rows{reinterpret_cast<std::byte*>(grid.data()), width, rows, 2 * width};
  const oa::region back_rows{reinterpret_cast<std::byte*>(back.data()), width, rows, 2 * width};
  dev.copy_to_device_async(host_rows.packed_at(d), host_rows, a);
  dev.copy_to_host_async(back_rows, host_rows.packed_at(d), a);
  dev.synchronize(a);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < 16; ++c) CHECK(back[r * 16 + c] == (c < 8 ? grid[r * 16 + c] : 0.0));
  dev.deallocate(d, 2 * n * sizeof(double));
  dev.destroy_stream(a);
  dev.destroy_stream(b);
}

/// An entry is given a view of the stream it was launched on.
template <class Enqueue>
void entries_see_their_stream(oa::device& dev) {
  const auto a = dev.create_stream(), b = dev.create_stream();
  std::mutex m;
  std::vector<oa::stream_view> seen;
  for (auto s : {a, b, a}) {
    oa::launch k{"where", [&](const oa::stream_view& v) {
                   std::lock_guard lock(m);
                   seen.push_back(v);
                 }, {}};
    dev.launch_async(std::move(k), s);
  }
  dev.synchronize(a);
  dev.synchronize(b);
  REQUIRE(seen.size() == 3);
  int on_a = 0;
  for (const auto& v : seen) {
    CHECK(v.dev == &dev);
    CHECK((v.id == a || v.id == b));
    on_a += v.id == a;
  }
  CHECK(on_a == 2);
  dev.destroy_stream(a);
  dev.destroy_stream(b);
}

/// An owning stream waits for its work before it goes.
template <class Enqueue>
void owning_stream_waits(oa::device& dev) {
  std::atomic<int> done{0};
  {
    oa::stream s(dev);
    for (int i = 0; i < 5; ++i)
      dev.launch_async(host_work<Enqueue>("slow", [&] {
                         std::this_thread::sleep_for(5ms);
                         ++done;
                       }),
                       s.id());
  }
  CHECK(done == 5);
}

/// Records and now() are on the process clock, whichever device: a host
/// stage and a GPU stage land on one timeline in a trace.
template <class Enqueue>
void records_on_process_clock(oa::device& dev) {
  (void)oa::process_epoch();
  std::this_thread::sleep_for(10ms);  // the clock has run a while: a device's own epoch would differ
  const auto s = dev.create_stream();
  dev.set_recording(true);
  (void)dev.take_records();
  const double before = oa::process_seconds(std::chrono::steady_clock::now());
  dev.launch_async(host_work<Enqueue>("nap", [] { std::this_thread::sleep_for(5ms); }), s);
  dev.synchronize(s);
  const double after = oa::process_seconds(std::chrono::steady_clock::now());
  CHECK(std::abs(dev.now() - after) < 0.005);
  const auto rs = dev.take_records();
  dev.set_recording(false);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].begin >= before - 0.001);
  CHECK(rs[0].end <= after + 0.001);
  CHECK(rs[0].end - rs[0].begin >= 0.004);
  dev.destroy_stream(s);
}

/// Allocations are counted in blocks of allocation_granularity(), as the
/// device holds them: the budget and the plans see what it does.
template <class Enqueue>
void allocations_counted_in_blocks(oa::device& dev) {
  const std::size_t g = std::max<std::size_t>(dev.allocation_granularity(), 1);
  const std::size_t before = dev.bytes_in_use();
  void* p = dev.allocate(1);
  CHECK(dev.bytes_in_use() - before == g);
  void* q = dev.allocate(g + 1);
  CHECK(dev.bytes_in_use() - before == 3 * g);  // g + 1 bytes take two blocks
  dev.deallocate(q, g + 1);
  dev.deallocate(p, 1);
  CHECK(dev.bytes_in_use() == before);
}

/// Every body, for one device.
template <class Enqueue>
void all(oa::device& dev) {
  allocations_counted_in_blocks<Enqueue>(dev);
  entries_in_order<Enqueue>(dev);
  events_order_streams<Enqueue>(dev);
  copies_round_trip<Enqueue>(dev);
  entries_see_their_stream<Enqueue>(dev);
  owning_stream_waits<Enqueue>(dev);
  records_on_process_clock<Enqueue>(dev);
}

}  // namespace oa_conformance
