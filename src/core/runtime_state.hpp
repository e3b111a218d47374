#pragma once
// An oa::runtime's state: its configuration, devices (each with its
// resident values and failure state), cost models and log; and the
// functions that make its devices at first use. Evaluations hold `mutex`.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/perf_model.hpp"
#include "core/residency.hpp"
#include "oa/core/config.hpp"
#include "oa/core/device.hpp"
#include "oa/core/report.hpp"

namespace oa::detail {

/// An oa::runtime: its configuration, devices, resident values and log.
/// Graphs share it: it lives while calls recorded for it may still run.
struct runtime_state {
  std::mutex mutex;  // one evaluation at a time runs on the devices
  bool configured = false;
  config cfg;
  config_origin origin;  // where each setting of cfg came from, for error messages
  /// A device stages are offered to, with its residency table.
  struct device_entry {
    std::unique_ptr<device> dev;
    std::unique_ptr<residency> resident;  // values kept on dev (declared after it: destroyed first)
    std::string failed;                   // why dev is no longer offered stages
    std::string budget_from;              // where the user set its budget ("OA_DEVICE_MEMORY"); empty: its default
    // Stages (their calls) the host ran because a unit of theirs is larger
    // than the budget the user set: said once each on stderr.
    std::unordered_set<std::string> said_budget_too_small;
  };
  /// The devices, made from the configuration at first use: today the one
  /// config.device names; the scheduler offers stages to the first.
  std::vector<device_entry> devices;
  bool host_shares = false;  // OA_DEVICES lists the host: it takes chunks of the devices' element-wise stages
  // Why the configured device could not be made: every later stage (and
  // evaluation) fails with this one error, until the configuration changes,
  // so that a caller who received it is not told of it again by each stage.
  std::exception_ptr device_error;
  std::unique_ptr<device> host;
  // The host device a stage beside the devices runs on (scheduler's host
  // lane): streams and records of its own, so that the evaluating thread's
  // host work (a reduction's initial value, a fault's re-run) need not wait.
  std::unique_ptr<device> lane_host;
  run_log log;
  // The busy time of each kind of stage's kernels on each device, by the
  // bytes it touches, measured whenever one runs there alone and whole (in
  // memory, for these devices): what stages run together share besides the
  // link, so that one whose kernels bound it (a sort's runs) goes beside
  // one the link bounds.
  perf_models kernel_times;
  // OA_PLACEMENT=cost: the models, read from models_file once (the setting
  // may change between evaluations), written back when they learned.
  perf_models models;
  std::string models_file;
  bool models_read = false;
  bool models_learned = false;
  std::chrono::steady_clock::time_point models_saved{};
  /// Writes the models when they learned: at most once a second during a
  /// run (a write costs more than a small stage), and when the runtime ends.
  void save_models(bool now) noexcept {
    if (!models_learned || models_file.empty()) return;
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - models_saved < std::chrono::seconds(1)) return;
    models_learned = false;
    models_saved = t;
    try {
      models.save(models_file);
    } catch (const std::exception& e) {
      // The run goes on with the models in memory; the file is the user's to fix.
      std::fprintf(stderr, "%s\n", e.what());
    }
  }
  ~runtime_state() { save_models(true); }
  bool announced = false;
  std::size_t evaluations = 0;  // evaluations that ran stages, for the reports' numbers
  // What the Eigen hooks read on every call, without waiting for an
  // evaluation that holds `mutex`: the threshold, and their own log.
  std::atomic<bool> hook_ready{false};
  std::atomic<std::uint64_t> offload_gemm_min{0};
  std::atomic<std::uint64_t> offload_elements_min{0};
  std::atomic<std::uint64_t> offload_gemv_min{0};
  std::mutex declined_mutex;  // guards log.not_offloaded
  // Calls below the thresholds: counted apart, the common case kept cheap.
  std::atomic<std::uint64_t> gemm_below_threshold{0};
  std::atomic<std::uint64_t> gemv_below_threshold{0};
  std::atomic<std::uint64_t> cwise_below_threshold{0};
  std::atomic<std::uint64_t> reduction_below_threshold{0};
  void publish_hook_settings() {
    offload_gemm_min = cfg.offload_gemm_min;
    offload_elements_min = cfg.offload_elements_min;
    offload_gemv_min = cfg.offload_gemv_min;
    hook_ready = true;
  }
  /// Moves the cheap counts into the log (under declined_mutex).
  void fold_declined() {
    const auto fold = [&](std::atomic<std::uint64_t>& count, const char* op, const std::string& reason) {
      const std::uint64_t n = count.exchange(0);
      if (n == 0) return;
      log.add_declined(op, reason, "");
      for (auto& d : log.not_offloaded)
        if (d.op == op && d.reason == reason) d.count += n - 1;  // add_declined counted one
    };
    fold(gemm_below_threshold, "gemm",
         "below OA_OFFLOAD_GEMM_MIN (" + std::to_string(cfg.offload_gemm_min) + " multiply-adds)");
    fold(gemv_below_threshold, "gemv",
         "below OA_OFFLOAD_GEMV_MIN (" + std::to_string(cfg.offload_gemv_min) + " matrix coefficients)");
    const std::string elements_min =
        "below OA_OFFLOAD_ELEMENTS_MIN (" + std::to_string(cfg.offload_elements_min) + " coefficients)";
    fold(cwise_below_threshold, "cwise", elements_min);
    fold(reduction_below_threshold, "reduction", elements_min);
  }

  device_entry& first() { return devices.front(); }
  /// The devices not lost, in their order.
  std::vector<device_entry*> usable() {
    std::vector<device_entry*> out;
    for (auto& d : devices)
      if (d.failed.empty()) out.push_back(&d);
    return out;
  }
  /// The device a stage is offered to: the first not lost (the first when
  /// all are, which place_stage then declines).
  device_entry& target() {
    for (auto& d : devices)
      if (d.failed.empty()) return d;
    return devices.front();
  }
};


/// The configuration, read from OA_CONFIG and OA_* at first use (with `mutex` held).
const config& config_locked(runtime_state& s);
/// The devices, made at first use; the first. Throws the error that made
/// them fail, every time, until the configuration changes.
device& device_locked(runtime_state& s);
/// The host device, the fallback of every other.
device& host_locked(runtime_state& s);
/// The host device of the stage beside the devices (made at first use).
device& lane_host_locked(runtime_state& s);
/// Where the calling thread's runtime took setting `key` from, as messages
/// name it ("OA_DIST_TIMEOUT", "settings.json: key 'dist_timeout'").
std::string setting_origin(std::string_view key);

}  // namespace oa::detail
