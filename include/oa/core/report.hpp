#pragma once
// What the runtime measured: one record per evaluated stage, the device
// timeline behind it, and the writers of the JSON report and trace.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "oa/core/device.hpp"

namespace oa {

struct stage_report {
  std::vector<std::string> calls;  // annotated functions, in program order
  std::size_t evaluation = 0;      // the runtime's evaluation that ran it, from 1
  std::size_t stage = 0;           // its number in that evaluation, from 1 ("together with stages 1, 3")
  std::string op;                  // "gemm" for products, Eigen's "gemv", "cwise", "reduction", else "stage"
  std::string dims;                // products: "m=.. n=.. k=.."; Eigen assignments: "elements=.."
  std::string device;              // where the stage ran
  std::string placement_reason;    // why there
  std::size_t units = 0;
  std::size_t chunk_units = 0;
  std::size_t chunks = 0;
  int streams = 0;
  bool sequential = false;
  std::size_t bytes_per_unit = 0;   // device bytes per unit per pipeline slot
  std::size_t h2d_bytes = 0;
  std::size_t d2h_bytes = 0;
  std::size_t peak_device_bytes = 0;
  std::size_t device_chunks = 0;    // chunks the device completed
  // A stage spread over several devices: the chunks each completed, by name.
  std::vector<std::pair<std::string, std::size_t>> chunks_by_device;
  std::size_t host_reruns = 0;      // chunks re-run on the host after a device fault
  std::string device_fault;         // the fault that made the device refuse work during the stage
  std::size_t rollback_bytes = 0;   // copies of the caller's objects kept to undo a failed in-place update
  std::size_t resident_bytes_saved = 0;  // input bytes read from a copy already on the device, not copied in
  std::size_t resident_bytes = 0;   // copies (results, whole arrays) kept on the device for later stages
  std::size_t evicted_bytes = 0;    // resident values the pager evicted to make room for this stage
  double h2d_seconds = 0;           // busy time per phase (union of intervals)
  double compute_seconds = 0;
  double d2h_seconds = 0;
  // The staging engine's host work for pageable memory, in thread-seconds
  // (summed over its threads, which run side by side).
  double fill_seconds = 0;
  double drain_seconds = 0;
  double prefault_seconds = 0;
  double seconds = 0;               // wall time of the stage
  double predicted_seconds = 0;     // OA_PLACEMENT=cost: the time predicted where it ran (0: calibrating, or not by cost)
  std::string error;                // first error of a call in the stage, if any
  std::string tiling;               // contractions: the tile plan ("C tiles 2048x2048 (2x2), k steps of 512 (8), ...")
};

/// One track of a trace: a device stream or engine.
struct trace_event {
  std::string device;
  std::string track;
  std::string name;
  double begin = 0;  // seconds, process clock
  double end = 0;
  std::size_t bytes = 0;
  std::string stage;  // the calls of the stage it was part of ("" when none)
};

/// Busy time of one phase: the length of the union of its operations' intervals.
double busy_seconds(const std::vector<op_record>& ops, phase p);

/// Sums the reports of several stages (times and bytes add, peak is the max).
stage_report total(const std::vector<stage_report>& stages);
/// Adds one stage to a sum; `with_calls` lists its calls too.
void accumulate(stage_report& sum, const stage_report& s, bool with_calls = true);

/// What a process has run, bounded: the latest stages whole, older ones only
/// in a sum, so that a long-running program's report does not grow without end.
struct run_log {
  static constexpr std::size_t kept_stages = 1000;
  static constexpr std::size_t kept_trace_events = 200000;

  std::vector<stage_report> stages;  // the latest, in order
  std::size_t dropped = 0;           // older stages, folded into `earlier`
  stage_report earlier;              // their sum (calls not listed)
  std::vector<trace_event> trace;
  std::size_t dropped_trace_events = 0;
  std::vector<std::string> unobserved_errors;  // errors that no caller asked for
  /// Calls an Eigen hook saw and left to Eigen, counted by operation and reason.
  struct declined {
    std::string op;       // "gemm", ...
    std::string reason;   // "below OA_OFFLOAD_GEMM_MIN", ...
    std::size_t count = 0;
    std::string last;     // the dimensions of the latest one
  };
  std::vector<declined> not_offloaded;
  void add_declined(const std::string& op, const std::string& reason, const std::string& dims);

  void add(stage_report r);
  void add_trace(std::vector<trace_event>& events);
  /// Everything recorded: the kept stages and the sum of the dropped ones.
  stage_report total() const;
  void clear();
};

/// Writes the run report: {"stages": [...], "dropped_stages": n, "total": {...},
/// "unobserved_errors": [...]}.
void write_report_json(const std::string& path, const run_log& log);
/// Writes a Chrome/Perfetto trace: one track per stream and copy engine.
void write_trace_json(const std::string& path, const std::vector<trace_event>& events);

}  // namespace oa
