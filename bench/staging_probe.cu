// staging_probe: one command that measures, on a GPU node, every parameter a
// simulator of host staging needs: the machine, host memcpy rates (touched
// and first-touch destinations), pinning costs, pinned and pageable DMA
// rates and latencies, whether host functions run concurrently, stream
// memory operations and their latency, a prototype of staging through a ring
// of pinned slots filled and drained by host threads, and cuBLAS GEMM rates
// alone and beside a DMA loop. It needs no oa header and no CMake:
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/staging_probe.cu -o staging_probe -ldl
//
// cudart is linked statically (nvcc's default); libcuda's stream memory
// operations come from cudaGetDriverEntryPointByVersion and cuBLAS from
// dlopen, so the binary starts on a machine without a driver, where it
// writes the machine section with "gpu": null and exits 3.
//
//   staging_probe [--json FILE] [--quick] [--max-seconds S] [--only LIST] [--staging-gib N]
//
// Every measurement records the best and the median of its repetitions, with
// the unit in the key (gbps: 1e9 bytes per second). A measurement that fails
// is recorded as {"error": ...} and the probe goes on; one the time left
// cannot hold is recorded as {"skipped": ...}. The JSON file is rewritten
// after each measurement, so a probe stopped from outside keeps what it had.
// Exit status: 0 every measurement ran, 1 one or more failed, 2 bad usage,
// 3 no GPU.

#include <cublas_v2.h>  // types only: the library is opened with dlopen
#include <cuda.h>       // driver types only: entry points come through cudart
#include <cuda_runtime.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

constexpr std::size_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;

// ---------------------------------------------------------------- JSON ----

/// A JSON value built in insertion order. Members live in lists, so a
/// reference to one stays valid while others are added.
class json {
 public:
  json() = default;
  json(std::nullptr_t) {}
  json(bool b) : kind_(kind::boolean), bool_(b) {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, int> = 0>
  json(T v) : kind_(kind::number), number_(static_cast<double>(v)) {}
  json(std::string s) : kind_(kind::string), string_(std::move(s)) {}
  json(const char* s) : json(std::string(s)) {}

  static json array() {
    json j;
    j.kind_ = kind::array;
    return j;
  }

  /// The member `key`, added (null) when new; a null value becomes an object.
  json& operator[](const std::string& key) {
    if (kind_ == kind::null) kind_ = kind::object;
    if (kind_ != kind::object) throw std::logic_error("json::operator[]: \"" + key + "\" of a non-object");
    auto item = items_.begin();
    for (const auto& k : keys_) {
      if (k == key) return *item;
      ++item;
    }
    keys_.push_back(key);
    return items_.emplace_back();
  }

  void push_back(json v) {
    if (kind_ == kind::null) kind_ = kind::array;
    if (kind_ != kind::array) throw std::logic_error("json::push_back: not an array");
    items_.push_back(std::move(v));
  }

  bool is_number() const { return kind_ == kind::number; }
  bool is_string() const { return kind_ == kind::string; }
  bool is_bool() const { return kind_ == kind::boolean; }
  bool is_object() const { return kind_ == kind::object; }
  double number() const { return number_; }
  bool boolean() const { return bool_; }
  const std::string& string() const { return string_; }

  /// Calls f(key, value) for each member of an object, in order.
  template <class F>
  void each_member(F f) const {
    auto item = items_.begin();
    for (const auto& k : keys_) f(k, *item++);
  }

  std::string dump() const {
    std::string out;
    write(out, 0);
    out += '\n';
    return out;
  }

 private:
  enum class kind { null, boolean, number, string, array, object };

  static void write_string(std::string& out, const std::string& s) {
    out += '"';
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }

  static void write_number(std::string& out, double v) {
    char buf[32];
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
      std::snprintf(buf, sizeof buf, "%.0f", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.6g", v);
    }
    out += buf;
  }

  void write(std::string& out, int depth) const {
    switch (kind_) {
      case kind::null:
        out += "null";
        return;
      case kind::boolean:
        out += bool_ ? "true" : "false";
        return;
      case kind::number:
        write_number(out, number_);
        return;
      case kind::string:
        write_string(out, string_);
        return;
      case kind::array:
      case kind::object:
        break;
    }
    const bool object = kind_ == kind::object;
    if (items_.empty()) {
      out += object ? "{}" : "[]";
      return;
    }
    out += object ? '{' : '[';
    auto key = keys_.begin();
    bool first = true;
    for (const auto& item : items_) {
      out += first ? "\n" : ",\n";
      first = false;
      out.append(2 * (depth + 1), ' ');
      if (object) {
        write_string(out, *key++);
        out += ": ";
      }
      item.write(out, depth + 1);
    }
    out += '\n';
    out.append(2 * depth, ' ');
    out += object ? '}' : ']';
  }

  kind kind_ = kind::null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::list<std::string> keys_;
  std::list<json> items_;
};

// --------------------------------------------------- clock and statistics ----

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("pause" ::: "memory");
#endif
}

/// {"best_<unit>", "median_<unit>", "repetitions"} of the samples; best is the
/// largest when higher_is_better (rates), else the smallest (times).
json summary(std::vector<double> v, const std::string& unit, bool higher_is_better) {
  json j;
  if (v.empty()) {
    j["repetitions"] = 0;
    return j;
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  j["best_" + unit] = higher_is_better ? v.back() : v.front();
  j["median_" + unit] = median;
  j["repetitions"] = static_cast<double>(n);
  return j;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// -------------------------------------------------------------- errors ----

void check(cudaError_t status, const char* call, int line) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string(call) + " (staging_probe.cu:" + std::to_string(line) +
                           "): " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}
#define CHECK(call) check((call), #call, __LINE__)

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// ------------------------------------------------------ CUDA resources ----

struct pinned_buffer {
  char* p = nullptr;
  std::size_t bytes = 0;
  explicit pinned_buffer(std::size_t n, unsigned flags = cudaHostAllocDefault) : bytes(n) {
    void* q = nullptr;
    CHECK(cudaHostAlloc(&q, n, flags));
    p = static_cast<char*>(q);
  }
  ~pinned_buffer() { (void)cudaFreeHost(p); }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
};

struct device_buffer {
  char* p = nullptr;
  std::size_t bytes = 0;
  explicit device_buffer(std::size_t n) : bytes(n) {
    void* q = nullptr;
    CHECK(cudaMalloc(&q, n));
    p = static_cast<char*>(q);
  }
  ~device_buffer() { (void)cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

void sync_stream(cudaStream_t s, double timeout_s);

/// A stream that is drained (for at most 10 s: it may be parked on a flag no
/// one sets) before it goes, so that no copy or host function outlives the
/// memory it uses.
struct stream_handle {
  cudaStream_t s = nullptr;
  stream_handle() { CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream_handle() {
    try {
      sync_stream(s, 10);
    } catch (const std::exception&) {  // already reported by the measurement that failed
    }
    (void)cudaStreamDestroy(s);
  }
  stream_handle(const stream_handle&) = delete;
  stream_handle& operator=(const stream_handle&) = delete;
};

struct event_handle {
  cudaEvent_t e = nullptr;
  explicit event_handle(unsigned flags = cudaEventDefault) { CHECK(cudaEventCreateWithFlags(&e, flags)); }
  ~event_handle() { (void)cudaEventDestroy(e); }
  event_handle(const event_handle&) = delete;
  event_handle& operator=(const event_handle&) = delete;
};

/// Waits for a stream by polling, so that a stream stuck on a memory wait
/// that no one releases ends in an error instead of a hang.
void sync_stream(cudaStream_t s, double timeout_s) {
  const double give_up = now_s() + timeout_s;
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, "cudaStreamQuery", __LINE__);
    if (now_s() > give_up)
      throw std::runtime_error("stream not done after " + std::to_string(timeout_s) + " s");
    std::this_thread::yield();
  }
}

// ------------------------------------------------------------ kernels ----

/// The data every staging run moves: word i of a buffer holds pattern(i),
/// so a sample of the destination shows whether a DMA ran before its fill.
__host__ __device__ inline std::uint64_t pattern(std::uint64_t i) {
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_words(std::uint64_t* p, std::size_t n, std::uint64_t first_word) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = pattern(first_word + i);
}

/// Values in [-1, 1): GEMM inputs that neither overflow nor are all zero
/// (zeros would flatter the clocks).
template <class T>
__global__ void fill_matrix(T* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<T>(static_cast<double>(pattern(i) >> 11) * 0x1p-52 - 1.0);
}

__global__ void tiny_kernel(int* p) { *p += 1; }

void launch_check(const char* what) { check(cudaGetLastError(), what, __LINE__); }

// -------------------------------------------------------- host memory ----

enum class pages { system, small, huge };  // the THP default, MADV_NOHUGEPAGE, MADV_HUGEPAGE

/// An anonymous private mapping aligned to 2 MiB (so that huge pages can
/// back it), never touched here: its first touch is the caller's.
class mapping {
 public:
  mapping(std::size_t bytes, pages mode) : bytes_(bytes) {
    const std::size_t align = 2 * MiB, span = bytes + align;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
      throw std::runtime_error(errno_text("mmap") + " (" + std::to_string(bytes) + " bytes)");
    auto base = reinterpret_cast<std::uintptr_t>(raw);
    auto start = (base + align - 1) & ~(std::uintptr_t(align) - 1);
    if (start > base) munmap(raw, start - base);
    const std::size_t tail = base + span - (start + bytes);
    if (tail) munmap(reinterpret_cast<void*>(start + bytes), tail);
    p_ = reinterpret_cast<char*>(start);
    if (mode != pages::system &&
        madvise(p_, bytes_, mode == pages::huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) {
      const std::string why =
          errno_text(mode == pages::huge ? "madvise(MADV_HUGEPAGE)" : "madvise(MADV_NOHUGEPAGE)");
      munmap(p_, bytes_);
      throw std::runtime_error(why);
    }
  }
  ~mapping() {
    if (p_) munmap(p_, bytes_);
  }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  char* data() const { return p_; }
  std::size_t size() const { return bytes_; }

 private:
  char* p_ = nullptr;
  std::size_t bytes_ = 0;
};

int hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

/// Runs the tasks on threads of their own, released together; returns the
/// seconds from the release until every task, then `finish`, is done (thread
/// creation is not counted). The first task to throw calls on_error (which
/// unblocks the others), and its exception is rethrown after `finish`.
double run_together(const std::vector<std::function<void()>>& tasks,
                    const std::function<void()>& on_error = {}, const std::function<void()>& finish = {}) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::mutex error_mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  threads.reserve(tasks.size());
  auto body = [&](const std::function<void()>& task) {
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    try {
      task();
    } catch (...) {
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception(), first = true;
      }
      if (first && on_error) on_error();
    }
  };
  try {
    for (const auto& task : tasks) threads.emplace_back(body, std::cref(task));
  } catch (...) {  // no thread for one task: release and join those started, then report
    go.store(true);
    for (auto& t : threads) t.join();
    throw;
  }
  while (ready.load() < static_cast<int>(tasks.size())) std::this_thread::yield();
  const double t0 = now_s();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  if (first_error) {
    try {
      if (finish) finish();
    } catch (...) {  // the task's error is the one to report
    }
    std::rethrow_exception(first_error);
  }
  if (finish) finish();
  return now_s() - t0;
}

struct byte_range {
  std::size_t b, e;  // [b, e)
};

/// Slice i of `parts` of [0, bytes), on 4 KiB boundaries.
byte_range slice(std::size_t bytes, int parts, int i) {
  auto edge = [&](int k) { return k == parts ? bytes : (bytes / parts * k) & ~(4 * KiB - 1); };
  return {edge(i), edge(i + 1)};
}

/// Seconds for `threads` threads to copy a slice each.
double parallel_copy(char* dst, const char* src, std::size_t bytes, int threads) {
  std::vector<std::function<void()>> tasks;
  for (int t = 0; t < threads; ++t) {
    const byte_range r = slice(bytes, threads, t);
    tasks.push_back([=] { std::memcpy(dst + r.b, src + r.b, r.e - r.b); });
  }
  return run_together(tasks);
}

/// Touches every page, with every core (setup, not measured).
void parallel_touch(char* p, std::size_t bytes) {
  std::vector<std::function<void()>> tasks;
  const int threads = hardware_threads();
  for (int t = 0; t < threads; ++t) {
    const byte_range r = slice(bytes, threads, t);
    tasks.push_back([=] { std::memset(p + r.b, 0, r.e - r.b); });
  }
  run_together(tasks);
}

/// Writes pattern(first_word + i) into word i, with every core.
void parallel_pattern(char* p, std::size_t bytes, std::uint64_t first_word) {
  std::vector<std::function<void()>> tasks;
  const int threads = hardware_threads();
  for (int t = 0; t < threads; ++t) {
    const byte_range r = slice(bytes, threads, t);
    tasks.push_back([=] {
      auto* w = reinterpret_cast<std::uint64_t*>(p + r.b);
      for (std::size_t i = 0, n = (r.e - r.b) / 8; i < n; ++i) w[i] = pattern(first_word + r.b / 8 + i);
    });
  }
  run_together(tasks);
}

// ---------------------------------------------------------- /proc, /sys ----

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

/// The first line of a file, trimmed; null when the file cannot be read.
json file_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return nullptr;
  return trim(line);
}

