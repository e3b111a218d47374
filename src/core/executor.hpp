#pragma once
// The executor: runs one stage chunk by chunk over a device's streams.

#include <string>
#include <unordered_set>
#include <vector>

#include "core/planner.hpp"
#include "core/residency.hpp"
#include "oa/core/device.hpp"
#include "oa/core/report.hpp"

namespace oa::detail {

class results_ahead;

/// A device lost in a stage it shared with others: why (empty: it was not),
/// and how many of its chunks (or tiles) ran on the host.
struct lost_device {
  std::string why;
  std::size_t reruns = 0;
};

struct run_options {
  int streams = 0;               // 0: the device's preference
  bool sequential = false;       // one chunk at a time on one stream (same chunk size)
  std::size_t chunk_bytes = 0;   // cap on a chunk's device bytes (OA_CHUNK_BYTES)
  bool progress = false;         // progress line on stderr for long stages
  std::string stage_name;        // "stage 2/3" for the progress line
  std::string placement_reason;
  std::vector<trace_event>* trace = nullptr;  // appended to when set
  residency* resident = nullptr;  // values resident on the stage's device: inputs read there, not copied in
  bool keep_result = false;       // contractions: keep the result resident for a later stage on this device
  bool result_on_host = true;     // contractions: the result must reach its host storage too
  bool whole_copies = true;       // element-wise stages: whole copies of inputs and outputs, kept (stage_plan::whole)
  bool spread_even = false;       // several devices: chunk i to device i mod n (OA_SPREAD=even)
  bool host_share = false;        // the host takes chunks of a spread stage too (OA_DEVICES lists it)
  std::vector<lost_device>* lost = nullptr;  // several devices: per device, whether it was lost in the stage
  results_ahead* ahead = nullptr;  // results' host storage made ahead of the stage (core/results_ahead.hpp)
};

/// Runs a stage on `dev`; chunks that fail with a device fault are re-run on
/// `host`. Afterwards every value the stage produces is ready or failed (an
/// error inside a call fails every value of the stage and is rethrown where
/// those values are asked for). Returns what was measured.
stage_report run_stage(const stage& s, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& host,
                       const run_options& opt);

/// The same over several devices at once (element-wise stages): each runs
/// chunks of the stage from a shared feed (core/chunk_feed.hpp), reading the
/// host's data; the chunks of a device that fails go to the others, and
/// those it faulted on to the host.
stage_report run_stage(const stage& s, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, const std::vector<device*>& devs,
                       device& host, const run_options& opt);

/// Runs a contraction stage (one call, see oa/core/contraction.hpp) tile by
/// tile on `dev`; on a device fault, again on `host`. Afterwards its result
/// is ready or failed; a failure leaves the caller's C as it was.
stage_report run_contraction(const stage& s, const std::vector<call_node>& nodes, device& dev, device& host,
                             const run_options& opt);

/// The same over several devices: C cut along its longer side into one
/// block per device, in proportion to their links, each block's tiles run by
/// its device (side by side); a device lost leaves the tiles of its block it
/// did not finish to the host. A failure anywhere puts all of C back.
stage_report run_contraction(const stage& s, const std::vector<call_node>& nodes, const std::vector<device*>& devs,
                             device& host, const run_options& opt);

/// Calls whose inputs failed are cancelled: their values fail with the same
/// error and they are dropped from the stage. With `why`, an empty one says
/// which were and why (a report's error: "std::transform, std::for_each:
/// not run: what they read failed: <the error>").
stage cancel_failed(const stage& s, const std::vector<call_node>& nodes, std::string* why = nullptr);
/// A caller's object resized since the call was recorded would be read or
/// written out of bounds: refuses the stage (oa::invalid_argument) before any work.
void check_caller_objects(const stage& s, const std::vector<call_node>& nodes);

/// A stage's report before it runs: its calls, device, placement and units.
stage_report report_for(const stage& s, const std::vector<call_node>& nodes, const device& dev,
                        const run_options& opt);
/// Adds what `dev` recorded since the last take (bytes, busy times, and the
/// trace when asked for) to a stage's report.
void add_device_records(stage_report& rep, device& dev, const run_options& opt);

/// Marks every value produced by the calls of `s` as failed with `e`.
void fail_stage(const stage& s, const std::vector<call_node>& nodes, std::exception_ptr e);

}  // namespace oa::detail
