// What the planner's time model assumes of a GPU: its link measured once
// (pinned copies each way alone and both at once, and a copy within device
// memory for the kernels' rate), the staging threads' memcpy rate, and its
// product rate estimated from the multiprocessors' clock. Planning
// estimates, never reported as measurements; snapped to a ladder so that
// plans do not follow a measurement's noise; any error leaves a rate
// unknown (0).

#include "cuda/cuda_rates.hpp"

#include "core/staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>

namespace oa::cuda::detail {

namespace {

constexpr std::size_t probe_bytes = std::size_t{64} << 20;

/// Seconds between two events, or 0 on any error.
double elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms * 1e-3 : 0.0;
}

/// Owns what one measurement allocates; frees it on every path.
struct probe {
  void* host = nullptr;
  void* dev[2] = {nullptr, nullptr};
  std::array<cudaStream_t, 2> streams{};
  std::array<cudaEvent_t, 6> events{};
  bool ok = true;

  probe() {
    ok = cudaMallocHost(&host, 2 * probe_bytes) == cudaSuccess && cudaMalloc(&dev[0], probe_bytes) == cudaSuccess &&
         cudaMalloc(&dev[1], probe_bytes) == cudaSuccess;
    for (auto& s : streams) ok = ok && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
    for (auto& e : events) ok = ok && cudaEventCreate(&e) == cudaSuccess;
  }
  ~probe() {
    for (auto s : streams)
      if (s) cudaStreamSynchronize(s);
    for (auto e : events)
      if (e) cudaEventDestroy(e);
    for (auto s : streams)
      if (s) cudaStreamDestroy(s);
    for (void* d : dev)
      if (d) cudaFree(d);
    if (host) cudaFreeHost(host);
    (void)cudaGetLastError();
  }
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;

  std::byte* pinned(int i) const { return static_cast<std::byte*>(host) + static_cast<std::size_t>(i) * probe_bytes; }

  /// Bytes per second of `copy` on stream 0, best of three (the first warms up).
  template <class Copy>
  double rate(std::size_t bytes, Copy copy) {
    double best = 0;
    for (int i = 0; i < 3 && ok; ++i) {
      ok = cudaEventRecord(events[0], streams[0]) == cudaSuccess && copy() &&
           cudaEventRecord(events[1], streams[0]) == cudaSuccess && cudaEventSynchronize(events[1]) == cudaSuccess;
      const double s = ok ? elapsed(events[0], events[1]) : 0;
      if (s > 0) best = std::max(best, static_cast<double>(bytes) / s);
    }
    return ok ? best : 0;
  }

  /// Bytes per second of both directions at once, on two streams, together;
  /// best of three (the first warms up).
  double both_ways() {
    double best = 0;
    for (int i = 0; i < 3 && ok; ++i) best = std::max(best, both_ways_once());
    return ok ? best : 0;
  }

  double both_ways_once() {
    ok = ok && cudaEventRecord(events[2], streams[0]) == cudaSuccess &&
         cudaStreamWaitEvent(streams[1], events[2]) == cudaSuccess &&
         cudaMemcpyAsync(dev[0], pinned(0), probe_bytes, cudaMemcpyHostToDevice, streams[0]) == cudaSuccess &&
         cudaMemcpyAsync(pinned(1), dev[1], probe_bytes, cudaMemcpyDeviceToHost, streams[1]) == cudaSuccess &&
         cudaEventRecord(events[3], streams[0]) == cudaSuccess && cudaEventRecord(events[4], streams[1]) == cudaSuccess &&
         cudaEventSynchronize(events[3]) == cudaSuccess && cudaEventSynchronize(events[4]) == cudaSuccess;
    if (!ok) return 0;
    const double s = std::max(elapsed(events[2], events[3]), elapsed(events[2], events[4]));
    return s > 0 ? 2.0 * static_cast<double>(probe_bytes) / s : 0;
  }
};

/// Flops per clock per multiprocessor of the in-core product, by
/// architecture: {float, double}. Zero where not known.
std::array<double, 2> flops_per_clock(int major, int minor) {
  // Datacenter parts only: consumer ones (8.6, 8.9, 12.x) have FP64 at a
  // small, varying fraction of FP32.
  if (major == 10 && minor == 0) return {256, 128};  // B200
  if (major == 9 && minor == 0) return {256, 256};   // H100, H200: FP64 tensor cores
  if (major == 8 && minor == 0) return {128, 128};   // A100
  if (major == 7 && minor == 0) return {128, 64};    // V100
  return {0, 0};
}

}  // namespace

device_rates measure_rates(int ordinal, int staging_threads) noexcept {
  device_rates r;
  if (cudaSetDevice(ordinal) != cudaSuccess) return r;
  {
    probe p;
    if (p.ok) {
      r.h2d = p.rate(probe_bytes, [&] {
        return cudaMemcpyAsync(p.dev[0], p.pinned(0), probe_bytes, cudaMemcpyHostToDevice, p.streams[0]) == cudaSuccess;
      });
      r.d2h = p.rate(probe_bytes, [&] {
        return cudaMemcpyAsync(p.pinned(1), p.dev[1], probe_bytes, cudaMemcpyDeviceToHost, p.streams[0]) == cudaSuccess;
      });
      r.both_ways = p.both_ways();
      // A copy within device memory reads and writes each byte.
      r.kernel_bytes = 2 * p.rate(probe_bytes, [&] {
        return cudaMemcpyAsync(p.dev[1], p.dev[0], probe_bytes, cudaMemcpyDeviceToDevice, p.streams[0]) == cudaSuccess;
      });
    }
  }
  r.staging = oa::detail::staging_thread_rate() * std::max(staging_threads, 1);
  r.op_latency = 10e-6;  // a launch or copy issued and handed on: typical 5-10 us
  int sms = 0, khz = 0, major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal) == cudaSuccess &&
      cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal) == cudaSuccess) {
    // cuBLAS reaches about 0.83 of the peak in core (55.8 of 67 TFLOP/s
    // double on the H100 run in bench/results/2026-11-23-h100).
    const auto per_clock = flops_per_clock(major, minor);
    for (int i = 0; i < 2; ++i) r.gemm_flops[i] = 0.83 * per_clock[static_cast<std::size_t>(i)] * sms * khz * 1e3;
  }
  (void)cudaGetLastError();
  return r.snapped();
}

}  // namespace oa::cuda::detail
