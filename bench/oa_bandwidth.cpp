// oa-bandwidth: the copy and memory bandwidths of GPU 0, the ceilings that
// oa-bench's paging results are read against. Host <-> device over pinned
// and pageable memory, both directions at once, and device-to-device copies
// (the device memory bandwidth), each timed with CUDA events.

#include <cuda_runtime.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <oa/core/config.hpp>
#include <oa/core/error.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "bench_table.hpp"

namespace {

/// Throws std::runtime_error naming the place, the call and CUDA's error.
void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                           cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

#define OA_CUDA_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)

// Owners of CUDA resources, so that a failed check releases what was made.
// Errors on release are ignored: the check that threw already reported one.
struct device_buffer {
  void* p = nullptr;
  explicit device_buffer(std::size_t bytes) {
    OA_CUDA_CHECK(cudaMalloc(&p, bytes));
    OA_CUDA_CHECK(cudaMemset(p, 0, bytes));  // maps the pages before any timing
  }
  ~device_buffer() { (void)cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

struct pinned_buffer {
  void* p = nullptr;
  explicit pinned_buffer(std::size_t bytes) {
    OA_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    std::memset(p, 0, bytes);
  }
  ~pinned_buffer() { (void)cudaFreeHost(p); }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
};

struct pageable_buffer {
  void* p = nullptr;
  explicit pageable_buffer(std::size_t bytes) : p(std::malloc(bytes)) {
    if (!p) throw std::runtime_error("malloc of " + std::to_string(bytes) + " bytes failed");
    std::memset(p, 0, bytes);  // first touch here, not inside a timed copy
  }
  ~pageable_buffer() { std::free(p); }
  pageable_buffer(const pageable_buffer&) = delete;
  pageable_buffer& operator=(const pageable_buffer&) = delete;
};

struct stream {
  cudaStream_t s = nullptr;
  stream() { OA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream() { (void)cudaStreamDestroy(s); }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
};

struct event {
  cudaEvent_t e = nullptr;
  event() { OA_CUDA_CHECK(cudaEventCreate(&e)); }
  ~event() { (void)cudaEventDestroy(e); }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
};

struct figure {
  std::string key;    // JSON name
  std::string label;  // table label
  double best_gbps = 0;
  double median_gbps = 0;
  std::vector<double> samples_gbps;
};

/// Times `repeat` runs of `enqueue` between two events on `s`, after one
/// untimed warm-up run; `bytes_moved` per run makes each a GB/s sample.
figure measure(const std::string& key, const std::string& label, cudaStream_t s, int repeat, double bytes_moved,
               const std::function<void()>& enqueue) {
  event start, stop;
  enqueue();
  OA_CUDA_CHECK(cudaStreamSynchronize(s));
  figure f{key, label, 0, 0, {}};
  for (int i = 0; i < repeat; ++i) {
    OA_CUDA_CHECK(cudaEventRecord(start.e, s));
    enqueue();
    OA_CUDA_CHECK(cudaEventRecord(stop.e, s));
    OA_CUDA_CHECK(cudaEventSynchronize(stop.e));
    float ms = 0;
    OA_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
    f.samples_gbps.push_back(bytes_moved / (static_cast<double>(ms) * 1e-3) / 1e9);
  }
  std::vector<double> sorted = f.samples_gbps;
  std::sort(sorted.begin(), sorted.end());
  f.best_gbps = sorted.back();
  const std::size_t n = sorted.size();
  f.median_gbps = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return f;
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::vector<figure> run_all(std::size_t bytes, int repeat) {
  const double b = static_cast<double>(bytes);
  device_buffer d_a(bytes), d_b(bytes);
  pinned_buffer h_a(bytes), h_b(bytes);
  pageable_buffer pageable(bytes);
  stream s1, s2;
  std::vector<figure> figures;

  // One direction at a time, from pinned and from pageable host memory.
  struct one_way {
    const char* key;
    const char* title;
    void* dst;
    const void* src;
    cudaMemcpyKind kind;
  };
  for (const one_way& c : {one_way{"h2d_pinned", "host to device, pinned", d_a.p, h_a.p, cudaMemcpyHostToDevice},
                           one_way{"d2h_pinned", "device to host, pinned", h_a.p, d_a.p, cudaMemcpyDeviceToHost},
                           one_way{"h2d_pageable", "host to device, pageable", d_a.p, pageable.p, cudaMemcpyHostToDevice},
                           one_way{"d2h_pageable", "device to host, pageable", pageable.p, d_a.p, cudaMemcpyDeviceToHost}}) {
    std::cerr << "oa-bandwidth: " << c.title << std::endl;
    figures.push_back(measure(c.key, c.title, s1.s, repeat, b,
                              [&] { OA_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, bytes, c.kind, s1.s)); }));
  }

  // Both directions on their own streams, fenced by events on s1 so that the
  // timed interval spans both: s2 starts after s1's start, s1 ends after s2.
  std::cerr << "oa-bandwidth: both directions at once, pinned" << std::endl;
  event fork, join;
  figures.push_back(measure("bidirectional_pinned", "both directions at once, pinned (sum)", s1.s, repeat, 2 * b, [&] {
    OA_CUDA_CHECK(cudaEventRecord(fork.e, s1.s));
    OA_CUDA_CHECK(cudaStreamWaitEvent(s2.s, fork.e, 0));
    OA_CUDA_CHECK(cudaMemcpyAsync(d_a.p, h_a.p, bytes, cudaMemcpyHostToDevice, s1.s));
    OA_CUDA_CHECK(cudaMemcpyAsync(h_b.p, d_b.p, bytes, cudaMemcpyDeviceToHost, s2.s));
    OA_CUDA_CHECK(cudaEventRecord(join.e, s2.s));
    OA_CUDA_CHECK(cudaStreamWaitEvent(s1.s, join.e, 0));
  }));

  // A device-to-device copy reads and writes every byte: 2 * bytes of traffic.
  std::cerr << "oa-bandwidth: device to device" << std::endl;
  figures.push_back(measure("d2d", "device to device (read + write)", s1.s, repeat, 2 * b, [&] {
    OA_CUDA_CHECK(cudaMemcpyAsync(d_b.p, d_a.p, bytes, cudaMemcpyDeviceToDevice, s1.s));
  }));
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bytes_text = "1GiB";
  int repeat = 10;
  std::string json_path;
  CLI::App app{"oa-bandwidth: copy and memory bandwidth of GPU 0 (cudaEvent timing; GB/s = 1e9 bytes/s).",
               "oa-bandwidth"};
  app.add_option("--bytes", bytes_text, "bytes per copy, suffixes allowed (1GiB, 512MiB, 2GB)")->capture_default_str();
  app.add_option("--repeat", repeat, "timed copies per figure; best and median are reported")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--json", json_path, "append one JSON object with every figure to FILE (JSON Lines)");
  app.footer(
      "Figures: host to device and device to host over pinned (cudaHostAlloc) and pageable (malloc) host\n"
      "memory, both directions at once on two streams (GB/s of the two together), and device to device\n"
      "(2 x bytes per copy: read and written). Exit status: 0 ok, 1 a CUDA or file error, 2 no usable GPU.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return oa_bench::usage_exit(app, e);
  }

  std::size_t bytes = 0;
  try {
    bytes = oa::parse_bytes(bytes_text, "--bytes");
  } catch (const oa::config_error& e) {
    return oa_bench::usage_exit(app, CLI::ValidationError(e.what()));  // parse_bytes names the option already
  }
  if (bytes == 0) return oa_bench::usage_exit(app, CLI::ValidationError("--bytes", "must be at least 1 byte"));
  // Each figure holds `bytes` of host memory (pinned or pageable) at once.
  if (bytes > oa_bench::physical_memory_bytes())
    return oa_bench::usage_exit(app, CLI::ValidationError("--bytes", std::to_string(bytes) + " bytes is more than this machine's memory (" +
                                                        std::to_string(oa_bench::physical_memory_bytes()) + " bytes)"));

  // No GPU is an expected answer here, not a failure of the tool: exit 2.
  int count = 0;
  const cudaError_t count_status = cudaGetDeviceCount(&count);
  if (count_status != cudaSuccess || count == 0) {
    const cudaError_t why = count_status != cudaSuccess ? count_status : cudaErrorNoDevice;
    std::cerr << "oa-bandwidth: no usable GPU (" << cudaGetErrorName(why) << ": " << cudaGetErrorString(why) << ")\n";
    return 2;
  }

  try {
    std::ofstream json_out;
    if (!json_path.empty()) {
      json_out.open(json_path, std::ios::app);
      if (!json_out) throw std::runtime_error("--json: cannot open '" + json_path + "' for appending");
    }

    OA_CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp prop{};
    OA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    OA_CUDA_CHECK(cudaDriverGetVersion(&driver));
    OA_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));

    const std::vector<figure> figures = run_all(bytes, repeat);

    char header[512];
    std::snprintf(header, sizeof header, "\n%s (GPU 0 of %d), driver %s, runtime %s: %zu bytes per copy, %d repeats\n",
                  prop.name, count, version_text(driver).c_str(), version_text(runtime).c_str(), bytes, repeat);
    std::cout << header;
    std::size_t width = 4;
    for (const auto& f : figures) width = std::max(width, f.label.size());
    std::printf("%-*s  %10s  %12s\n", static_cast<int>(width), "copy", "best GB/s", "median GB/s");
    std::printf("%s\n", std::string(width + 26, '-').c_str());
    for (const auto& f : figures)
      std::printf("%-*s  %10.2f  %12.2f\n", static_cast<int>(width), f.label.c_str(), f.best_gbps, f.median_gbps);
    std::fflush(stdout);

    if (json_out.is_open()) {
      nlohmann::json results = nlohmann::json::object();
      for (const auto& f : figures)
        results[f.key] = {{"best_gbps", f.best_gbps}, {"median_gbps", f.median_gbps}, {"samples_gbps", f.samples_gbps}};
      const nlohmann::json record = {
          {"tool", "oa-bandwidth"},
          {"device", prop.name},
          {"device_index", 0},
          {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"total_global_mem", prop.totalGlobalMem},
          {"driver_version", version_text(driver)},
          {"runtime_version", version_text(runtime)},
          {"bytes", bytes},
          {"repeat", repeat},
          {"results", results},
          {"hostname", hostname()},
          {"timestamp", oa_bench::utc_timestamp()}};
      json_out << record.dump() << '\n' << std::flush;
      if (!json_out) throw std::runtime_error("--json: cannot write '" + json_path + "'");
    }
    return 0;
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << "oa-bandwidth: " << e.what() << '\n';
    return 1;
  }
}
