#include "core/chunk_pipeline.hpp"

#include <algorithm>

#include "core/chunk_work.hpp"
#include "core/progress.hpp"
#include "oa/core/error.hpp"

namespace oa::detail {

void allocate_slot(device& dev, slot& s, const stage_layout& L, std::size_t chunk_units,
                   std::size_t device_partial_bytes) {
  s.stream = oa::stream(dev);
  for (std::size_t b = 0; b < L.buffer_unit_bytes.size(); ++b) {
    const std::size_t ub = L.buffer_unit_bytes[b], fixed = L.buffer_fixed_bytes[b];
    if (ub == 0 && fixed == 0) {  // a value's own buffer, pointed into its whole copy per chunk
      s.buffers.push_back(nullptr);
      continue;
    }
    s.memory.emplace_back(dev, std::max<std::size_t>(ub * chunk_units + fixed, 1), s.stream.id());
    s.buffers.push_back(s.memory.back().data());
  }
  if (device_partial_bytes) {
    s.memory.emplace_back(dev, device_partial_bytes, s.stream.id());
    s.partials = s.memory.back().data();
  }
}

chunk_pipeline::chunk_pipeline(const stage& s, const std::vector<call_node>& nodes, const stage_plan& plan,
                               device& dev, const run_options& opt, whole_copies& whole,
                               const std::vector<std::pair<std::size_t, std::size_t>>& updates, undo_log& undo)
    : s_(s),
      nodes_(nodes),
      plan_(plan),
      dev_(dev),
      opt_(opt),
      whole_(whole),
      updates_(updates),
      undo_(undo),
      chunks_(plan.chunks),
      nslots_(plan.slots),
      pinned_{dev, {}} {
  const std::string& first = nodes[static_cast<std::size_t>(s.calls.front())].name;
  launch_name_ = s.calls.size() == 1 ? first : first + " (+" + std::to_string(s.calls.size() - 1) + ")";
}

void chunk_pipeline::allocate(pipeline_outcome& out, bool fixed_chunks) {
  const stage_layout& L = plan_.layout;
  const bool in_place = plan_.mode == placement_mode::in_place;
  try {
    for (;;) {
      try {
        guard_.assign(static_cast<std::size_t>(nslots_));
        for (auto& sl : guard_.slots)
          allocate_slot(dev_, sl, L, chunks_.chunk_units, in_place ? 0 : plan_.chunk_partial_bytes);
        allocated_ = nslots_;
        break;
      } catch (const device_out_of_memory&) {
        for (auto& sl : guard_.slots) sl.release();
        const bool smaller = fixed_chunks ? nslots_ > 1 : plan_.shrink(chunks_, nslots_);
        if (fixed_chunks && smaller) nslots_ /= 2;
        if (!smaller) {
          throw plan_error("oa: " + plan_.what + ": the device could not allocate " +
                           (fixed_chunks ? "one chunk (" + std::to_string(plan_.slot_mem.bytes(chunks_.chunk_units))
                                         : "one unit (" + std::to_string(plan_.slot_mem.bytes(1))) +
                           " bytes) on one stream within its budget of " + std::to_string(dev_.memory_budget()) +
                           " bytes");
        }
        chunks_.chunks = (s_.units + chunks_.chunk_units - 1) / chunks_.chunk_units;
      }
    }
  } catch (const device_fault&) {
    out.lost = std::current_exception();
    for (auto& sl : guard_.slots) sl.release();
    guard_.slots.clear();
  }
}

region chunk_pipeline::in_whole(std::size_t k, const region& host_chunk) const {
  return region{whole_.copies[k].data() + (host_chunk.data - whole_.host[k].data), host_chunk.width,
                host_chunk.rows, host_chunk.pitch};
}

/// Waits for the oldest chunk queued (j): a device fault re-runs it on the
/// host, another error fails the stage.
void chunk_pipeline::check(chunk_feed& feed, int d, std::size_t j, pipeline_outcome& out) {
  // The event stays until the pipeline ends (after wait_idle): the device's
  // threads then never hold the last reference to what it carries.
  checked_.push_back(std::move(queued_.front().second));
  queued_.pop_front();
  std::exception_ptr err = dev_.synchronize_event(checked_.back());
  feed.finished(d);
  if (!err) {
    ++out.completed;
    return;
  }
  const slot& sl = guard_.slots[slot_of_[j]];
  try {
    dev_.synchronize(sl.stream.id());  // clears the stream's error
  } catch (...) {
  }
  try {
    std::rethrow_exception(err);
  } catch (const device_fault& f) {
    out.faulted.push_back(j);
    // A sticky fault loses the device: the rest of the stage, and later
    // stages, run elsewhere. After a transient one the device goes on.
    if (f.sticky() && !out.lost) out.lost = err;
  } catch (...) {
    if (!out.stage_error) out.stage_error = err;
  }
}

/// Queues chunk i on its slot: copies in, the launch, copies out, an event.
void chunk_pipeline::submit(chunk_feed& feed, std::size_t i, std::size_t on, stage_report& rep) {
  const stage_layout& L = plan_.layout;
  const bool in_place = plan_.mode == placement_mode::in_place;
  const bool fused = plan_.mode == placement_mode::fused;
  slot_of_[i] = on;
  slot& sl = guard_.slots[on];
  const split::range r = feed.ranges()[i];
  // The chunk's bytes of the caller's objects are kept before any of its
  // work can write them: by the worker itself where kernels run in place.
  if (!in_place) undo_.save(i);
  std::vector<region> regs = chunk_regions(L, sl.buffers, r);
  std::byte* host_partial = feed.partials().data() + i * plan_.chunk_partial_bytes;
  if (!in_place) {
    for (std::size_t k = 0; k < L.values.size(); ++k) {
      const stage_value& v = L.values[k];
      if (v.cls != value_class::input || v.buffer < 0) continue;
      const region host_chunk = v.v->ops->host_region(v.v->object, r);
      if (plan_.resident_in[k]) {
        regs[k] = residency::in_copy(*plan_.resident_in[k], host_chunk);
        if (v.loaded) rep.resident_bytes_saved += host_chunk.bytes();
      } else {
        if (whole_.copies[k].data()) regs[k] = in_whole(k, host_chunk);
        // An overwritten value's old bytes are not needed there.
        if (v.loaded) dev_.copy_to_device_async(regs[k], host_chunk, sl.stream.id());
      }
    }
    for (std::size_t k = 0; k < L.values.size(); ++k)
      if (L.values[k].cls == value_class::output && whole_.copies[k].data())
        regs[k] = in_whole(k, L.values[k].v->ops->host_region(L.values[k].v->object, r));
    for (const auto& [from, to] : updates_)
      if (L.buffer_unit_bytes[static_cast<std::size_t>(L.values[from].buffer)] == 0) regs[to] = regs[from];
  }
  std::byte* kernel_partial = in_place ? host_partial : sl.partials;
  launch k{launch_name_, {}, {}};
  if (fused) {
    const std::size_t elements = r.size() * L.values.front().v->shape.inner;
    // Values with a buffer of their own are read and written in their copies.
    std::vector<std::byte*> buffers = sl.buffers;
    for (std::size_t v = 0; v < L.values.size(); ++v)
      if (L.values[v].buffer >= 0 && L.buffer_unit_bytes[static_cast<std::size_t>(L.values[v].buffer)] == 0)
        buffers[static_cast<std::size_t>(L.values[v].buffer)] = regs[v].data;
    k.kernel = kernel_for_chunk(*plan_.kernel, plan_.source, s_, nodes_, buffers, sl.partials, elements,
                                plan_.partial_offsets);
    feed.partial_entries()[i] = k.kernel->grid;
    // Its description, for a device that runs it on the host (emulated).
    k.entry = [&s = s_, &nodes = nodes_, &L, regs, r, dev_partials = sl.partials, &offsets = plan_.partial_offsets,
               grid = k.kernel->grid](const stream_view&) {
      run_fused_description(s, nodes, L, regs, r, dev_partials, offsets, grid);
    };
  } else {
    undo_log* keep = in_place ? &undo_ : nullptr;
    k.entry = [&s = s_, &nodes = nodes_, &L, regs, r, kernel_partial, keep, i, twins = plan_.twins,
               buffers = &sl.buffers](const stream_view& stream) {
      if (keep) keep->save(i);
      run_chunk(s, nodes, L, regs, r, kernel_partial, twins, stream, buffers);
    };
  }
  dev_.launch_async(std::move(k), sl.stream.id());
  if (!in_place) {
    for (std::size_t k = 0; k < L.values.size(); ++k) {
      const stage_value& v = L.values[k];
      if (v.cls == value_class::output && v.buffer >= 0)
        dev_.copy_to_host_async(v.v->ops->host_region(v.v->object, r), regs[k], sl.stream.id());
    }
    for (std::size_t q = 0; q < L.reductions.size(); ++q) {
      const std::size_t bytes = feed.partial_entries()[i] * L.reductions[q]->ops->partial_bytes;
      dev_.copy_to_host_async({host_partial + plan_.partial_offsets[q], bytes, 1, bytes},
                              {sl.partials + plan_.partial_offsets[q], bytes, 1, bytes}, sl.stream.id());
    }
  }
  queued_.emplace_back(i, dev_.record_event(sl.stream.id()));
}

void chunk_pipeline::run(chunk_feed& feed, int d, pipeline_outcome& out, stage_report& rep) {
  const stage_layout& L = plan_.layout;
  slot_of_.assign(feed.count(), 0);
  checked_.reserve(feed.count());
  std::optional<std::size_t> partly;  // a chunk taken whose work is not all queued
  if (!out.lost && !guard_.slots.empty()) {
    try {
      // Host storage the stage copies from and to, offered to the device to pin.
      if (plan_.mode != placement_mode::in_place && s_.units > 0) {
        for (const auto& v : L.values) {
          if (v.buffer < 0 || v.cls == value_class::temporary || !v.v->object) continue;
          const region whole = v.v->ops->host_region(v.v->object, {0, s_.units});
          if (!whole.data || whole.bytes() == 0) continue;
          if (std::find(pinned_.used.begin(), pinned_.used.end(), whole.data) != pinned_.used.end()) continue;
          dev_.host_memory_use(whole.data, (whole.rows - 1) * whole.pitch + whole.width);
          pinned_.used.push_back(whole.data);
        }
      }
      if (plan_.kernel) {
        generated_kernel probe;
        probe.name = plan_.kernel->name;
        probe.source = plan_.source;
        dev_.prepare(probe);
      }
      const std::size_t nslots = opt_.sequential ? 1 : guard_.slots.size();
      for (std::size_t n = 0; !out.stage_error; ++n) {
        if (queued_.size() >= nslots) check(feed, d, queued_.front().first, out);  // the slot's previous chunk
        if (out.stage_error || out.lost) break;
        partly = feed.take(d);
        if (!partly) break;
        submit(feed, *partly, n % nslots, rep);
        partly.reset();
      }
    } catch (const device_fault&) {
      // The device refused work (it is lost, as a CUDA context is after a
      // kernel fault): what is queued drains below, the rest runs elsewhere.
      out.lost = std::current_exception();
    } catch (...) {
      if (!out.stage_error) out.stage_error = std::current_exception();
    }
    if (out.stage_error) feed.stop();
    while (!queued_.empty()) check(feed, d, queued_.front().first, out);
  }
  if (out.lost || guard_.slots.empty()) feed.leave(d);
  dev_.wait_idle();  // work of a chunk only partly queued, too
  rep.peak_device_bytes = dev_.peak_bytes();
  if (partly) {
    if (out.lost && !out.stage_error) out.faulted.push_back(*partly);
    feed.finished(d);
  }
  guard_.slots.clear();  // device memory back before any host re-run
}

}  // namespace oa::detail
