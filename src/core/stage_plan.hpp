#pragma once
// A stage's plan: everything decided about it before it runs (where, how
// its values are laid out, its generated kernel, its chunks and pipeline
// slots). The executor only runs plans; an out-of-memory re-plans smaller.

#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/executor.hpp"
#include "core/kernel_source.hpp"
#include "core/planner.hpp"
#include "core/residency.hpp"

namespace oa::detail {

/// Blocks of a fused kernel per chunk: enough to fill a large GPU, few
/// enough that reduction partials stay small.
constexpr std::size_t max_blocks_per_chunk = 1024;

struct stage_plan {
  device* dev = nullptr;
  device* fallback = nullptr;  // where chunks the device faults on run again (the host)
  placement_mode mode = placement_mode::staged;
  bool twins = false;  // the calls' device functions (host twins on the emulated device), else CPU functions
  stage_layout layout;
  std::optional<kernel_source> kernel;  // fused: the stage as one generated kernel
  std::shared_ptr<const std::string> source;
  std::vector<std::size_t> partial_offsets;  // each reduction's entries within a chunk's partial area
  std::size_t chunk_partial_bytes = 0;       // per chunk: up to max_blocks_per_chunk entries when fused
  std::vector<residency::entry*> resident_in;  // per value: the resident copy read in place of copying in
  // Per value: copied in to (an input) or written in (an output) a whole copy
  // of its host storage, which stays on the device for later stages and
  // evaluations (residency) when the stage succeeds.
  std::vector<char> whole;
  std::size_t whole_bytes = 0;
  // The stage does not fit beside the copies pinned for it: it reads every
  // value from the host, so device-only copies are written back and the
  // copies unpinned (evicted by need) before it runs.
  bool release_pinned = false;
  slot_memory slot_mem;
  chunk_plan chunks;
  int slots = 1;                 // pipeline slots (one per stream)
  std::size_t bytes_per_unit = 0;
  std::string what;              // "stage 2/3 [vm::add, vm::mul] on emulated", for messages

  /// After an out-of-memory: half the chunk, then half the slots. False at
  /// one unit on one slot: nothing smaller to try.
  bool shrink(chunk_plan& c, int& nslots) const;
};

/// Where a stage runs, and why.
struct placement {
  device* where = nullptr;
  std::string reason;
  /// Nonzero when the host runs the stage because one unit of it does not
  /// fit the device's budget: the smallest budget that runs it there.
  std::size_t smallest_budget = 0;
  /// The staged layout the decision read (element-wise stages that reached
  /// it): cost placement reads its bytes rather than lay the stage out again.
  std::shared_ptr<const stage_layout> layout{};
};

/// The main device `dev`, unless it is the host device, it failed earlier
/// (`device_failed` says how), a call has no device function (no GPU entry,
/// for a product on a GPU), or the stage touches fewer bytes than
/// `host_threshold`, or one unit of a stage of device code (oa::kernel) is
/// larger than the device's budget: then `host`. Decided once per stage.
placement place_stage(const stage& s, const std::vector<call_node>& nodes,
                      const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& host,
                      std::size_t host_threshold, const std::string& device_failed);

/// Plans stage `s` (its cancelled calls already left out) on `dev`.
/// Throws oa::plan_error when the budget cannot hold one unit on one stream.
stage_plan plan_stage(const stage& s, const std::vector<call_node>& nodes,
                      const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& fallback,
                      const run_options& opt);

}  // namespace oa::detail