/// A "Key:   123 kB" line of a meminfo-style file, in bytes; -1 if absent.
double meminfo_bytes(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = trim(line.substr(0, colon));
    auto node_prefix = k.rfind(' ');  // per-node meminfo: "Node 0 MemTotal"
    if (node_prefix != std::string::npos) k = k.substr(node_prefix + 1);
    if (k != key) continue;
    std::istringstream value(line.substr(colon + 1));
    double n = 0;
    std::string unit;
    value >> n >> unit;
    return unit == "kB" ? n * 1024 : n;
  }
  return -1;
}

/// Bytes of this process's anonymous memory on transparent huge pages; -1 unknown.
double anon_huge_bytes() { return meminfo_bytes(read_text("/proc/self/smaps_rollup"), "AnonHugePages"); }

/// The selected value of a sysfs choice file ("always [madvise] never").
json sysfs_choice(const std::string& path) {
  json line = file_line(path);
  if (!line.is_string()) return nullptr;
  const std::string& s = line.string();
  auto b = s.find('['), e = s.find(']');
  return b != std::string::npos && e != std::string::npos && e > b ? json(s.substr(b + 1, e - b - 1)) : line;
}

json cpu_info() {
  std::istringstream in(read_text("/proc/cpuinfo"));
  std::string line, model, physical;
  std::set<std::string> sockets, cores;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name" && model.empty()) model = value;
    if (key == "physical id") physical = value, sockets.insert(value);
    if (key == "core id") cores.insert(physical + "/" + value);
  }
  json j;
  j["model"] = model.empty() ? json(nullptr) : json(model);
  j["logical_cpus_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) j["logical_cpus_usable"] = CPU_COUNT(&set);
  j["sockets"] = sockets.empty() ? json(nullptr) : json(sockets.size());
  j["physical_cores"] = cores.empty() ? json(nullptr) : json(cores.size());
  return j;
}

json numa_nodes() {
  json nodes = json::array();
  std::vector<int> ids;
  if (DIR* d = opendir("/sys/devices/system/node")) {
    while (dirent* e = readdir(d)) {
      int id = -1;
      char tail = 0;
      if (std::sscanf(e->d_name, "node%d%c", &id, &tail) == 1 && id >= 0) ids.push_back(id);
    }
    closedir(d);
  }
  std::sort(ids.begin(), ids.end());
  for (int id : ids) {
    const std::string dir = "/sys/devices/system/node/node" + std::to_string(id);
    json n;
    n["node"] = id;
    n["cpus"] = file_line(dir + "/cpulist");
    n["memory_total_bytes"] = meminfo_bytes(read_text(dir + "/meminfo"), "MemTotal");
    nodes.push_back(std::move(n));
  }
  return nodes;
}

std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

json machine_info() {
  json m;
  utsname u{};
  if (uname(&u) == 0) {
    m["kernel"] = std::string(u.sysname) + " " + u.release;
    m["arch"] = u.machine;
  }
  m["cpu"] = cpu_info();
  m["numa_nodes"] = numa_nodes();
  m["page_size_bytes"] = sysconf(_SC_PAGESIZE);
  const std::string meminfo = read_text("/proc/meminfo");
  m["memory_total_bytes"] = meminfo_bytes(meminfo, "MemTotal");
  m["memory_available_bytes"] = meminfo_bytes(meminfo, "MemAvailable");
  m["hugetlb_page_bytes"] = meminfo_bytes(meminfo, "Hugepagesize");
  m["hugetlb_pages_total"] = meminfo_bytes(meminfo, "HugePages_Total");
  json& thp = m["transparent_hugepage"];
  thp["enabled"] = sysfs_choice("/sys/kernel/mm/transparent_hugepage/enabled");
  thp["defrag"] = sysfs_choice("/sys/kernel/mm/transparent_hugepage/defrag");
  const json pmd = file_line("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  thp["pmd_size_bytes"] = pmd.is_string() ? json(std::atof(pmd.string().c_str())) : pmd;
  json cgroup = file_line("/sys/fs/cgroup/memory.max");
  m["cgroup_memory_limit"] =
      cgroup.is_string() ? cgroup : file_line("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  rlimit lock{};
  if (getrlimit(RLIMIT_MEMLOCK, &lock) == 0)
    m["memlock_limit_bytes"] = lock.rlim_cur == RLIM_INFINITY ? json("unlimited") : json(lock.rlim_cur);
  m["nvidia_driver"] = file_line("/proc/driver/nvidia/version");
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess)
    m["cuda_driver_version"] = driver ? json(cuda_version_text(driver)) : json("none (no driver)");
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) m["cuda_runtime_version"] = cuda_version_text(runtime);
  m["probe_compiler"] = std::string("nvcc ") + std::to_string(__CUDACC_VER_MAJOR__) + "." +
                        std::to_string(__CUDACC_VER_MINOR__) + ", host " + __VERSION__;
  return m;
}

// ----------------------------------------------------------- the GPU ----

int device_attribute(cudaDeviceAttr a, int dev) {
  int v = -1;
  return cudaDeviceGetAttribute(&v, a, dev) == cudaSuccess ? v : -1;
}

/// The PCIe link of a device from sysfs (NVML is not linked): speed, the
/// generation it implies, and width, now and at most.
json pcie_link(const std::string& bus_id) {
  const std::string dir = "/sys/bus/pci/devices/" + bus_id;
  json j;
  if (!file_line(dir + "/vendor").is_string()) {
    j["error"] = "no " + dir + " (sysfs not visible here)";
    return j;
  }
  auto generation = [](const json& speed) -> json {
    if (!speed.is_string()) return nullptr;
    const double gt = std::atof(speed.string().c_str());
    const double steps[] = {2.5, 5, 8, 16, 32, 64};
    for (int g = 0; g < 6; ++g)
      if (std::fabs(gt - steps[g]) < 0.1) return g + 1;
    return nullptr;
  };
  j["current_speed"] = file_line(dir + "/current_link_speed");
  j["current_generation"] = generation(j["current_speed"]);
  j["current_width"] = file_line(dir + "/current_link_width");
  j["max_speed"] = file_line(dir + "/max_link_speed");
  j["max_generation"] = generation(j["max_speed"]);
  j["max_width"] = file_line(dir + "/max_link_width");
  return j;
}

