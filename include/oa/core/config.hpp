#pragma once
// Runtime settings: defaults, then a JSON file (OA_CONFIG), then environment
// variables, then whatever the program sets through the API.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oa {

class config_origin;

/// OA_STDPAR_MIN: oa_offload(<target> STDPAR) calls of fewer elements stay
/// with the standard library, one threshold per family of calls: what the
/// engine costs against the library's parallel algorithms differs by family.
/// Measured with oa-stdpar-sweep on the host device, 2 cores, double, best of
/// 5, against libstdc++ on oneTBB: the library's time over the engine's in
/// three runs (bench/results/2026-11-25-cpu-2core-no-gpu). A family the
/// engine is slower for at 2^26, the largest size measured, defaults to 2^27.
/// On a GPU the engine pays from much smaller sizes: measure there.
struct stdpar_thresholds {
  // sort: 0.39-0.60x at 4096 elements, 1.25-1.51x at 8192, 1.8-4.2x from
  // 16384 to 2^26.
  std::uint64_t sort = std::uint64_t{1} << 13;
  // fill, copy, transform, for_each: a transform 0.10-0.58x at every size
  // from 2^12 to 2^26.
  std::uint64_t elementwise = std::uint64_t{1} << 27;
  // reduce, transform_reduce, count(_if), min/max_element: a dot product
  // 0.07-0.92x below 2^18, 0.6-1.6x from 2^18 to 2^21 (varying by run),
  // 0.45-0.93x from 2^22 to 2^26 in the two runs on an otherwise idle machine.
  std::uint64_t reduction = std::uint64_t{1} << 27;
  // inclusive_scan, exclusive_scan: 0.08-0.55x at every size from 2^12 to 2^26.
  std::uint64_t scan = std::uint64_t{1} << 27;
  bool operator==(const stdpar_thresholds&) const = default;
};

// Names (device, cuda_staging) are exact from every source: lower case, no
// spaces around them ("Emulated" and " emulated" are refused, naming the source).
struct config {
  std::string device = "auto";          // OA_DEVICE: auto, host, emulated, cuda
  // OA_DEVICES: several devices, a comma-separated list of specs (see
  // device_spec), e.g. "emulated:memory=32MiB:link_gbps=2,emulated:link_gbps=8"
  // or "cuda:0,cuda:1"; it replaces OA_DEVICE when set.
  std::string devices;
  // OA_SPREAD: how a stage's chunks are shared by several devices: balanced
  // (each takes the next chunk when it has room; a slower one stops taking
  // them once the others are predicted to finish the rest first) or even
  // (chunk i to device i mod n: the baseline balanced is compared with).
  std::string spread = "balanced";
  std::size_t device_memory = 0;        // OA_DEVICE_MEMORY: bytes; 0 = device default
  int streams = 0;                      // OA_STREAMS: 1-64; 0 = device default
  std::size_t chunk_bytes = 0;          // OA_CHUNK_BYTES: override of the planner; 0 = planned
  std::size_t host_threshold = std::size_t{1} << 20;  // OA_HOST_THRESHOLD: stages whose data is smaller run on the host device
  // OA_PLACEMENT: threshold (OA_HOST_THRESHOLD decides between the host and
  // the device) or cost (the side predicted to finish first, from models of
  // the times measured so far: src/core/placer.hpp).
  std::string placement = "threshold";
  std::string perf_models;              // OA_PERF_MODELS: file the cost models are read from and kept in; empty: this run only
  std::string report;                   // OA_REPORT: JSON run report written at exit
  std::string trace;                    // OA_TRACE: Chrome/Perfetto trace written at exit
  double link_gbps = 0;                 // OA_LINK_GBPS: emulated link, GB/s (1e9 bytes/s) per direction, at most 1e6; 0 = unthrottled
  std::uint64_t fail_launch = 0;        // OA_FAIL_LAUNCH: emulated fault injection, Nth launch fails
  std::uint64_t fail_copy = 0;          // OA_FAIL_COPY: emulated fault injection, Nth copy fails
  std::uint64_t fail_fill = 0;          // OA_FAIL_FILL: emulated fault injection, Nth staging fill fails
  std::uint64_t fail_drain = 0;         // OA_FAIL_DRAIN: emulated fault injection, Nth staging drain fails
  double link_shared_gbps = 0;          // OA_LINK_SHARED_GBPS: emulated link, GB/s both directions share; 0 = no shared cap
  double link_latency_us = 0;           // OA_LINK_LATENCY_US: emulated link, microseconds per copy (0-1e6)
  // OA_DIST_TIMEOUT: seconds an oa::dist collective waits for every rank
  // before it fails naming those that did not arrive (0: no deadline).
  double dist_timeout = 300;
  std::size_t staging_slot_bytes = 0;   // OA_STAGING_SLOT_BYTES: pinned staging slot size (>= 4 KiB); 0 = device default
  int staging_threads = 0;              // OA_STAGING_THREADS: staging fill and drain threads each, 0-64; 0 = device default
  bool fail_sticky = false;             // OA_FAIL_STICKY: the injected fault breaks the emulated device for good
  bool emulated_device_functions = false;  // OA_EMULATED_DEVICE_FUNCTIONS: emulated device runs device functions' host twins
  bool emulated_fused = false;  // OA_EMULATED_FUSED: emulated device takes stages as one generated kernel per chunk
  // OA_KEEP_COPIES: element-wise stages copy values that fit into whole copies
  // on the device and keep them for later stages and evaluations (read again
  // once their host bytes are found unchanged); 0: chunk buffers only.
  bool keep_copies = true;
  bool sequential = false;              // OA_SEQUENTIAL: one chunk at a time on one stream (baseline)
  bool serial_stages = false;           // OA_SERIAL_STAGES: no stage runs beside another (baseline)
  std::string cuda_staging = "pinned";  // OA_CUDA_STAGING: pinned (staging buffers) or register (pin the stage's host arrays)
  int progress = -1;                    // OA_PROGRESS: 1 on, 0 off, -1 = when stderr is a terminal
  bool verbose = false;                 // OA_VERBOSE
  // OA_OFFLOAD_GEMM_MIN: Eigen products (oa_offload) of fewer multiply-adds
  // (m n k) stay with Eigen: the engine's fixed costs outweigh what it gains.
  // Measured with oa-offload-sweep on the host device, 2 cores: 0.94x Eigen
  // at n = 144, 1.5x at n = 161 (2^22 ~ 161^3).
  std::uint64_t offload_gemm_min = std::uint64_t{1} << 22;
  // OA_OFFLOAD_ELEMENTS_MIN: coefficient-wise Eigen assignments and
  // reductions (oa_offload) of fewer coefficients stay with Eigen. Measured
  // the same way: 1.02x at 393216, 1.54x at 2^19.
  std::uint64_t offload_elements_min = std::uint64_t{1} << 19;
  // OA_OFFLOAD_GEMV_MIN: Eigen matrix-vector products (oa_offload) whose
  // matrix has fewer coefficients (m k) stay with Eigen, which runs them on
  // one thread; above it the engine splits them over the host's cores.
  // Measured with oa-offload-sweep --op gemv, host device, 2 cores: Eigen is
  // faster while A fits in the caches (double 0.83x at 1448^2, 1.32x at
  // 1600^2; float 0.73x at 2048^2, 1.27x at 2896^2); 2^23 suits both.
  std::uint64_t offload_gemv_min = std::uint64_t{1} << 23;
  stdpar_thresholds stdpar_min;  // OA_STDPAR_MIN: per family of STDPAR calls (above)

