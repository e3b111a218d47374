#include "core/stage_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "oa/core/error.hpp"
#include "oa/core/pinned.hpp"

namespace oa::detail {

namespace {

std::string largest_unit(const stage_layout& L) {
  const stage_value* big = nullptr;
  for (const auto& v : L.values)
    if (!big || v.v->shape.unit_bytes() > big->v->shape.unit_bytes()) big = &v;
  if (!big) return {};
  return "; largest unit: " + big->v->label + ", " + std::to_string(big->v->shape.unit_bytes()) + " bytes";
}

/// Whether one unit of v (a row of a matrix split by rows, ...) lies in one
/// piece of its storage; a result not made yet is asked of a storage of
/// two units its split type makes. One that cannot be made to ask counts as
/// not in one piece: the stage then runs where no kernel indexes it.
bool unit_in_one_piece(const value_state& v) {
  if (v.object) return v.ops->host_region(v.object, {0, 1}).contiguous();
  try {
    split::shape two = v.shape;
    two.units = std::min<std::size_t>(two.units, 2);
    void* object = nullptr;
    const std::shared_ptr<void> owner = v.ops->make(two, v.state.get(), object);
    return object && v.ops->host_region(object, {0, 1}).contiguous();
  } catch (...) {
    return false;
  }
}

/// An element-wise stage whose values of several elements a unit lie in
/// different orders (a row-major matrix and a column-major one, split by
/// rows): a generated kernel indexes every packed chunk alike, element i of
/// one being element i of the others, which holds only when they agree.
/// The name of one value of each order, or "" when they agree.
std::string orders_differ(const stage& s, const std::vector<call_node>& nodes) {
  const value_state* in_piece = nullptr;
  const value_state* strided = nullptr;
  const auto look = [&](const value_state* v) {
    if (!v || !v->ops || v->ops->kind != split::split_kind::partitioned || v->shape.inner <= 1 || v->shape.units == 0)
      return;
    (unit_in_one_piece(*v) ? in_piece : strided) = v;
  };
  for (int c : s.calls)
    for (const auto& a : nodes[static_cast<std::size_t>(c)].args) look(a.value.get());
  if (!in_piece || !strided) return "";
  return "'" + in_piece->label + "' and '" + strided->label + "'";
}

}  // namespace

placement place_stage(const stage& s, const std::vector<call_node>& nodes,
                      const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& host,
                      std::size_t host_threshold, const std::string& device_failed) {
  const auto node = [&](int n) -> const call_node& { return nodes[static_cast<std::size_t>(n)]; };
  if (dev.kind() == device_kind::host) return {&dev, "host device selected"};
  if (!device_failed.empty()) return {&host, "the device failed earlier: " + device_failed};
  // Its functions are still called, once, on empty views: a reduction of
  // nothing is what the library returns for nothing.
  if (s.units == 0 && !s.contraction) return {&host, "an empty stage: nothing to copy"};
  if (!s.device_capable) {
    std::string cpu_only;
    for (int n : s.calls)
      if (!node(n).device_twin && !node(n).contraction && !node(n).kernel) cpu_only = node(n).name;
    return {&host, "'" + cpu_only + "' has no device function"};
  }
  if (s.kernels && dev.kind() == device_kind::cuda)
    for (int n : s.calls)
      if (!node(n).kernel->gpu) return {&host, "'" + node(n).name + "' has no GPU version in this build"};
  if (s.contraction) {
    const contraction_desc& d = *node(s.calls.front()).contraction;
    const std::size_t bytes = (d.m * d.k + d.k * d.n + d.m * d.n) * d.elem_bytes;
    if (dev.kind() == device_kind::cuda && !d.device) return {&host, "'" + node(s.calls.front()).name + "' has no GPU entry"};
    if (bytes < host_threshold)
      return {&host, "small product: " + std::to_string(bytes) + " bytes below OA_HOST_THRESHOLD"};
    if (d.reads_once && !dev.host_accessible())
      return {&host, "a matrix-vector product: each coefficient of A is read once, faster by the host's cores than "
                     "copied over the link"};
    return {&dev, "a product, tiled for the device's budget"};
  }
  if (!s.kernels && dev.compiles_kernels() && !dev.host_accessible())
    if (const std::string which = orders_differ(s, nodes); !which.empty())
      return {&host, which + " lay a unit's elements in different orders (row- and column-major): a generated "
                     "kernel indexes them alike"};
  auto laid = std::make_shared<const stage_layout>(layout_stage(s, nodes, placement_mode::staged, needed_on_host));
  const stage_layout& L = *laid;
  const std::size_t bytes = s.units * L.working_bytes_per_unit;
  if (bytes < host_threshold)
    return {&host, "small stage: " + std::to_string(bytes) + " bytes below OA_HOST_THRESHOLD", 0, laid};
  // Device functions given as code work in units their library chose (a
  // sort's run, a scan's block): where one is larger than the device's
  // memory, the host runs the stage. (A unit of element-wise calls is the
  // caller's, a row: too large for the budget, it is the caller's error.)
  if (s.kernels && !dev.host_accessible()) {
    slot_memory one{L.buffer_unit_bytes, L.partial_bytes, dev.allocation_granularity(), L.buffer_fixed_bytes};
    if (one.bytes(1) > dev.memory_budget())
      return {&host,
              "one unit of the stage takes " + std::to_string(one.bytes(1)) + " bytes of device memory (the "
              "smallest budget that runs it there), more than the device's budget of " +
                  std::to_string(dev.memory_budget()) + " bytes",
              one.bytes(1)};
  }
  return {&dev, "every call has a device function", 0, std::move(laid)};
}

bool stage_plan::shrink(chunk_plan& c, int& nslots) const {
  if (c.chunk_units > 1)
    c.chunk_units = (c.chunk_units + 1) / 2;
  else if (nslots > 1)
    nslots = (nslots + 1) / 2;
  else
    return false;
  return true;
}

namespace {

/// Whether copies of `v`'s host storage go through the staging engine
/// (pageable) rather than straight over the link (pinned). Storage made by
/// the stage itself is taken as pageable.
bool staged(const value_state& v) {
  if (!v.object) return true;
  const region r = residency::whole_region(v);
  return !is_pinned(r.data, residency::span(r));
}

/// What a chunk of the planned stage moves and runs per unit, for the time
/// model sizing its chunks. Values in whole or resident copies move once,
/// not per chunk.
chunk_costs costs_of(const stage_plan& p, const stage& s, const device& dev) {
  chunk_costs c;
  c.rates = dev.rates();
  for (std::size_t k = 0; k < p.layout.values.size(); ++k) {
    const stage_value& v = p.layout.values[k];
    const std::size_t ub = v.v->shape.unit_bytes();
    if (v.cls == value_class::temporary) {
      if (p.mode != placement_mode::fused) c.kernel_bytes_per_unit += 2 * ub;  // written, then read
      continue;
    }
    c.kernel_bytes_per_unit += ub;
    if (p.whole[k] || p.resident_in[k] || (v.cls == value_class::input && !v.loaded)) continue;
    const bool through_staging = staged(*v.v);
    if (v.cls == value_class::input) {
      c.in_bytes_per_unit += ub, ++c.copies_in;
      if (through_staging) c.staged_in_per_unit += ub;
    } else {
      c.out_bytes_per_unit += ub, ++c.copies_out;
      if (through_staging) c.staged_out_per_unit += ub;
    }
  }
  c.launches = p.mode == placement_mode::fused ? 1 : s.calls.size();
  return c;
}

/// How much of the device's memory a plan may give to resident copies.
enum class residency_use : std::uint8_t {
  reads_and_copies,  // read resident inputs in place, make whole copies
  reads,             // read resident inputs in place, no new copies
  none,              // every value through the slots' buffers; pinned copies released
};

stage_plan plan_with(const stage& s, const std::vector<call_node>& nodes,
                     const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& fallback,
                     const run_options& opt, residency_use use) {
  stage_plan p;
  p.dev = &dev;
  p.fallback = &fallback;
  const bool in_place = dev.host_accessible();
  const bool fused = !in_place && dev.compiles_kernels() && !s.kernels;
  const bool uses_copies = opt.resident && !in_place && use != residency_use::none;
  p.mode = in_place ? placement_mode::in_place : fused ? placement_mode::fused : placement_mode::staged;
  p.twins = s.device_capable && dev.runs_device_functions();
  p.layout = layout_stage(s, nodes, p.mode, needed_on_host);
  p.what = opt.stage_name + " [" + describe(s, nodes) + "] on " + dev.name();
  p.release_pinned = opt.resident && use == residency_use::none && opt.resident->pinned_bytes() > 0;
  const std::size_t reserved =
      opt.resident && !p.release_pinned ? std::min(opt.resident->pinned_bytes(), dev.memory_budget()) : 0;

  // On a device with its own memory: inputs with a copy there are read (or
  // updated) in place instead of copied in; the pinned copies' bytes are
  // taken out of the budget. Other inputs, and outputs the stage writes whole
  // into the caller's storage, go through whole copies of their host storage
  // when these fit in half of what is left: the same bytes cross the link,
  // and the copies stay for later stages and evaluations (an input updated
  // in place leaves its new version there). A fused kernel indexes its
  // values linearly: only contiguous ones.
  p.resident_in.assign(p.layout.values.size(), nullptr);
  p.whole.assign(p.layout.values.size(), 0);
  std::unordered_set<const value_state*> own;
  if (uses_copies) {
    std::unordered_set<const value_state*> written_whole;
    for (int c : s.calls)
      for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
        if (a.role == arg_role::out) written_whole.insert(a.value.get());
    const bool new_copies = opt.whole_copies && use == residency_use::reads_and_copies;
    std::size_t room = (dev.memory_budget() - reserved) / 2;
    for (std::size_t k = 0; k < p.layout.values.size(); ++k) {
      const stage_value& sv = p.layout.values[k];
      const bool input = sv.cls == value_class::input && sv.buffer >= 0;
      const bool output = sv.cls == value_class::output && written_whole.count(sv.v);
      if ((!input && !output) || !sv.v->object) continue;
      const region host = residency::whole_region(*sv.v);
      if (fused && !host.contiguous()) continue;
      if (input && (p.resident_in[k] = opt.resident->find(sv.v))) {
        own.insert(sv.v);
        continue;
      }
      // As the device allocates it: its slots get what the copies leave.
      const std::size_t grain = std::max<std::size_t>(dev.allocation_granularity(), 1);
      const std::size_t bytes = (residency::span(host) + grain - 1) / grain * grain;
      if (!new_copies || bytes == 0 || bytes > room) continue;
      room -= bytes;
      p.whole[k] = 1;
      p.whole_bytes += bytes;
      own.insert(sv.v);
    }
    if (!own.empty()) p.layout = layout_stage(s, nodes, p.mode, needed_on_host, own);
  }
  const stage_layout& L = p.layout;

  // A fused stage is one generated kernel; its reductions leave one partial
  // per block, so each chunk has up to max_blocks_per_chunk entries of each.
  if (fused) {
    p.kernel = generate_kernel(s, nodes, L);
    p.source = std::make_shared<const std::string>(p.kernel->code);
  }
  const std::size_t entries = fused ? max_blocks_per_chunk : 1;
  std::size_t prefix = 0;
  for (value_state* r : L.reductions) {
    p.partial_offsets.push_back(entries * prefix);
    prefix += r->ops->partial_bytes;
  }
  p.chunk_partial_bytes = entries * L.partial_bytes;

  // In place, a chunk touches its inputs and outputs where they live and its
  // temporaries in buffers reused along the stage: what it keeps in cache,
  // which does not grow with the number of temporaries.
  const std::size_t in_place_bytes = L.in_bytes_per_unit + L.out_bytes_per_unit + L.buffer_bytes_per_unit;
  p.bytes_per_unit = in_place ? in_place_bytes : L.buffer_bytes_per_unit;
  const int want_streams = opt.streams > 0 ? opt.streams : dev.preferred_streams();
  p.slot_mem = {in_place ? std::vector<std::size_t>{in_place_bytes} : L.buffer_unit_bytes,
                in_place ? 0 : p.chunk_partial_bytes, in_place ? 1 : dev.allocation_granularity(),
                in_place ? std::vector<std::size_t>{} : L.buffer_fixed_bytes};
  if (!own.empty()) {
    // OA_CHUNK_BYTES caps what a chunk moves, wherever its values live.
    const stage_layout plain = layout_stage(s, nodes, p.mode, needed_on_host);
    p.slot_mem.moved_bytes_per_unit = plain.buffer_bytes_per_unit;
  }
  const chunk_costs costs = in_place ? chunk_costs{} : costs_of(p, s, dev);
  p.chunks = plan_chunks(s.units, p.slot_mem, dev.memory_budget() - reserved - p.whole_bytes, want_streams,
                         opt.chunk_bytes, p.what + largest_unit(L), &costs);
  p.slots = opt.sequential ? 1 : std::max(p.chunks.streams, 1);
  return p;
}

}  // namespace

stage_plan plan_stage(const stage& s, const std::vector<call_node>& nodes,
                      const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& fallback,
                      const run_options& opt) {
  // Resident copies are an optimisation: a stage that one unit per slot
  // cannot fit beside them runs without them (new copies first, then the
  // pinned ones), and is refused only when it does not fit the whole budget.
  const bool copies = opt.resident && !dev.host_accessible();
  if (copies) {
    for (residency_use use : {residency_use::reads_and_copies, residency_use::reads}) {
      try {
        return plan_with(s, nodes, needed_on_host, dev, fallback, opt, use);
      } catch (const oa::plan_error&) {
      }
    }
  }
  return plan_with(s, nodes, needed_on_host, dev, fallback, opt, residency_use::none);
}

}  // namespace oa::detail