std::string pci_bus_id(int dev) {
  char bus[32] = {};
  CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
  std::string s = bus;
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

json gpu_info(int dev) {
  cudaDeviceProp p{};
  CHECK(cudaGetDeviceProperties(&p, dev));
  json g;
  g["name"] = p.name;
  g["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  g["multiprocessors"] = p.multiProcessorCount;
  g["memory_bytes"] = p.totalGlobalMem;
  std::size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) g["memory_free_bytes"] = free_bytes;
  g["clock_khz"] = device_attribute(cudaDevAttrClockRate, dev);
  g["memory_clock_khz"] = device_attribute(cudaDevAttrMemoryClockRate, dev);
  g["memory_bus_width_bits"] = device_attribute(cudaDevAttrGlobalMemoryBusWidth, dev);
  g["async_copy_engines"] = device_attribute(cudaDevAttrAsyncEngineCount, dev);
  g["host_register_supported"] = device_attribute(cudaDevAttrHostRegisterSupported, dev);
  g["pageable_memory_access"] = device_attribute(cudaDevAttrPageableMemoryAccess, dev);
  g["host_pointer_for_registered_memory"] =
      device_attribute(cudaDevAttrCanUseHostPointerForRegisteredMem, dev);
  g["integrated"] = device_attribute(cudaDevAttrIntegrated, dev);
  g["host_numa_id"] = device_attribute(cudaDevAttrHostNumaId, dev);
  const std::string bus = pci_bus_id(dev);
  g["pci_bus_id"] = bus;
  g["numa_node"] = file_line("/sys/bus/pci/devices/" + bus + "/numa_node");
  g["pcie_link_idle"] = pcie_link(bus);
  g["nvlink"] = "not queried (needs NVML, which the probe does not link)";
  return g;
}

// --------------------------------------- stream memory operations (libcuda) ----

using value32_fn = CUresult(CUDAAPI*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using error_name_fn = CUresult(CUDAAPI*)(CUresult, const char**);

/// libcuda's cuStreamWaitValue32 / cuStreamWriteValue32, when the driver has
/// them and a trial wait on this GPU passed.
struct memops {
  value32_fn wait = nullptr;
  value32_fn write = nullptr;
  error_name_fn error_name = nullptr;
  bool usable = false;
  std::string why;  // why not usable
  json attributes;
};

/// A driver function through cudart, so that the binary does not link
/// libcuda; null (and why) when the driver lacks it.
void* driver_symbol(const char* name, std::string* why) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  if (e == cudaSuccess && found == cudaDriverEntryPointSuccess && fn) return fn;
  if (why)
    *why = std::string(name) + ": " +
           (e != cudaSuccess                                   ? std::string(cudaGetErrorName(e))
            : found == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
                                                               : "not found");
  return nullptr;
}

std::string cu_error_text(const memops& ops, CUresult r) {
  const char* name = nullptr;
  if (ops.error_name && ops.error_name(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

void check_cu(const memops& ops, CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(call) + ": " + cu_error_text(ops, r));
}

/// Pinned, mapped 32-bit flags that host threads and streams signal through.
struct flag_block {
  pinned_buffer mem;
  CUdeviceptr device = 0;
  explicit flag_block(int count) : mem(count * sizeof(std::uint32_t), cudaHostAllocMapped) {
    void* d = nullptr;
    CHECK(cudaHostGetDevicePointer(&d, mem.p, 0));
    device = reinterpret_cast<CUdeviceptr>(d);
    std::memset(mem.p, 0, mem.bytes);
  }
  volatile std::uint32_t* at(int i) { return reinterpret_cast<volatile std::uint32_t*>(mem.p) + i; }
  CUdeviceptr device_at(int i) const { return device + i * sizeof(std::uint32_t); }
};

std::uint32_t load_flag(const volatile std::uint32_t* p) {
  const std::uint32_t v = *p;
  std::atomic_thread_fence(std::memory_order_acquire);
  return v;
}

/// Publishes a flag after the data before it: memcpy may have used
/// non-temporal stores, which only sfence orders ahead of the flag.
void publish_flag(volatile std::uint32_t* p, std::uint32_t v) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("sfence" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  *p = v;
}

/// Cyclic >=, the comparison of CU_STREAM_WAIT_VALUE_GEQ.
bool reached(std::uint32_t v, std::uint32_t target) { return static_cast<std::int32_t>(v - target) >= 0; }

/// A flag value past every generation a run uses: it releases every wait.
constexpr std::uint32_t release_all = 0x40000000u;

/// Waits until ready() holds: spins briefly, then yields. Throws when `abort`
/// is set by a failed thread, or after timeout_s (a flag that never comes
/// must not hang the probe).
template <class P>
void wait_until(P ready, const std::atomic<bool>* abort, const char* what, double timeout_s = 60) {
  double give_up = 0;
  for (unsigned i = 0;; ++i) {
    if (ready()) return;
    if (i < 200) {
      cpu_relax();
      continue;
    }
    if (i % 64 == 0) {
      if (abort && abort->load(std::memory_order_relaxed))
        throw std::runtime_error(std::string("stopped waiting for ") + what + ": another thread failed");
      const double t = now_s();
      if (give_up == 0) {
        give_up = t + timeout_s;
      } else if (t > give_up) {
        throw std::runtime_error("waited " + std::to_string(static_cast<int>(timeout_s)) + " s for " + what);
      }
    }
    std::this_thread::yield();
  }
}

void read_memops_attributes(memops& m) {
  using get_fn = CUresult(CUDAAPI*)(CUdevice*, int);
  using attr_fn = CUresult(CUDAAPI*)(int*, CUdevice_attribute, CUdevice);
  auto get = reinterpret_cast<get_fn>(driver_symbol("cuDeviceGet", nullptr));
  auto attr = reinterpret_cast<attr_fn>(driver_symbol("cuDeviceGetAttribute", nullptr));
  CUdevice dev = 0;
  if (!get || !attr || get(&dev, 0) != CUDA_SUCCESS) return;
  auto read = [&](CUdevice_attribute a) -> json {
    int v = -1;
    return attr(&v, a, dev) == CUDA_SUCCESS ? json(v) : json(nullptr);
  };
  m.attributes["can_use_64_bit_stream_mem_ops"] = read(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
  m.attributes["can_use_stream_wait_value_nor"] = read(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR);
  m.attributes["can_flush_remote_writes"] = read(CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES);
}

/// A wait on a flag already set, then a write the host sees: what the
/// staging prototype relies on.
void trial_memops(memops& m) {
  flag_block flags(2);
  stream_handle s;
  *flags.at(0) = 1;
  check_cu(m, m.wait(s.s, flags.device_at(0), 1, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
  check_cu(m, m.write(s.s, flags.device_at(1), 7, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32");
  sync_stream(s.s, 10);
  if (load_flag(flags.at(1)) != 7)
    throw std::runtime_error("cuStreamWriteValue32's value did not reach the host");
}

memops load_memops() {
  memops m;
  m.error_name = reinterpret_cast<error_name_fn>(driver_symbol("cuGetErrorName", nullptr));
  m.wait = reinterpret_cast<value32_fn>(driver_symbol("cuStreamWaitValue32", &m.why));
  if (m.wait) m.write = reinterpret_cast<value32_fn>(driver_symbol("cuStreamWriteValue32", &m.why));
  if (!m.wait || !m.write) return m;
  read_memops_attributes(m);
  try {
    trial_memops(m);
    m.usable = true;
  } catch (const std::exception& e) {
    m.why = std::string("trial failed: ") + e.what();
    (void)cudaGetLastError();
  }
  return m;
}

// ------------------------------------------------------ options, plan ----

const std::vector<std::string> all_sections = {
    "dma", "stream_memops", "host_functions", "host_memcpy", "pinning", "staging", "gemm"};
const std::set<std::string> host_only_sections = {"host_memcpy"};

struct options {
  std::string json_path = "staging_probe.json";
  bool quick = false;
  double max_seconds = 0;  // 0: the mode's default
  std::set<std::string> only;
  int staging_gib = 0;  // 0: the mode's default
};

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void print_usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: staging_probe [--json FILE] [--quick] [--max-seconds S] [--only LIST] [--staging-gib N]\n"
      "  --json FILE       where the results go (default staging_probe.json)\n"
      "  --quick           a reduced set, under a minute\n"
      "  --max-seconds S   stop starting measurements that would end later (default 360, quick 60)\n"
      "  --only LIST       sections, comma-separated: dma,stream_memops,host_functions,host_memcpy,\n"
      "                    pinning,staging,gemm (the machine and GPU sections always run; without a\n"
      "                    GPU, host_memcpy still runs when named here)\n"
      "  --staging-gib N   bytes per direction of a staging run (default 8, quick 1)\n"
      "exit status: 0 every measurement ran, 1 one or more failed, 2 bad usage, 3 no GPU\n");
}

double positive_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(v > 0))
    throw usage_error(flag + " wants a positive number, not \"" + text + "\"");
  return v;
}

options parse_options(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw usage_error(a + " wants a value");
      return argv[++i];
    };
    if (a == "--json") {
      o.json_path = value();
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--max-seconds") {
      o.max_seconds = positive_number(a, value());
    } else if (a == "--staging-gib") {
      const double g = positive_number(a, value());
      if (g != std::floor(g) || g > 64)
        throw usage_error("--staging-gib wants a whole number of GiB up to 64");
      o.staging_gib = static_cast<int>(g);
    } else if (a == "--only") {
      std::istringstream list(value());
      std::string s;
      while (std::getline(list, s, ',')) {
        if (std::find(all_sections.begin(), all_sections.end(), s) == all_sections.end())
          throw usage_error("--only: no section \"" + s + "\"");
        o.only.insert(s);
      }
    } else if (a == "--help" || a == "-h") {
      print_usage(stdout);
      std::exit(0);
    } else {
      throw usage_error("unknown argument \"" + a + "\"");
    }
  }
  return o;
}

struct ring_shape {
  std::size_t slot_bytes;
  int slots;
};

/// What each section runs: the full probe (about 4-5 minutes on an H100
/// node) or --quick (under a minute).
struct plan {
  double max_seconds;
  std::size_t dma_bytes;
  std::vector<std::size_t> dma_pieces;
  int dma_reps_pinned, dma_reps_pageable, latency_ops;
  std::size_t memcpy_bytes;
  std::vector<int> memcpy_threads;
  int memcpy_reps;
  std::size_t pin_bytes;
  int pin_reps;
  int memops_iterations;
  std::size_t staging_bytes;
  std::vector<int> staging_threads;
  ring_shape staging_reference;
  std::vector<ring_shape> staging_other_shapes;
  int staging_reps;
  std::vector<std::array<int, 3>> gemm_shapes;  // m, n, k
  int gemm_reps;
};

plan make_plan(const options& o) {
  plan p;
  const bool q = o.quick;
  p.max_seconds = o.max_seconds > 0 ? o.max_seconds : q ? 60 : 360;
  p.dma_bytes = q ? 256 * MiB : GiB;
  p.dma_pieces = q ? std::vector<std::size_t>{4 * MiB, 64 * MiB}
                   : std::vector<std::size_t>{MiB, 4 * MiB, 16 * MiB, 64 * MiB};
  p.dma_reps_pinned = q ? 3 : 5;
  p.dma_reps_pageable = q ? 2 : 3;
  p.latency_ops = q ? 100 : 1000;
  p.memcpy_bytes = q ? 256 * MiB : GiB;
  p.memcpy_threads = q ? std::vector<int>{1, 4, 16} : std::vector<int>{1, 2, 4, 8, 16};
  p.memcpy_reps = q ? 2 : 3;
  p.pin_bytes = q ? 256 * MiB : GiB;
  p.pin_reps = q ? 2 : 3;
  p.memops_iterations = q ? 100 : 500;
  p.staging_bytes = static_cast<std::size_t>(o.staging_gib ? o.staging_gib : q ? 1 : 8) * GiB;
  p.staging_threads = q ? std::vector<int>{1, 4} : std::vector<int>{1, 2, 4, 8};
  p.staging_reference = q ? ring_shape{32 * MiB, 8} : ring_shape{32 * MiB, 16};
  if (!q)
    p.staging_other_shapes = {{8 * MiB, 4}, {8 * MiB, 16}, {32 * MiB, 4}, {64 * MiB, 4}, {64 * MiB, 16}};
  p.staging_reps = q ? 1 : 2;
  if (q) {
    p.gemm_shapes = {{{4096, 4096, 4096}}, {{16384, 16384, 2048}}};
  } else {
    p.gemm_shapes = {{{2048, 2048, 2048}},    {{4096, 4096, 4096}},   {{8192, 8192, 8192}},
                     {{16384, 16384, 16384}}, {{16384, 16384, 2048}}, {{16384, 16384, 4096}},
                     {{4096, 4096, 16384}}};
  }
  p.gemm_reps = q ? 2 : 3;
  return p;
}

// ------------------------------------------------------------- context ----

struct context {
  options opt;
  plan p;
  double start = now_s();
  json root;
  int measured = 0, errors = 0, skipped = 0;
  bool gpu = false;
  std::string pci_bus;
  memops ops;

  /// Every section with a GPU (or those of --only); without one, only the
  /// sections that need none and that --only names.
  bool wants(const std::string& section) const {
    if (!gpu) return opt.only.count(section) && host_only_sections.count(section);
    return opt.only.empty() || opt.only.count(section);
  }
  double left() const { return start + p.max_seconds - now_s(); }

  /// Rewrites the JSON file whole (through a temporary and a rename).
  void save() {
    root["probe"]["seconds"] = now_s() - start;
    const std::string tmp = opt.json_path + ".tmp";
    {
      std::ofstream f(tmp);
      f << root.dump();
      if (!f) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), opt.json_path.c_str()) != 0) throw std::runtime_error(errno_text("rename"));
  }
};

/// The figures of a result worth a line of the readable summary.
std::string digest(const json& r, const std::string& prefix = "") {
  std::string out;
  r.each_member([&](const std::string& k, const json& v) {
    char buf[64];
    if (v.is_object() && prefix.empty()) {
      std::string inner = digest(v, k + ".");
      if (!inner.empty()) out += (out.empty() ? "" : ", ") + inner;
    } else if (v.is_number() && (k.rfind("best_", 0) == 0 || k.find("fraction") != std::string::npos)) {
      std::snprintf(buf, sizeof buf, "%.4g", v.number());
      out += (out.empty() ? "" : ", ") + prefix + k + "=" + buf;
    } else if ((v.is_string() || v.is_bool()) && (k == "verdict" || k == "usable" || k == "mechanism")) {
      out += (out.empty() ? "" : ", ") + prefix + k + "=" +
             (v.is_bool() ? (v.boolean() ? "true" : "false") : v.string());
    }
  });
  return out;
}

