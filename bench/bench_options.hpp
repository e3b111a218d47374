#pragma once
// What every oa-bench workload takes from the command line (the paging
// workloads, gemm, the STL workloads), and how its oa modes configure the
// runtime.

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <oa/core/config.hpp>
#include <oa/core/report.hpp>
#include <oa/core/runtime.hpp>
#include <optional>
#include <iostream>
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
  int warmup = -1;  // untimed runs of each mode before its timed ones; -1: first_run() decides
  std::string host_memory = "pageable";  // where the workload's arrays live: pageable or pinned (oa's pool)
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

/// The chunks each device ran over a run's stages (oa::total adds them up by
/// device): {"emulated:0": 12, "emulated:1": 48}.
inline nlohmann::json device_chunks_json(const oa::stage_report& t) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [name, n] : t.chunks_by_device) o[name] = n;
  return o;
}

/// Whether the oa modes run on emulated devices (the banner says their
/// timings are not a GPU's).
inline bool emulated_run(const common_options& opt) {
  return opt.devices.empty() ? opt.device == "emulated" : opt.devices.find("emulated") != std::string::npos;
}

/// "device emulated" or "devices emulated:link_gbps=2,emulated:link_gbps=8", for messages.
inline std::string devices_text(const common_options& opt) {
  return opt.devices.empty() ? "device " + opt.device : "devices " + opt.devices;
}

/// The overlap of a run: the busiest phase's seconds over the wall time. A
/// stage shared by several devices reports each device's busy time added
/// up: per device, then.
inline double overlap_of(const oa::stage_report& t, double seconds) {
  std::size_t devices = 0;
  for (const auto& [name, n] : t.chunks_by_device) devices += name != "host";
  return std::max({t.h2d_seconds, t.compute_seconds, t.d2h_seconds}) /
         static_cast<double>(std::max<std::size_t>(devices, 1)) / seconds;
}

/// A record's fields for placement and several devices: threshold or cost,
/// the devices' list, how they share stages,
/// the chunks (tiles) each ran, and the device faults of the run (a device
/// lost, with the chunks the host ran again). With several devices, each
/// has its own link and budget, given in `devices`: the one-device fields
/// `link_gbps` and `device_memory_budget` are null.
inline void add_device_fields(nlohmann::json& record, const common_options& opt, const oa::stage_report& t,
                              bool oa_mode) {
  record["devices"] = oa_mode ? opt.devices : std::string();
  record["placement"] = oa_mode ? nlohmann::json(opt.placement) : nlohmann::json(nullptr);
  record["spread"] = oa_mode && !opt.devices.empty() ? nlohmann::json(opt.spread) : nlohmann::json(nullptr);
  record["device_chunks"] = device_chunks_json(t);
  record["device_fault"] = t.device_fault.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.device_fault);
  record["host_reruns"] = t.host_reruns;
  if (oa_mode && !opt.devices.empty()) {
    record["link_gbps"] = nullptr;
    record["device_memory_budget"] = nullptr;
  }
}

/// The number of each mode's first run: runs numbered below 1 warm up,
/// untimed (the process's one-off costs, its threads and first pages, are
/// not then the first mode's). --warmup N gives N; by default one when a
/// mode runs once, none when it runs several times (their best leaves a
/// first run's costs out already).
inline int first_run(const common_options& o) { return 1 - (o.warmup >= 0 ? o.warmup : o.repeat == 1 ? 1 : 0); }

/// "running sort, mode oa (repeat 2/3)" on stderr, before each run (a
/// warm-up's says so).
inline void announce_run(const std::string& workload, const std::string& mode, int rep, int repeat) {
  std::cerr << "running " << workload << ", mode " << mode;
  if (rep < 1) std::cerr << " (warm-up, untimed)";
  else if (repeat > 1) std::cerr << " (repeat " << rep << "/" << repeat << ")";
  std::cerr << std::endl;
}

/// One mode's outcome: its best time, the runtime's totals for that run
/// (oa modes), its error against the reference, or why it could not run.
struct mode_outcome {
  std::string mode;
  std::string device;
  double seconds = std::numeric_limits<double>::infinity();
  oa::stage_report total;
  std::size_t staged_bytes = 0;  // oa modes: bytes through the device's staging engine in that run
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