  /// Defaults overlaid with OA_CONFIG's JSON file and then OA_* variables,
  /// then validated; `origins`, when given, learns where each setting came from.
  static config from_environment(config_origin* origins = nullptr);
  /// The same without the final check, for a program whose own options
  /// override some settings before it validates the result. The settings
  /// named in `replaced` (keys, as config_keys() names them) are not read
  /// from the file or the variables at all: a value an option replaces is
  /// never checked, however malformed.
  static config read_environment(config_origin* origins = nullptr,
                                 const std::vector<std::string_view>& replaced = {});
  /// Overlays the keys of a JSON object (same names as the fields above),
  /// each checked as validate() does; errors name `source` and the key.
  void merge_json(const std::string& json_text, const std::string& source, config_origin* origins = nullptr);
};

/// One device of OA_DEVICES, written `kind[:key=value]...`: "cuda:1" (GPU 1),
/// "emulated:memory=32MiB:link_gbps=2:link_shared_gbps=3:latency_us=5", or
/// "host": the host takes a share of the chunks of the devices' stages.
/// Emulated devices take the fault injections fail_launch=N, fail_copy=N,
/// fail_fill=N, fail_drain=N and sticky=1 per device (OA_FAIL_* apply to OA_DEVICE's device only); what a
/// spec leaves out comes from the one-device settings (OA_DEVICE_MEMORY,
/// OA_LINK_GBPS, ...).
struct device_spec {
  std::string text;  // as written, for messages
  std::string kind;  // emulated, cuda or host
  int ordinal = 0;   // cuda: which GPU
  std::optional<std::size_t> memory;
  std::optional<double> link_gbps, link_shared_gbps, latency_us;
  std::uint64_t fail_launch = 0, fail_copy = 0, fail_fill = 0, fail_drain = 0;
  bool sticky = false;
};

/// Parses OA_DEVICES; throws oa::config_error naming `what`, the spec and
/// the part on anything malformed, unknown or out of range.
std::vector<device_spec> parse_device_specs(const std::string& text, const std::string& what);

/// Where the settings of a config came from, as error messages name them:
/// "OA_STREAMS", "settings.json: key 'streams'", "set_config: streams", "--streams".
class config_origin {
 public:
  /// Every setting at its default ("streams (default)").
  config_origin() = default;
  /// Every setting given through `source` ("set_config" names "set_config: streams").
  explicit config_origin(std::string source) : source_(std::move(source)) {}

  /// How messages name where setting `key` (a field name above) came from.
  std::string where(std::string_view key) const;
  /// Setting `key` came from `where`.
  void set(std::string_view key, std::string where);

 private:
  std::string source_;
  std::vector<std::pair<std::string, std::string>> named_;
};

/// Checks every setting of `c`, whatever its source: values in range, a
/// report/trace file that can be written, an emulated device budget within
/// the machine's physical memory. Throws oa::config_error naming the first
/// bad setting as `origin` names it, e.g. "oa: OA_STREAMS: 1024 is out of
/// range (1-64, or 0 for the device's default)".
void validate(const config& c, const config_origin& origin);

/// The keys of the JSON file (the field names above), in the fields' order.
std::vector<std::string_view> config_keys();
/// The environment variable of a key ("streams" -> "OA_STREAMS").
std::string_view config_variable(std::string_view key);

/// Parses "64MiB", "1.5 GiB", "4096", "2GB" (decimal) into bytes (suffixes
/// up to EiB / EB); throws oa::config_error naming `what` on a malformed value
/// or one too large for size_t.
std::size_t parse_bytes(const std::string& text, const std::string& what);

}  // namespace oa