/// Runs one measurement into sec[name]: its result, {"error": ...} when it
/// throws (the probe goes on), or {"skipped": ...} when the time left cannot
/// hold its estimate need_s.
template <class F>
void measure(context& ctx, json& sec, const std::string& name, double need_s, F&& fn) {
  if (ctx.left() < need_s) {
    char why[96];
    std::snprintf(why, sizeof why, "time limit: %.0f s left, needs about %.0f s", std::max(0.0, ctx.left()),
                  need_s);
    sec[name]["skipped"] = why;
    ++ctx.skipped;
    std::printf("  %-44s skipped (%s)\n", name.c_str(), why);
  } else {
    const double t0 = now_s();
    try {
      json r = fn();
      r["probe_seconds"] = now_s() - t0;
      std::printf("  %-44s %s\n", name.c_str(), digest(r).c_str());
      sec[name] = std::move(r);
      ++ctx.measured;
    } catch (const std::exception& e) {
      (void)cudaGetLastError();  // clears a non-sticky error for the next measurement
      sec[name]["error"] = e.what();
      ++ctx.errors;
      std::printf("  %-44s ERROR: %s\n", name.c_str(), e.what());
    }
  }
  std::fflush(stdout);
  ctx.save();
}

json& begin_section(context& ctx, const std::string& name, const char* what) {
  std::printf("\n== %s: %s\n", name.c_str(), what);
  return ctx.root[name];
}

std::string mib(std::size_t bytes) { return std::to_string(bytes / MiB) + "MiB"; }

// ----------------------------------------------------- DMA: peaks, latency ----

enum class way { h2d, d2h, both };
const char* way_name(way w) { return w == way::h2d ? "h2d" : w == way::d2h ? "d2h" : "both"; }

/// Host and device buffers of the DMA measurements, one set per direction
/// so that both directions can run at once.
struct dma_setup {
  std::size_t bytes;
  pinned_buffer pin_up, pin_down;
  mapping page_up, page_down;
  device_buffer dev_up, dev_down;
  stream_handle up, down;
  explicit dma_setup(std::size_t n)
      : bytes(n),
        pin_up(n),
        pin_down(n),
        page_up(n, pages::system),
        page_down(n, pages::system),
        dev_up(n),
        dev_down(n) {
    parallel_touch(pin_up.p, n);
    parallel_touch(pin_down.p, n);
    parallel_touch(page_up.data(), n);
    parallel_touch(page_down.data(), n);
    CHECK(cudaMemset(dev_up.p, 0, n));
    CHECK(cudaMemset(dev_down.p, 0, n));
    CHECK(cudaDeviceSynchronize());
  }
};

void enqueue_pieces(char* dst, const char* src, std::size_t total, std::size_t piece, cudaMemcpyKind kind,
                    cudaStream_t s) {
  for (std::size_t off = 0; off < total; off += piece)
    CHECK(cudaMemcpyAsync(dst + off, src + off, std::min(piece, total - off), kind, s));
}

/// Seconds to move d.bytes each way asked, in pieces; both ways are
/// enqueued from two threads at once (a pageable copy holds its thread).
double transfer_seconds(dma_setup& d, way w, bool pinned, std::size_t piece) {
  char* up_src = pinned ? d.pin_up.p : d.page_up.data();
  char* down_dst = pinned ? d.pin_down.p : d.page_down.data();
  std::vector<std::function<void()>> tasks;
  if (w != way::d2h)
    tasks.push_back([&] {
      enqueue_pieces(d.dev_up.p, up_src, d.bytes, piece, cudaMemcpyHostToDevice, d.up.s);
      CHECK(cudaStreamSynchronize(d.up.s));
    });
  if (w != way::h2d)
    tasks.push_back([&] {
      enqueue_pieces(down_dst, d.dev_down.p, d.bytes, piece, cudaMemcpyDeviceToHost, d.down.s);
      CHECK(cudaStreamSynchronize(d.down.s));
    });
  return run_together(tasks);
}

json transfer_rate(dma_setup& d, way w, bool pinned, std::size_t piece, int reps) {
  std::vector<double> gbps;
  const double moved = static_cast<double>(d.bytes) * (w == way::both ? 2 : 1);
  for (int r = 0; r < reps; ++r) gbps.push_back(moved / transfer_seconds(d, w, pinned, piece) / 1e9);
  json j = summary(gbps, "gbps", true);
  j["bytes_per_direction"] = d.bytes;
  j["piece_bytes"] = piece;
  return j;
}

/// Small copies: the round trip of one (enqueue, then wait) and the time per
/// copy of many enqueued back to back.
json copy_latency(dma_setup& d, way w, bool pinned, std::size_t bytes, int ops) {
  char* host =
      w == way::h2d ? (pinned ? d.pin_up.p : d.page_up.data()) : (pinned ? d.pin_down.p : d.page_down.data());
  char* dev = w == way::h2d ? d.dev_up.p : d.dev_down.p;
  cudaStream_t s = w == way::h2d ? d.up.s : d.down.s;
  auto copy = [&](std::size_t i) {
    const std::size_t off = (i * bytes) % d.bytes;
    if (w == way::h2d) {
      CHECK(cudaMemcpyAsync(dev + off, host + off, bytes, cudaMemcpyHostToDevice, s));
    } else {
      CHECK(cudaMemcpyAsync(host + off, dev + off, bytes, cudaMemcpyDeviceToHost, s));
    }
  };
  std::vector<double> roundtrip_us;
  for (int i = 0; i < ops; ++i) {
    const double t0 = now_s();
    copy(i);
    CHECK(cudaStreamSynchronize(s));
    roundtrip_us.push_back((now_s() - t0) * 1e6);
  }
  const double t0 = now_s();
  for (int i = 0; i < ops; ++i) copy(i);
  CHECK(cudaStreamSynchronize(s));
  json j = summary(roundtrip_us, "roundtrip_us", false);
  j["pipelined_us_per_copy"] = (now_s() - t0) * 1e6 / ops;
  j["copy_bytes"] = bytes;
  return j;
}

/// The link as it runs: an idle GPU may lower its PCIe speed.
json pcie_link_under_load(dma_setup& d, const std::string& bus) {
  for (int i = 0; i < 8; ++i)
    enqueue_pieces(d.dev_up.p, d.pin_up.p, d.bytes, 64 * MiB, cudaMemcpyHostToDevice, d.up.s);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  json j = pcie_link(bus);
  CHECK(cudaStreamSynchronize(d.up.s));
  return j;
}

void section_dma(context& ctx) {
  json& sec = begin_section(ctx, "dma", "pinned and pageable copy rates, small-copy latency");
  std::unique_ptr<dma_setup> d;
  measure(ctx, sec, "setup", 10, [&] {
    d = std::make_unique<dma_setup>(ctx.p.dma_bytes);
    transfer_seconds(*d, way::both, true, 64 * MiB);  // warms the copy engines and the link
    json j;
    j["bytes_per_direction"] = d->bytes;
    return j;
  });
  if (!d) return;
  for (bool pinned : {true, false}) {
    const int reps = pinned ? ctx.p.dma_reps_pinned : ctx.p.dma_reps_pageable;
    const double rate_guess = pinned ? 20e9 : 4e9;
    for (std::size_t piece : ctx.p.dma_pieces)
      for (way w : {way::h2d, way::d2h, way::both}) {
        const std::string name =
            std::string(pinned ? "pinned " : "pageable ") + way_name(w) + " " + mib(piece) + " pieces";
        measure(ctx, sec, name, reps * 2.0 * d->bytes / rate_guess + 0.5,
                [&] { return transfer_rate(*d, w, pinned, piece, reps); });
      }
  }
  for (bool pinned : {true, false})
    for (way w : {way::h2d, way::d2h}) {
      const std::string name =
          std::string("latency ") + (pinned ? "pinned " : "pageable ") + way_name(w) + " 4KiB";
      measure(ctx, sec, name, ctx.p.latency_ops * 100e-6 + 0.5,
              [&] { return copy_latency(*d, w, pinned, 4 * KiB, ctx.p.latency_ops); });
    }
  measure(ctx, sec, "pcie_link_under_load", 2, [&] { return pcie_link_under_load(*d, ctx.pci_bus); });
}

// ------------------------------------------------------ host memcpy ----

enum class destination { touched, fresh, fresh_hugepage, fresh_small_pages };

const char* destination_name(destination k) {
  switch (k) {
    case destination::touched:
      return "touched";
    case destination::fresh:
      return "untouched";
    case destination::fresh_hugepage:
      return "untouched MADV_HUGEPAGE";
    case destination::fresh_small_pages:
      return "untouched MADV_NOHUGEPAGE";
  }
  return "?";
}

/// GB/s of `threads` threads copying src into a destination that is either
/// touched already or mapped fresh for each repetition (the copy then pays
/// the first-touch page faults; unmapping it is timed apart).
json host_copy_rate(const mapping& src, const mapping& touched, destination kind, int threads, int reps) {
  const std::size_t bytes = src.size();
  std::vector<double> gbps, unmap_s_per_gib;
  double huge_fraction = NAN;
  for (int r = 0; r < reps; ++r) {
    std::unique_ptr<mapping> fresh;
    if (kind != destination::touched)
      fresh = std::make_unique<mapping>(bytes, kind == destination::fresh_hugepage      ? pages::huge
                                               : kind == destination::fresh_small_pages ? pages::small
                                                                                        : pages::system);
    char* dst = fresh ? fresh->data() : touched.data();
    const double huge_before = anon_huge_bytes();
    gbps.push_back(bytes / parallel_copy(dst, src.data(), bytes, threads) / 1e9);
    if (!fresh) continue;
    const double huge_after = anon_huge_bytes();
    if (huge_before >= 0 && huge_after >= 0) huge_fraction = (huge_after - huge_before) / bytes;
    const double t0 = now_s();
    fresh.reset();
    unmap_s_per_gib.push_back((now_s() - t0) * GiB / bytes);
  }
  json j = summary(gbps, "gbps", true);
  j["bytes"] = bytes;
  j["threads"] = threads;
  if (kind != destination::touched) {
    j["munmap"] = summary(unmap_s_per_gib, "seconds_per_gib", false);
    j["huge_page_fraction"] = huge_fraction;
  }
  return j;
}

