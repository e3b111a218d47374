#pragma once
// The host's share of a stage spread over devices (OA_DEVICES with `host`):
// chunks it takes from the stage's feed run in place on the host device's
// streams, as a host re-run runs them (the CPU functions, or a fused
// stage's kernel description, so that each chunk leaves the partials a
// device's would), while the devices copy and compute theirs.

#include <cstddef>
#include <deque>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/chunk_feed.hpp"
#include "core/chunk_pipeline.hpp"
#include "core/stage_plan.hpp"
#include "core/undo_log.hpp"

namespace oa::detail {

class host_taker {
 public:
  host_taker(device& host, const stage& s, const std::vector<call_node>& nodes,
             const std::unordered_set<const value_state*>& needed_on_host, const stage_plan& plan, undo_log& undo);
  host_taker(const host_taker&) = delete;
  host_taker& operator=(const host_taker&) = delete;

  /// Takes chunks as taker `d` until the feed has none for it, and waits for
  /// them; a call's error goes to `out.stage_error` (and stops the feed).
  void run(chunk_feed& feed, int d, pipeline_outcome& out);

 private:
  void check(chunk_feed& feed, int d, pipeline_outcome& out);

  device& host_;
  const stage& s_;
  const std::vector<call_node>& nodes_;
  const stage_plan& plan_;
  undo_log& undo_;
  stage_layout layout_;  // in place on the host
  std::deque<event> queued_;
  std::vector<event> checked_;
  slots_guard guard_;  // last: its streams are waited for first
};

}  // namespace oa::detail
