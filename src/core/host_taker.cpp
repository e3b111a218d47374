#include "core/host_taker.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/chunk_work.hpp"

namespace oa::detail {

host_taker::host_taker(device& host, const stage& s, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, const stage_plan& plan,
                       undo_log& undo)
    : host_(host),
      s_(s),
      nodes_(nodes),
      plan_(plan),
      undo_(undo),
      layout_(layout_stage(s, nodes, placement_mode::in_place, needed_on_host)) {}

void host_taker::check(chunk_feed& feed, int d, pipeline_outcome& out) {
  // Kept until the taker ends: the host's threads never hold the last reference.
  checked_.push_back(std::move(queued_.front()));
  queued_.pop_front();
  const std::exception_ptr err = host_.synchronize_event(checked_.back());
  feed.finished(d);
  if (!err) {
    ++out.completed;
    return;
  }
  if (!out.stage_error) out.stage_error = err;
}

void host_taker::run(chunk_feed& feed, int d, pipeline_outcome& out) {
  const bool fused = plan_.mode == placement_mode::fused;
  const std::size_t elements_per_unit = layout_.values.empty() ? 1 : layout_.values.front().v->shape.inner;
  try {
    const std::size_t nstreams = static_cast<std::size_t>(std::max(host_.preferred_streams(), 1));
    guard_.assign(nstreams);
    for (auto& sl : guard_.slots) allocate_slot(host_, sl, layout_, feed.chunk_units(), 0);
    for (std::size_t n = 0;; ++n) {
      if (queued_.size() >= nstreams) check(feed, d, out);
      if (out.stage_error) break;
      const std::optional<std::size_t> j = feed.take(d);
      if (!j) break;
      const slot& sl = guard_.slots[n % nstreams];
      const split::range r = feed.ranges()[*j];
      std::byte* partial = feed.partials().data() + *j * plan_.chunk_partial_bytes;
      launch k{"host share", {}, {}};
      if (fused) {
        const unsigned grid = fused_grid(r.size() * elements_per_unit);
        feed.partial_entries()[*j] = grid;
        k.entry = [this, regs = chunk_regions(layout_, sl.buffers, r), r, partial, grid, j = *j](const stream_view&) {
          undo_.save(j);
          run_fused_description(s_, nodes_, layout_, regs, r, partial, plan_.partial_offsets, grid);
        };
      } else {
        // The host's partials, laid out one reduction after another, go where
        // the device's would have been.
        k.entry = [this, regs = chunk_regions(layout_, sl.buffers, r), r, partial, j = *j](const stream_view&) {
          undo_.save(j);
          std::vector<std::byte> mine(plan_.layout.partial_bytes);
          run_chunk(s_, nodes_, layout_, regs, r, mine.data(), false);
          std::size_t prefix = 0;
          for (std::size_t q = 0; q < plan_.layout.reductions.size(); ++q) {
            const std::size_t pb = plan_.layout.reductions[q]->ops->partial_bytes;
            std::memcpy(partial + plan_.partial_offsets[q], mine.data() + prefix, pb);
            prefix += pb;
          }
        };
      }
      host_.launch_async(std::move(k), sl.stream.id());
      queued_.push_back(host_.record_event(sl.stream.id()));
    }
  } catch (...) {
    if (!out.stage_error) out.stage_error = std::current_exception();
  }
  if (out.stage_error) feed.stop();
  while (!queued_.empty()) check(feed, d, out);
  if (out.stage_error) feed.stop();
  feed.leave(d);
  guard_.slots.clear();
}

}  // namespace oa::detail