/// GB/s of `threads` threads faulting in a fresh mapping with
/// MADV_POPULATE_WRITE in 8 MiB pieces, as oa's staging engine faults in a
/// drain's destination ahead of it (with MADV_HUGEPAGE first for `huge`).
json populate_rate(std::size_t bytes, bool huge, int threads, int reps) {
#ifdef MADV_POPULATE_WRITE
  std::vector<double> gbps;
  double huge_fraction = NAN;
  for (int r = 0; r < reps; ++r) {
    mapping fresh(bytes, huge ? pages::huge : pages::system);
    char* base = fresh.data();
    const double huge_before = anon_huge_bytes();
    std::vector<std::function<void()>> tasks;
    for (int t = 0; t < threads; ++t) {
      const byte_range rg = slice(bytes, threads, t);
      tasks.push_back([=] {
        for (std::size_t a = rg.b; a < rg.e; a += 8 * MiB)
          if (madvise(base + a, std::min(8 * MiB, rg.e - a), MADV_POPULATE_WRITE) != 0)
            throw std::runtime_error(errno_text("madvise(MADV_POPULATE_WRITE)"));
      });
    }
    gbps.push_back(bytes / run_together(tasks) / 1e9);
    const double huge_after = anon_huge_bytes();
    if (huge_before >= 0 && huge_after >= 0) huge_fraction = (huge_after - huge_before) / bytes;
  }
  json j = summary(gbps, "gbps", true);
  j["bytes"] = bytes;
  j["threads"] = threads;
  j["huge_page_fraction"] = huge_fraction;
  return j;
#else
  (void)bytes, (void)huge, (void)threads, (void)reps;
  throw std::runtime_error("MADV_POPULATE_WRITE is not in this system's headers");
#endif
}

void section_host_memcpy(context& ctx) {
  json& sec = begin_section(ctx, "host_memcpy",
                            "memcpy by T threads into touched and never-touched memory; faulting in by populate");
  const std::size_t bytes = ctx.p.memcpy_bytes;
  std::unique_ptr<mapping> src, touched;
  measure(ctx, sec, "setup", 5, [&] {
    src = std::make_unique<mapping>(bytes, pages::system);
    touched = std::make_unique<mapping>(bytes, pages::system);
    parallel_pattern(src->data(), bytes, 0);
    parallel_touch(touched->data(), bytes);
    json j;
    j["bytes"] = bytes;
    j["source_huge_page_fraction"] = anon_huge_bytes() / (2.0 * bytes);  // of both mappings
    return j;
  });
  if (!src) return;
  for (destination kind : {destination::touched, destination::fresh, destination::fresh_hugepage,
                           destination::fresh_small_pages})
    for (int threads : ctx.p.memcpy_threads) {
      const std::string name = std::string(destination_name(kind)) + " T=" + std::to_string(threads);
      const double guess = kind == destination::touched ? 5e9 : 1.5e9;
      measure(ctx, sec, name, ctx.p.memcpy_reps * (bytes / guess + 0.2),
              [&] { return host_copy_rate(*src, *touched, kind, threads, ctx.p.memcpy_reps); });
    }
  for (bool huge : {false, true})
    for (int threads : ctx.p.memcpy_threads) {
      const std::string name = std::string(huge ? "populate MADV_HUGEPAGE" : "populate") + " T=" + std::to_string(threads);
      measure(ctx, sec, name, ctx.p.memcpy_reps * (bytes / 1.5e9 + 0.2),
              [&] { return populate_rate(bytes, huge, threads, ctx.p.memcpy_reps); });
    }
}

// ------------------------------------------------------------ pinning ----

/// A cudaHostRegister that a failure later in the measurement undoes.
struct registration {
  void* p = nullptr;
  ~registration() {
    if (p) (void)cudaHostUnregister(p);
  }
};

/// Seconds per GiB of cudaHostRegister and cudaHostUnregister of a fresh
/// mapping, touched first or not (then registering faults the pages in).
json register_cost(pages mode, bool touch, std::size_t bytes, int reps) {
  std::vector<double> reg, unreg;
  double huge_fraction = NAN;
  for (int r = 0; r < reps; ++r) {
    mapping m(bytes, mode);
    const double huge_before = anon_huge_bytes();
    if (touch) parallel_touch(m.data(), bytes);
    registration guard;
    double t0 = now_s();
    CHECK(cudaHostRegister(m.data(), bytes, cudaHostRegisterDefault));
    guard.p = m.data();
    reg.push_back((now_s() - t0) * GiB / bytes);
    const double huge_after = anon_huge_bytes();
    if (huge_before >= 0 && huge_after >= 0) huge_fraction = (huge_after - huge_before) / bytes;
    t0 = now_s();
    guard.p = nullptr;
    CHECK(cudaHostUnregister(m.data()));
    unreg.push_back((now_s() - t0) * GiB / bytes);
  }
  json j;
  j["bytes"] = bytes;
  j["huge_page_fraction"] = huge_fraction;
  j["register"] = summary(reg, "seconds_per_gib", false);
  j["unregister"] = summary(unreg, "seconds_per_gib", false);
  return j;
}

/// Seconds per GiB of cudaHostAlloc (or cudaMallocHost) and cudaFreeHost.
json pinned_alloc_cost(bool malloc_host, std::size_t bytes, int reps) {
  std::vector<double> alloc, release;
  for (int r = 0; r < reps; ++r) {
    void* p = nullptr;
    double t0 = now_s();
    CHECK(malloc_host ? cudaMallocHost(&p, bytes) : cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    alloc.push_back((now_s() - t0) * GiB / bytes);
    t0 = now_s();
    CHECK(cudaFreeHost(p));
    release.push_back((now_s() - t0) * GiB / bytes);
  }
  json j;
  j["bytes"] = bytes;
  j["alloc"] = summary(alloc, "seconds_per_gib", false);
  j["free"] = summary(release, "seconds_per_gib", false);
  return j;
}

void section_pinning(context& ctx) {
  json& sec =
      begin_section(ctx, "pinning", "cudaHostRegister/Unregister, cudaHostAlloc, cudaMallocHost per GiB");
  const std::size_t bytes = ctx.p.pin_bytes;
  const int reps = ctx.p.pin_reps;
  const double need = reps * (bytes / 2e9 + 0.3);
  measure(ctx, sec, "register touched 4KiB pages", need,
          [&] { return register_cost(pages::small, true, bytes, reps); });
  // A small mapping as well: its time less the large one's per-GiB share is
  // the fixed cost of one registration (each array of a registered stage pays it).
  measure(ctx, sec, "register touched 4KiB pages, 16 MiB", 4 * reps * 0.1,
          [&] { return register_cost(pages::small, true, 16 * MiB, 4 * reps); });
  measure(ctx, sec, "register touched MADV_HUGEPAGE", need,
          [&] { return register_cost(pages::huge, true, bytes, reps); });
  measure(ctx, sec, "register untouched (system pages)", need,
          [&] { return register_cost(pages::system, false, bytes, reps); });
  measure(ctx, sec, "cudaHostAlloc", need, [&] { return pinned_alloc_cost(false, bytes, reps); });
  measure(ctx, sec, "cudaMallocHost", need, [&] { return pinned_alloc_cost(true, bytes, reps); });
}

// ----------------------------------------------------- host functions ----

/// What a host function does: sleep or spin for `seconds`.
struct host_work {
  double seconds = 0;
  bool spin = false;
  std::atomic<int> started{0};
};

void CUDART_CB host_work_body(void* arg) {
  auto* w = static_cast<host_work*>(arg);
  w->started.fetch_add(1);
  if (w->spin) {
    const double end = now_s() + w->seconds;
    while (now_s() < end) cpu_relax();
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(w->seconds));
  }
}

/// Wall time of two 50 ms host functions on two streams: about 50 ms when
/// the driver runs them at once, 100 ms when one thread runs them in turn.
json two_host_functions(bool spin, int reps) {
  std::list<host_work> work;  // outlives the streams, which drain when they go
  stream_handle a, b;
  std::vector<double> wall_ms;
  for (int r = 0; r < reps; ++r) {
    host_work& wa = work.emplace_back();
    host_work& wb = work.emplace_back();
    wa.seconds = wb.seconds = 0.05;
    wa.spin = wb.spin = spin;
    const double t0 = now_s();
    CHECK(cudaLaunchHostFunc(a.s, host_work_body, &wa));
    CHECK(cudaLaunchHostFunc(b.s, host_work_body, &wb));
    CHECK(cudaStreamSynchronize(a.s));
    CHECK(cudaStreamSynchronize(b.s));
    wall_ms.push_back((now_s() - t0) * 1e3);
  }
  json j = summary(wall_ms, "wall_ms", false);
  j["each_ms"] = 50;
  j["verdict"] = median_of(wall_ms) < 75 ? "concurrent" : "serialized";
  return j;
}

/// Milliseconds from enqueueing a 4 KiB copy (or a tiny kernel) on stream b
/// until it is done, alone or while a host function spins on stream a.
json other_stream_while_busy(bool kernel, int reps) {
  std::list<host_work> work;  // these outlive the streams, which drain when they go
  pinned_buffer host(4 * KiB);
  device_buffer dev(4 * KiB);
  stream_handle a, b;
  auto op_ms = [&] {
    const double t0 = now_s();
    if (kernel) {
      tiny_kernel<<<1, 1, 0, b.s>>>(reinterpret_cast<int*>(dev.p));
      launch_check("tiny_kernel");
    } else {
      CHECK(cudaMemcpyAsync(dev.p, host.p, 4 * KiB, cudaMemcpyHostToDevice, b.s));
    }
    CHECK(cudaStreamSynchronize(b.s));
    return (now_s() - t0) * 1e3;
  };
  op_ms();  // loads the kernel's module
  std::vector<double> alone, busy;
  for (int r = 0; r < reps; ++r) alone.push_back(op_ms());
  for (int r = 0; r < reps; ++r) {
    host_work& w = work.emplace_back();
    w.seconds = 0.1;
    w.spin = true;
    CHECK(cudaLaunchHostFunc(a.s, host_work_body, &w));
    wait_until([&] { return w.started.load() > 0; }, nullptr, "the host function to start", 10);
    busy.push_back(op_ms());
    CHECK(cudaStreamSynchronize(a.s));
  }
  json j;
  j["alone"] = summary(alone, "ms", false);
  j["while_host_function_spins_100ms"] = summary(busy, "ms", false);
  j["verdict"] = median_of(busy) > median_of(alone) + 20 ? "delayed" : "not delayed";
  return j;
}

void section_host_functions(context& ctx) {
  json& sec = begin_section(ctx, "host_functions", "cudaLaunchHostFunc concurrency across streams");
  const int reps = ctx.opt.quick ? 2 : 3;
  measure(ctx, sec, "two streams, host functions sleeping 50 ms", 0.3 * reps + 0.5,
          [&] { return two_host_functions(false, reps); });
  measure(ctx, sec, "two streams, host functions spinning 50 ms", 0.3 * reps + 0.5,
          [&] { return two_host_functions(true, reps); });
  measure(ctx, sec, "copy on another stream", 0.2 * reps + 0.5,
          [&] { return other_stream_while_busy(false, reps); });
  measure(ctx, sec, "kernel on another stream", 0.2 * reps + 0.5,
          [&] { return other_stream_while_busy(true, reps); });
}

// --------------------------------------------------- stream memory ops ----

json memops_availability(const memops& m) {
  json j;
  j["cuStreamWaitValue32"] = m.wait != nullptr;
  j["cuStreamWriteValue32"] = m.write != nullptr;
  j["usable"] = m.usable;
  if (!m.usable) j["why"] = m.why;
  j["attributes"] = m.attributes;
  j["obtained_through"] = "cudaGetDriverEntryPointByVersion (CUDA 12.0 ABI), libcuda not linked";
  return j;
}

