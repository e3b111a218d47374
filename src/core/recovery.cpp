#include "core/recovery.hpp"

#include <algorithm>
#include <cstring>

#include "core/chunk_pipeline.hpp"
#include "core/chunk_work.hpp"

namespace oa::detail {

namespace {

/// Waits for the events of queued host work; returns the first error, or `first`.
std::exception_ptr wait_all(device& host, const std::vector<event>& done, std::exception_ptr first) {
  for (const event& e : done)
    if (e)
      if (std::exception_ptr err = host.synchronize_event(e); err && !first) first = err;
  return first;
}

/// Runs `n` launches on the host over `nstreams` slots laid out as `HL`
/// (launch_for(k, slot) makes the k-th); returns the first error.
template <class LaunchFor>
std::exception_ptr run_over_host_slots(device& host, const stage_layout& HL, std::size_t n, std::size_t chunk_units,
                                       std::size_t nstreams, LaunchFor&& launch_for) {
  std::vector<event> done(n);
  std::exception_ptr first;
  slots_guard guard;  // declared after what its queued work touches
  try {
    guard.assign(nstreams);
    for (auto& sl : guard.slots) allocate_slot(host, sl, HL, chunk_units, 0);
    for (std::size_t k = 0; k < n; ++k) {
      const slot& sl = guard.slots[k % nstreams];
      host.launch_async(launch_for(k, sl), sl.stream.id());
      done[k] = host.record_event(sl.stream.id());
    }
  } catch (...) {
    first = std::current_exception();
  }
  first = wait_all(host, done, first);
  for (auto& sl : guard.slots) sl.stream.reset();  // waits; errors were taken from the events
  return first;
}

/// rerun_on_host for a fused stage: each chunk through the generated
/// kernel's description on the caller's data in place, its blocks' partials
/// written where the device's would have been.
std::exception_ptr rerun_fused_on_host(device& host, const stage& s, const std::vector<call_node>& nodes,
                                       const stage_layout& HL, const std::vector<split::range>& ranges,
                                       const std::vector<std::size_t>& which, std::size_t chunk_units,
                                       const std::vector<std::size_t>& partial_offsets,
                                       std::size_t chunk_partial_bytes, std::vector<std::byte>& partials,
                                       std::vector<std::size_t>& entries, std::size_t nstreams) {
  const std::size_t elements_per_unit = HL.values.empty() ? 1 : HL.values.front().v->shape.inner;
  return run_over_host_slots(host, HL, which.size(), chunk_units, nstreams, [&](std::size_t k, const slot& sl) {
    const split::range r = ranges[which[k]];
    const unsigned grid = fused_grid(r.size() * elements_per_unit);
    entries[which[k]] = grid;
    std::byte* partial = partials.data() + which[k] * chunk_partial_bytes;
    return launch{"host re-run",
                  [&s, &nodes, &HL, regs = chunk_regions(HL, sl.buffers, r), r, partial, &partial_offsets,
                   grid](const stream_view&) { run_fused_description(s, nodes, HL, regs, r, partial, partial_offsets, grid); },
                  {}};
  });
}

}  // namespace

std::exception_ptr rerun_on_host(device& host, const stage& s, const std::vector<call_node>& nodes,
                                 const std::unordered_set<const value_state*>& needed_on_host,
                                 const std::vector<split::range>& ranges, const std::vector<std::size_t>& which,
                                 std::size_t chunk_units, const stage_layout& L,
                                 const std::vector<std::size_t>& partial_offsets, std::size_t chunk_partial_bytes,
                                 std::vector<std::byte>& partials, std::vector<std::size_t>* fused_entries) {
  const stage_layout HL = layout_stage(s, nodes, placement_mode::in_place, needed_on_host);
  const std::size_t nstreams = std::min<std::size_t>(static_cast<std::size_t>(std::max(host.preferred_streams(), 1)), which.size());
  if (fused_entries) return rerun_fused_on_host(host, s, nodes, HL, ranges, which, chunk_units, partial_offsets,
                                                chunk_partial_bytes, partials, *fused_entries, nstreams);
  std::vector<std::byte> host_partials(which.size() * L.partial_bytes);
  const std::exception_ptr first =
      run_over_host_slots(host, HL, which.size(), chunk_units, nstreams, [&](std::size_t k, const slot& sl) {
        const split::range r = ranges[which[k]];
        std::byte* partial = host_partials.data() + k * L.partial_bytes;
        return launch{"host re-run",
                      [&s, &nodes, &HL, regs = chunk_regions(HL, sl.buffers, r), r, partial](const stream_view&) {
                        run_chunk(s, nodes, HL, regs, r, partial, false);
                      },
                      {}};
      });
  for (std::size_t k = 0; k < which.size(); ++k) {
    std::size_t prefix = 0;
    for (std::size_t q = 0; q < L.reductions.size(); ++q) {
      const std::size_t pb = L.reductions[q]->ops->partial_bytes;
      std::memcpy(partials.data() + which[k] * chunk_partial_bytes + partial_offsets[q],
                  host_partials.data() + k * L.partial_bytes + prefix, pb);
      prefix += pb;
    }
  }
  return first;
}

}  // namespace oa::detail
