#pragma once
// What every oa-bench workload takes from the command line (the paging
// workloads, gemm, the STL workloads), and how its oa modes configure the
// runtime.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <oa/core/config.hpp>
#include <oa/core/report.hpp>
#include <oa/core/runtime.hpp>
#include <optional>
#include <string>
#include <vector>

namespace oa_bench {

struct common_options {
  // device, device_memory, streams and link_gbps: the configuration's
  // (OA_CONFIG, OA_*) unless given on the command line; `origin` says which.
  std::string device = "auto";
  std::string devices;                  // several devices (OA_DEVICES' specs); replaces `device` when set
  std::string spread = "balanced";      // how several devices share a stage's chunks
  std::string placement = "threshold";  // host or device: by OA_HOST_THRESHOLD, or by cost models
  std::size_t device_memory = 0;
  std::vector<std::string> modes;  // empty: the workload's defaults
  int streams = 0;
  double link_gbps = 0;
  std::uint64_t seed = 42;
  bool verify = false;
  int repeat = 1;
  oa::config_origin origin;
};

/// The runtime for an oa mode: the options' device, budget, streams and
/// link; `sequential` for mode sequential. OA_CHUNK_BYTES is kept.
inline void configure_oa_mode(const common_options& opt, bool sequential) {
  oa::config c = oa::current_config();
  c.device = opt.device;
  c.devices = opt.devices;
  c.spread = opt.spread;
  c.placement = opt.placement;
  c.device_memory = opt.device_memory;
  c.streams = opt.streams;
  c.link_gbps = opt.link_gbps;
  c.sequential = sequential;
  oa::set_config(c, opt.origin);
}

/// The chunks each device ran: {"emulated:0": 12, "emulated:1": 48}; one
/// device's name with all of them for stages on one device.
inline nlohmann::json device_chunks_json(const oa::stage_report& t) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [name, n] : t.chunks_by_device) o[name] = n;
  if (t.chunks_by_device.empty() && t.device_chunks) o[t.device] = t.device_chunks;
  return o;
}

/// One mode's outcome: its best time, the runtime's totals for that run
/// (oa modes), its error against the reference, or why it could not run.
struct mode_outcome {
  std::string mode;
  std::string device;
  double seconds = std::numeric_limits<double>::infinity();
  oa::stage_report total;
  std::optional<double> error;
  std::optional<std::string> failure;
  bool oa_mode() const { return mode == "oa" || mode == "sequential"; }
};

/// The best time of `mode` among `results`, when it ran.
inline std::optional<double> seconds_of(const std::vector<mode_outcome>& results, const std::string& mode) {
  for (const auto& r : results)
    if (r.mode == mode && !r.failure) return r.seconds;
  return std::nullopt;
}

}  // namespace oa_bench