/// A stream parked on a host flag: microseconds from the host's write of the
/// flag until the stream's answering write reaches the host, and until an
/// event recorded after the wait is seen done.
json flag_release_latency(const memops& m, int iterations) {
  if (!m.usable) throw std::runtime_error("stream memory operations not usable: " + m.why);
  flag_block flags(2);  // 0: host -> stream, 1: stream -> host
  stream_handle s;
  event_handle done(cudaEventDisableTiming);
  std::vector<double> to_ack_us, to_event_us;
  try {
    for (std::uint32_t i = 1; i <= static_cast<std::uint32_t>(iterations); ++i) {
      check_cu(m, m.wait(s.s, flags.device_at(0), i, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
      check_cu(m, m.write(s.s, flags.device_at(1), i, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32");
      CHECK(cudaEventRecord(done.e, s.s));
      const double parked = now_s() + 200e-6;  // lets the stream reach its wait
      while (now_s() < parked) cpu_relax();
      const double t0 = now_s();
      publish_flag(flags.at(0), i);
      wait_until([&] { return load_flag(flags.at(1)) == i; }, nullptr, "the stream's answering write", 5);
      to_ack_us.push_back((now_s() - t0) * 1e6);
      wait_until([&] { return cudaEventQuery(done.e) == cudaSuccess; }, nullptr, "the event after the wait",
                 5);
      to_event_us.push_back((now_s() - t0) * 1e6);
    }
  } catch (...) {
    publish_flag(flags.at(0), release_all);  // never leave the stream parked
    (void)cudaStreamSynchronize(s.s);
    throw;
  }
  json j;
  j["flag_to_stream_write_seen"] = summary(to_ack_us, "us", false);
  j["flag_to_event_done"] = summary(to_event_us, "us", false);
  return j;
}

/// For comparison: an event recorded on an idle stream until seen done, and a
/// host function's launch until it runs.
json completion_roundtrips(int iterations) {
  std::list<host_work> work;  // outlives the stream, which drains when it goes
  stream_handle s;
  event_handle ev(cudaEventDisableTiming);
  std::vector<double> event_us, host_fn_us;
  for (int i = 0; i < iterations; ++i) {
    double t0 = now_s();
    CHECK(cudaEventRecord(ev.e, s.s));
    wait_until([&] { return cudaEventQuery(ev.e) == cudaSuccess; }, nullptr, "an event", 5);
    event_us.push_back((now_s() - t0) * 1e6);
    host_work& w = work.emplace_back();
    t0 = now_s();
    CHECK(cudaLaunchHostFunc(s.s, host_work_body, &w));
    wait_until([&] { return w.started.load() > 0; }, nullptr, "a host function", 5);
    host_fn_us.push_back((now_s() - t0) * 1e6);
    CHECK(cudaStreamSynchronize(s.s));
  }
  json j;
  j["event_record_to_done"] = summary(event_us, "us", false);
  j["host_function_launch_to_run"] = summary(host_fn_us, "us", false);
  return j;
}

void section_stream_memops(context& ctx) {
  json& sec =
      begin_section(ctx, "stream_memops", "cuStreamWaitValue32/WriteValue32 and completion latencies");
  measure(ctx, sec, "availability", 0, [&] { return memops_availability(ctx.ops); });
  const int n = ctx.p.memops_iterations;
  measure(ctx, sec, "host flag releases a waiting stream", n * 400e-6 + 0.5,
          [&] { return flag_release_latency(ctx.ops, n); });
  measure(ctx, sec, "completion round trips", n * 200e-6 + 0.5, [&] { return completion_roundtrips(n); });
}

// ------------------------------------------------- staging prototype ----

enum class mechanism { wait_value, host_enqueue };
const char* mechanism_name(mechanism m) { return m == mechanism::wait_value ? "wait_value" : "host_enqueue"; }

/// One direction's resources, made once and reused by every configuration:
/// the pinned ring (the largest asked), its flags (per slot: host side done,
/// DMA done), the device buffer the chunks rotate through, the stream and
/// the fallback's events.
struct lane_resources {
  static constexpr int max_slots = 16;
  pinned_buffer ring;
  flag_block flags;
  device_buffer device;
  stream_handle stream;
  std::vector<std::unique_ptr<event_handle>> events;
  lane_resources(std::size_t ring_bytes, std::size_t device_bytes)
      : ring(ring_bytes), flags(2 * max_slots), device(device_bytes) {
    parallel_touch(ring.p, ring_bytes);
    for (int s = 0; s < max_slots; ++s)
      events.push_back(std::make_unique<event_handle>(cudaEventDisableTiming));
  }
  int host_done(int s) const { return s; }
  int dma_done(int s) const { return max_slots + s; }
};

/// One direction of a staging run. Chunk c of the pageable host memory goes
/// through slot c % slots as generation g = c / slots + 1; host thread c %
/// threads fills (h2d) or drains (d2h) it. The slot's flags count
/// generations: the host side publishes g when its copy is done, the DMA
/// side when its DMA is done.
struct lane {
  bool h2d = true;
  mechanism mech = mechanism::wait_value;
  const memops* ops = nullptr;
  char* host = nullptr;
  std::size_t total = 0, slot = 0;
  int slots = 0, threads = 0;
  lane_resources* r = nullptr;
  std::unique_ptr<std::atomic<std::uint32_t>[]> recorded;  // host_enqueue: generation whose event is recorded
  const std::atomic<bool>* abort = nullptr;

  std::size_t chunks() const { return total / slot; }
  char* slot_ptr(int s) const { return r->ring.p + s * slot; }
  char* device_ptr(std::size_t c) const { return r->device.p + (c * slot) % r->device.bytes; }
};

/// The DMA side of a lane, on its own thread. With wait_value every DMA is
/// enqueued at once, behind a stream wait on its slot's host flag, and
/// followed by a stream write of its DMA flag; with host_enqueue this thread
/// waits for the host flag itself, enqueues, and records the slot's event.
void enqueue_lane(lane& L) {
  const cudaMemcpyKind kind = L.h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  const cudaStream_t s = L.r->stream.s;
  for (std::size_t c = 0; c < L.chunks(); ++c) {
    if (L.abort->load(std::memory_order_relaxed)) return;
    const int slot = static_cast<int>(c % L.slots);
    const auto g = static_cast<std::uint32_t>(c / L.slots + 1);
    const std::uint32_t host_target = L.h2d ? g : g - 1;  // this chunk filled / the slot's last chunk drained
    const int host_flag = L.r->host_done(slot);
    if (L.mech == mechanism::wait_value) {
      if (host_target > 0)
        check_cu(*L.ops,
                 L.ops->wait(s, L.r->flags.device_at(host_flag), host_target, CU_STREAM_WAIT_VALUE_GEQ),
                 "cuStreamWaitValue32");
    } else {
      wait_until([&] { return reached(load_flag(L.r->flags.at(host_flag)), host_target); }, L.abort,
                 "a slot's host side");
    }
    void* dst = L.h2d ? static_cast<void*>(L.device_ptr(c)) : L.slot_ptr(slot);
    const void* src = L.h2d ? static_cast<const void*>(L.slot_ptr(slot)) : L.device_ptr(c);
    CHECK(cudaMemcpyAsync(dst, src, L.slot, kind, s));
    if (L.mech == mechanism::wait_value) {
      check_cu(*L.ops,
               L.ops->write(s, L.r->flags.device_at(L.r->dma_done(slot)), g, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue32");
    } else {
      CHECK(cudaEventRecord(L.r->events[slot]->e, s));
      L.recorded[slot].store(g, std::memory_order_release);
    }
  }
}

/// Waits until the DMA of generation g of a slot is done.
void wait_for_dma(lane& L, int slot, std::uint32_t g) {
  if (L.mech == mechanism::wait_value) {
    const volatile std::uint32_t* flag = L.r->flags.at(L.r->dma_done(slot));
    wait_until([&] { return reached(load_flag(flag), g); }, L.abort, "a slot's DMA (stream write)");
    return;
  }
  wait_until([&] { return L.recorded[slot].load(std::memory_order_acquire) >= g; }, L.abort,
             "a slot's DMA to be enqueued");
  cudaEvent_t ev = L.r->events[slot]->e;
  wait_until(
      [&] {
        const cudaError_t e = cudaEventQuery(ev);
        if (e != cudaErrorNotReady) CHECK(e);
        return e == cudaSuccess;
      },
      L.abort, "a slot's DMA (event)");
}

/// Host thread t of a lane: fills (h2d) or drains (d2h) its chunks in turn.
void host_side(lane& L, int t) {
  for (std::size_t c = t; c < L.chunks(); c += L.threads) {
    const int slot = static_cast<int>(c % L.slots);
    const auto g = static_cast<std::uint32_t>(c / L.slots + 1);
    const std::uint32_t dma_target = L.h2d ? g - 1 : g;  // the slot's last DMA done / this chunk's DMA done
    if (dma_target > 0) wait_for_dma(L, slot, dma_target);
    char* host = L.host + c * L.slot;
    if (L.h2d) {
      std::memcpy(L.slot_ptr(slot), host, L.slot);
    } else {
      std::memcpy(host, L.slot_ptr(slot), L.slot);
    }
    publish_flag(L.r->flags.at(L.r->host_done(slot)), g);
  }
}

/// Seconds for the lanes to move their bytes, all at once. A failed thread
/// sets every host flag past any wait, so that no stream stays parked.
double run_lanes(const std::vector<lane*>& lanes) {
  std::atomic<bool> abort{false};
  std::vector<std::function<void()>> tasks;
  for (lane* L : lanes) {
    std::memset(L->r->flags.mem.p, 0, L->r->flags.mem.bytes);
    L->recorded.reset(new std::atomic<std::uint32_t>[lane_resources::max_slots]);
    for (int s = 0; s < lane_resources::max_slots; ++s) L->recorded[s].store(0);
    L->abort = &abort;
    tasks.push_back([L] { enqueue_lane(*L); });
    for (int t = 0; t < L->threads; ++t) tasks.push_back([L, t] { host_side(*L, t); });
  }
  auto release = [&] {
    abort.store(true);
    for (lane* L : lanes)
      for (int s = 0; s < lane_resources::max_slots; ++s)
        publish_flag(L->r->flags.at(L->r->host_done(s)), release_all);
  };
  auto finish = [&] {
    if (abort.load()) release();  // again: a thread busy at the first release may have lowered a flag
    for (lane* L : lanes) sync_stream(L->r->stream.s, 60);
  };
  return run_together(tasks, release, finish);
}

/// Index of the first 8-byte word of p that is not pattern(first_word + i), or n.
std::size_t first_mismatch(const char* p, std::uint64_t first_word, std::size_t n) {
  const auto* w = reinterpret_cast<const std::uint64_t*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (w[i] != pattern(first_word + i)) return i;
  return n;
}

/// Samples (first and last 4 KiB) of each device region against the last
/// source chunk that went there: a DMA that ran before its fill shows here.
void verify_h2d(const lane& L) {
  const std::size_t regions = L.r->device.bytes / L.slot, chunks = L.chunks(), words = 4 * KiB / 8;
  std::vector<char> buf(4 * KiB);
  for (std::size_t region = 0; region < std::min(regions, chunks); ++region) {
    const std::size_t c = region + (chunks - 1 - region) / regions * regions;
    for (std::size_t off : {std::size_t(0), L.slot - 4 * KiB}) {
      CHECK(cudaMemcpy(buf.data(), L.r->device.p + region * L.slot + off, 4 * KiB, cudaMemcpyDeviceToHost));
      if (first_mismatch(buf.data(), (c * L.slot + off) / 8, words) != words)
        throw std::runtime_error("h2d staging: device data differ from source chunk " + std::to_string(c));
    }
  }
}

/// Samples of each chunk in host memory against the device data it came from.
void verify_d2h(const lane& L) {
  const std::size_t words = 4 * KiB / 8;
  for (std::size_t c = 0; c < L.chunks(); ++c)
    for (std::size_t off : {std::size_t(0), L.slot - 4 * KiB})
      if (first_mismatch(L.host + c * L.slot + off, ((c * L.slot) % L.r->device.bytes + off) / 8, words) !=
          words)
        throw std::runtime_error("d2h staging: host data differ from device data in chunk " +
                                 std::to_string(c));
}

/// The buffers of the staging runs: pageable source (patterned) and
/// destination (touched) of the full size, one lane per direction.
struct staging_setup {
  std::size_t bytes;
  mapping src, dst;
  lane_resources up, down;
  std::map<std::string, double> peak_gbps;  // h2d, d2h, both
  staging_setup(std::size_t n, std::size_t ring_bytes)
      : bytes(n),
        src(n, pages::system),
        dst(n, pages::system),
        up(ring_bytes, std::min(n, GiB)),
        down(ring_bytes, std::min(n, GiB)) {
    parallel_pattern(src.data(), n, 0);
    parallel_touch(dst.data(), n);
    const std::size_t device_words = down.device.bytes / 8;
    fill_words<<<1024, 256>>>(reinterpret_cast<std::uint64_t*>(down.device.p), device_words, 0);
    launch_check("fill_words");
    CHECK(cudaMemset(up.device.p, 0, up.device.bytes));
    CHECK(cudaDeviceSynchronize());
  }
};

/// The reference of the staging runs: the rings' own pinned memory to the
/// lanes' device buffers in 64 MiB pieces, one way and both ways at once.
json staging_peaks(staging_setup& S) {
  const std::size_t n = std::min(S.up.ring.bytes, S.up.device.bytes), piece = std::min(n, 64 * MiB);
  auto seconds = [&](way w) {
    std::vector<std::function<void()>> tasks;
    if (w != way::d2h)
      tasks.push_back([&] {
        enqueue_pieces(S.up.device.p, S.up.ring.p, n, piece, cudaMemcpyHostToDevice, S.up.stream.s);
        CHECK(cudaStreamSynchronize(S.up.stream.s));
      });
    if (w != way::h2d)
      tasks.push_back([&] {
        enqueue_pieces(S.down.ring.p, S.down.device.p, n, piece, cudaMemcpyDeviceToHost, S.down.stream.s);
        CHECK(cudaStreamSynchronize(S.down.stream.s));
      });
    return run_together(tasks);
  };
  json j;
  for (way w : {way::h2d, way::d2h, way::both}) {
    std::vector<double> gbps;
    for (int r = 0; r < 4; ++r)
      gbps.push_back(static_cast<double>(n) * (w == way::both ? 2 : 1) / seconds(w) / 1e9);
    gbps.erase(gbps.begin());  // the first run warms up
    j[way_name(w)] = summary(gbps, "gbps", true);
    S.peak_gbps[way_name(w)] = *std::max_element(gbps.begin(), gbps.end());
  }
  j["bytes_per_direction"] = n;
  return j;
}

struct staging_config {
  way dir;
  ring_shape ring;
  int threads;
  bool untouched;  // the drain's destination is mapped fresh for each run
  mechanism mech;
  std::string name() const {
    return std::string(way_name(dir)) + " " + mib(ring.slot_bytes) + "x" + std::to_string(ring.slots) +
           " T=" + std::to_string(threads) + (untouched ? " untouched" : " touched") + " " +
           mechanism_name(mech);
  }
};

/// The configurations, most telling first (the time limit cuts the tail):
/// threads at the reference ring, drains into untouched memory, the
/// fallback mechanism beside the stream waits, then the other rings.
std::vector<staging_config> staging_configs(const plan& p, bool have_wait_value) {
  const mechanism main = have_wait_value ? mechanism::wait_value : mechanism::host_enqueue;
  std::vector<staging_config> out;
  for (int t : p.staging_threads)
    for (way w : {way::h2d, way::d2h, way::both}) out.push_back({w, p.staging_reference, t, false, main});
  for (int t : p.staging_threads)
    for (way w : {way::d2h, way::both}) out.push_back({w, p.staging_reference, t, true, main});
  if (have_wait_value)
    for (int t : p.staging_threads)
      for (way w : {way::h2d, way::d2h, way::both})
        out.push_back({w, p.staging_reference, t, false, mechanism::host_enqueue});
  for (const ring_shape& shape : p.staging_other_shapes)
    for (int t : p.staging_threads)
      for (way w : {way::h2d, way::d2h, way::both}) out.push_back({w, shape, t, false, main});
  return out;
}

lane make_lane(bool h2d, const staging_config& cfg, const memops& ops, char* host, std::size_t total,
               lane_resources& r) {
  lane L;
  L.h2d = h2d;
  L.mech = cfg.mech;
  L.ops = &ops;
  L.host = host;
  L.total = total;
  L.slot = cfg.ring.slot_bytes;
  L.slots = cfg.ring.slots;
  L.threads = cfg.threads;
  L.r = &r;
  return L;
}

json staging_run(staging_setup& S, const staging_config& cfg, const memops& ops, int reps) {
  std::vector<double> gbps;
  const bool up = cfg.dir != way::d2h, down = cfg.dir != way::h2d;
  for (int rep = 0; rep < reps; ++rep) {
    std::unique_ptr<mapping> fresh;
    if (cfg.untouched && down) fresh = std::make_unique<mapping>(S.bytes, pages::system);
    lane h2d = make_lane(true, cfg, ops, S.src.data(), S.bytes, S.up);
    lane d2h = make_lane(false, cfg, ops, fresh ? fresh->data() : S.dst.data(), S.bytes, S.down);
    std::vector<lane*> lanes;
    if (up) lanes.push_back(&h2d);
    if (down) lanes.push_back(&d2h);
    const double seconds = run_lanes(lanes);
    gbps.push_back(static_cast<double>(S.bytes) * lanes.size() / seconds / 1e9);
    if (up) verify_h2d(h2d);
    if (down) verify_d2h(d2h);
  }
  json j = summary(gbps, "gbps", true);
  j["direction"] = way_name(cfg.dir);
  j["slot_bytes"] = cfg.ring.slot_bytes;
  j["slots"] = cfg.ring.slots;
  j["threads_per_direction"] = cfg.threads;
  j["destination"] = cfg.dir == way::h2d ? "device"
                     : cfg.untouched     ? "untouched pageable"
                                         : "touched pageable";
  j["mechanism"] = mechanism_name(cfg.mech);
  j["bytes_per_direction"] = S.bytes;
  const auto peak = S.peak_gbps.find(way_name(cfg.dir));
  if (peak != S.peak_gbps.end() && peak->second > 0) {
    j["fraction_of_peak_best"] = *std::max_element(gbps.begin(), gbps.end()) / peak->second;
    j["fraction_of_peak_median"] = median_of(gbps) / peak->second;
  }
  return j;
}

void section_staging(context& ctx) {
  json& sec = begin_section(ctx, "staging",
                            "pageable <-> ring of pinned slots <-> device, T host threads per direction");
  const plan& p = ctx.p;
  std::size_t ring_bytes = p.staging_reference.slot_bytes * p.staging_reference.slots;
  for (const auto& shape : p.staging_other_shapes)
    ring_bytes = std::max(ring_bytes, shape.slot_bytes * shape.slots);
  std::unique_ptr<staging_setup> S;
  measure(ctx, sec, "setup", p.staging_bytes / 2e9 + 3, [&] {
    S = std::make_unique<staging_setup>(p.staging_bytes, ring_bytes);
    json j;
    j["bytes_per_direction"] = p.staging_bytes;
    j["ring_buffer_bytes_per_direction"] = ring_bytes;
    j["device_buffer_bytes_per_direction"] = S->up.device.bytes;
    return j;
  });
  if (!S) return;
  measure(ctx, sec, "pinned peak (ring memory, 64MiB pieces)", 3, [&] { return staging_peaks(*S); });
  sec["mechanism"] = ctx.ops.usable
                         ? "wait_value: each DMA waits for its slot through cuStreamWaitValue32 and "
                           "signals through cuStreamWriteValue32"
                         : "host_enqueue only (stream memory operations not usable: " + ctx.ops.why +
                               "): a host thread waits for the fill, enqueues the DMA and records an event";
  json& runs = sec["runs"];
  for (const staging_config& cfg : staging_configs(p, ctx.ops.usable)) {
    const double moved = static_cast<double>(S->bytes) * (cfg.dir == way::both ? 2 : 1);
    const double need = p.staging_reps * (moved / 8e9 + (cfg.untouched ? S->bytes / 2e9 : 0) + 0.3);
    measure(ctx, runs, cfg.name(), need, [&] { return staging_run(*S, cfg, ctx.ops, p.staging_reps); });
  }
}

// ---------------------------------------------------------------- GEMM ----

/// cuBLAS through dlopen: the probe starts where libcublas is missing, and
/// the GEMM section then reports why.
struct cublas_api {
  void* lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasGetVersion_v2) get_version = nullptr;
  decltype(&cublasDgemm_v2) dgemm = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  std::string path;
};

std::unique_ptr<cublas_api> open_cublas() {
  const std::string major = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::vector<std::string> names = {major, "libcublas.so"};
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(env)) names.push_back(std::string(home) + "/lib64/" + major);
  names.push_back("/usr/local/cuda/lib64/" + major);
  auto api = std::make_unique<cublas_api>();
  std::string tried;
  for (const auto& name : names) {
    api->lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->lib) {
      api->path = name;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + name;
  }
  if (!api->lib) throw std::runtime_error("cuBLAS not found (tried " + tried + ")");
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api->lib, name));
    if (!fn) throw std::runtime_error(std::string("cuBLAS lacks ") + name);
  };
  sym(api->create, "cublasCreate_v2");
  sym(api->destroy, "cublasDestroy_v2");
  sym(api->set_stream, "cublasSetStream_v2");
  sym(api->get_version, "cublasGetVersion_v2");
  sym(api->dgemm, "cublasDgemm_v2");
  sym(api->sgemm, "cublasSgemm_v2");
  return api;
}

void check_blas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " returned status " + std::to_string(status));
}

/// A DMA loop on two streams of its own: 1 GiB host to device and 1 GiB
/// back per iteration, from pinned memory, until stopped.
class background_dma {
 public:
  background_dma() : up_(GiB), down_(GiB), dev_up_(GiB), dev_down_(GiB) {}
  void start() {
    halt();
    stop_ = false;
    started_ = false;
    iterations_ = 0;
    error_ = nullptr;
    thread_ = std::thread([this] { loop(); });
    wait_until([&] { return started_.load(); }, nullptr, "the DMA loop to start", 10);
  }
  /// Stops the loop; returns its GB/s (both directions) over the iterations it completed.
  double stop() {
    halt();
    if (error_) std::rethrow_exception(error_);
    if (iterations_ == 0) throw std::runtime_error("the DMA loop completed no iteration");
    return 2.0 * GiB * iterations_ / (last_done_ - first_start_) / 1e9;
  }
  /// Stops the loop, if it runs, and waits for its iteration in flight.
  void halt() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  ~background_dma() { halt(); }

 private:
  void loop() {
    try {
      first_start_ = now_s();
      while (!stop_) {
        enqueue_pieces(dev_up_.p, up_.p, GiB, 64 * MiB, cudaMemcpyHostToDevice, s_up_.s);
        enqueue_pieces(down_.p, dev_down_.p, GiB, 64 * MiB, cudaMemcpyDeviceToHost, s_down_.s);
        started_ = true;
        CHECK(cudaStreamSynchronize(s_up_.s));
        CHECK(cudaStreamSynchronize(s_down_.s));
        last_done_ = now_s();
        ++iterations_;
      }
    } catch (...) {
      error_ = std::current_exception();
      started_ = true;
    }
  }
  pinned_buffer up_, down_;
  device_buffer dev_up_, dev_down_;
  stream_handle s_up_, s_down_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, started_{false};
  long iterations_ = 0;
  double first_start_ = 0, last_done_ = 0;  // written by the loop, read after the join
  std::exception_ptr error_;
};

/// Device operands of the largest shape, filled per element type.
struct gemm_operands {
  device_buffer a, b, c;
  gemm_operands(std::size_t a_bytes, std::size_t b_bytes, std::size_t c_bytes)
      : a(a_bytes), b(b_bytes), c(c_bytes) {}
  template <class T>
  void fill() {
    fill_matrix<T><<<1024, 256>>>(reinterpret_cast<T*>(a.p), a.bytes / sizeof(T));
    fill_matrix<T><<<1024, 256>>>(reinterpret_cast<T*>(b.p), b.bytes / sizeof(T));
    launch_check("fill_matrix");
    CHECK(cudaMemset(c.p, 0, c.bytes));
    CHECK(cudaDeviceSynchronize());
  }
};

/// TFLOP/s of C = A B (column-major, m x k times k x n), each sample at
/// least ~20 ms of products, optionally while a background DMA loop runs.
template <class T>
json gemm_rate(const cublas_api& blas, cublasHandle_t handle, cudaStream_t s, gemm_operands& ops, int m,
               int n, int k, int reps, background_dma* load) {
  const T alpha = 1, beta = 0;
  auto product = [&] {
    if constexpr (std::is_same_v<T, double>) {
      check_blas(
          blas.dgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                     reinterpret_cast<const double*>(ops.a.p), m, reinterpret_cast<const double*>(ops.b.p), k,
                     &beta, reinterpret_cast<double*>(ops.c.p), m),
          "cublasDgemm");
    } else {
      check_blas(
          blas.sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                     reinterpret_cast<const float*>(ops.a.p), m, reinterpret_cast<const float*>(ops.b.p), k,
                     &beta, reinterpret_cast<float*>(ops.c.p), m),
          "cublasSgemm");
    }
  };
  double t0 = now_s();
  product();  // warm-up, and a first estimate of one product's time
  CHECK(cudaStreamSynchronize(s));
  const int per_sample = std::clamp(static_cast<int>(std::ceil(0.02 / (now_s() - t0))), 1, 100);
  event_handle begin, end;
  std::vector<double> tflops;
  struct halt_on_exit {  // a failed product must not leave the loop running
    background_dma* load;
    ~halt_on_exit() {
      if (load) load->halt();
    }
  } guard{load};
  if (load) load->start();
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(begin.e, s));
    for (int i = 0; i < per_sample; ++i) product();
    CHECK(cudaEventRecord(end.e, s));
    CHECK(cudaEventSynchronize(end.e));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin.e, end.e));
    tflops.push_back(2.0 * m * n * k * per_sample / (ms * 1e-3) / 1e12);
  }
  json j = summary(tflops, "tflops", true);
  if (load) j["concurrent_dma_gbps"] = load->stop();
  j["products_per_sample"] = per_sample;
  return j;
}

void section_gemm(context& ctx) {
  json& sec = begin_section(ctx, "gemm", "cuBLAS DGEMM and SGEMM, alone and beside a 1 GiB H2D+D2H DMA loop");
  std::unique_ptr<cublas_api> blas;
  std::unique_ptr<gemm_operands> ops;
  std::unique_ptr<background_dma> load;
  std::unique_ptr<stream_handle> stream;
  cublasHandle_t handle = nullptr;
  measure(ctx, sec, "setup", 5, [&] {
    blas = open_cublas();
    std::size_t a = 0, b = 0, c = 0;
    for (const auto& shape : ctx.p.gemm_shapes) {
      const std::size_t m = shape[0], n = shape[1], k = shape[2];
      a = std::max(a, m * k * sizeof(double));
      b = std::max(b, k * n * sizeof(double));
      c = std::max(c, m * n * sizeof(double));
    }
    ops = std::make_unique<gemm_operands>(a, b, c);
    load = std::make_unique<background_dma>();
    stream = std::make_unique<stream_handle>();
    check_blas(blas->create(&handle), "cublasCreate");
    check_blas(blas->set_stream(handle, stream->s), "cublasSetStream");
    int version = 0;
    check_blas(blas->get_version(handle, &version), "cublasGetVersion");
    json j;
    j["library"] = blas->path;
    j["cublas_version"] = version;
    j["math_mode"] = "default (DGEMM may use FP64 tensor cores; SGEMM is FP32, no TF32)";
    return j;
  });
  if (!handle) return;
  int filled_as = 0;  // the element type the operands hold: 0 none, 1 double, 2 float
  for (bool dbl : {true, false}) {
    for (const auto& shape : ctx.p.gemm_shapes)
      for (bool with_dma : {false, true}) {
        const int m = shape[0], n = shape[1], k = shape[2];
        const std::string name = std::string(dbl ? "double " : "float ") + std::to_string(m) + "x" +
                                 std::to_string(n) + "x" + std::to_string(k) +
                                 (with_dma ? " with DMA" : " alone");
        const double need = (ctx.p.gemm_reps + 1) * std::max(0.03, 2.0 * m * n * k / 40e12) + 0.3;
        measure(ctx, sec, name, need, [&] {
          if (filled_as != (dbl ? 1 : 2)) {
            dbl ? ops->fill<double>() : ops->fill<float>();
            filled_as = dbl ? 1 : 2;
          }
          background_dma* bg = with_dma ? load.get() : nullptr;
          json j = dbl ? gemm_rate<double>(*blas, handle, stream->s, *ops, m, n, k, ctx.p.gemm_reps, bg)
                       : gemm_rate<float>(*blas, handle, stream->s, *ops, m, n, k, ctx.p.gemm_reps, bg);
          j["m"] = m;
          j["n"] = n;
          j["k"] = k;
          return j;
        });
      }
  }
  // The shapes the runtime measures (src/core/product_rates.cpp), double
  // alone: a 4096 reference, each extent alone at 64 ... 2048, all one less.
  std::vector<std::array<int, 3>> curve{{4096, 4096, 4096}, {4095, 4095, 4095}};
  for (int axis = 0; axis < 3; ++axis)
    for (int e = 64; e < 4096; e *= 2) {
      std::array<int, 3> x{4096, 4096, 4096};
      x[static_cast<std::size_t>(axis)] = e;
      curve.push_back(x);
    }
  if (filled_as != 1) ops->fill<double>();
  for (const auto& x : curve) {
    const std::string name =
        "double " + std::to_string(x[0]) + "x" + std::to_string(x[1]) + "x" + std::to_string(x[2]) + " alone";
    bool done = false;
    sec.each_member([&](const std::string& k, const json&) { done = done || k == name; });
    if (done) continue;
    measure(ctx, sec, name, (ctx.p.gemm_reps + 1) * 0.03 + 0.3, [&] {
      json j = gemm_rate<double>(*blas, handle, stream->s, *ops, x[0], x[1], x[2], ctx.p.gemm_reps, nullptr);
      j["m"] = x[0];
      j["n"] = x[1];
      j["k"] = x[2];
      return j;
    });
  }
  (void)blas->destroy(handle);
}

// ---------------------------------------------------------------- main ----

/// Why there is no usable GPU, or empty when there is one.
std::string gpu_absence() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (count == 0) return "cudaGetDeviceCount: no device";
  const cudaError_t init = cudaSetDevice(0) == cudaSuccess ? cudaFree(nullptr) : cudaGetLastError();
  if (init != cudaSuccess)
    return std::string("initializing GPU 0: ") + cudaGetErrorName(init) + ": " + cudaGetErrorString(init);
  return {};
}

json options_json(const options& o, const plan& p) {
  json j;
  j["quick"] = o.quick;
  j["max_seconds"] = p.max_seconds;
  j["staging_bytes_per_direction"] = p.staging_bytes;
  json only;
  for (const auto& s : o.only) only.push_back(s);
  j["only"] = o.only.empty() ? json("every section") : only;
  return j;
}

int run(context& ctx) {
  ctx.root["probe"]["options"] = options_json(ctx.opt, ctx.p);
  ctx.root["probe"]["units"] = "gbps: 1e9 bytes/s; tflops: 1e12 flop/s; best and median of the repetitions";
  std::printf("staging_probe: machine\n");
  ctx.root["machine"] = machine_info();
  const std::string absent = gpu_absence();
  ctx.gpu = absent.empty();
  if (!ctx.gpu) {
    ctx.root["gpu"] = nullptr;
    ctx.root["no_gpu"] = absent;
    std::printf(
        "staging_probe: NO GPU (%s): the JSON gets the machine section%s and \"gpu\": null; run the probe"
        " on a machine with an NVIDIA GPU and its driver for the rest\n",
        absent.c_str(), ctx.wants("host_memcpy") ? ", host_memcpy" : "");
  } else {
    try {
      ctx.root["gpu"] = gpu_info(0);
      ctx.pci_bus = ctx.root["gpu"]["pci_bus_id"].string();
    } catch (const std::exception& e) {
      ctx.root["gpu"]["error"] = e.what();
      ++ctx.errors;
    }
    ctx.ops = load_memops();
    std::printf("staging_probe: GPU %s; stream memory operations %s\n",
                ctx.root["gpu"]["name"].string().c_str(),
                ctx.ops.usable ? "usable" : ("not usable: " + ctx.ops.why).c_str());
  }
  ctx.save();
  const std::map<std::string, void (*)(context&)> sections = {{"dma", section_dma},
                                                              {"stream_memops", section_stream_memops},
                                                              {"host_functions", section_host_functions},
                                                              {"host_memcpy", section_host_memcpy},
                                                              {"pinning", section_pinning},
                                                              {"staging", section_staging},
                                                              {"gemm", section_gemm}};
  for (const auto& name : all_sections)
    if (ctx.wants(name)) sections.at(name)(ctx);
  json& s = ctx.root["summary"];
  s["measurements"] = ctx.measured;
  s["errors"] = ctx.errors;
  s["skipped_for_time"] = ctx.skipped;
  ctx.save();
  std::printf(
      "\nstaging_probe: %d measurements, %d failed, %d skipped for the time limit, %.0f s; JSON in %s\n",
      ctx.measured, ctx.errors, ctx.skipped, now_s() - ctx.start, ctx.opt.json_path.c_str());
  if (!ctx.gpu) return 3;
  return ctx.errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  context ctx;
  try {
    ctx.opt = parse_options(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "staging_probe: %s\n", e.what());
    print_usage(stderr);
    return 2;
  }
  ctx.p = make_plan(ctx.opt);
  try {
    return run(ctx);
  } catch (const std::exception& e) {  // outside any measurement: the machine section or the JSON file
    std::fprintf(stderr, "staging_probe: %s\n", e.what());
    return 1;
  }
}
