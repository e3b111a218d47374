#include "core/executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/kernel_source.hpp"
#include "core/progress.hpp"
#include "core/stage_plan.hpp"
#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

std::size_t c_type_size(const std::string& t) {
  if (t == "double" || t == "long long" || t == "unsigned long long") return 8;
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "short" || t == "unsigned short") return 2;
  return 1;  // bool, char
}

/// One pipeline slot: its stream and the device memory its chunks use. The
/// stream is declared last, so it goes first, after its work: the memory is
/// freed only once nothing queued can touch it.
struct slot {
  std::vector<device_buffer> memory;  // the layout's buffers, then the reduction partials
  std::vector<std::byte*> buffers;    // their addresses, per layout buffer
  std::byte* partials = nullptr;
  oa::stream stream;

  void release() noexcept {
    stream.reset();
    buffers.clear();
    partials = nullptr;
    memory.clear();
  }
};

/// The slots of a stage, released on every path (each after its work).
struct slots_guard {
  std::vector<slot> slots;
  void assign(std::size_t n) {
    slots.clear();
    slots.resize(n);
  }
};

/// Host memory offered to the device for a stage, handed back at its end.
struct host_memory_guard {
  device& dev;
  std::vector<const void*> used;
  ~host_memory_guard() {
    for (const void* p : used) dev.host_memory_done(p);
  }
};

/// A slot's stream, then its memory, allocated in that stream's order.
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

/// Where each value of the stage lies for chunk r, given a slot's buffers.
/// Temporaries of a fused stage live in registers: they have no region.
std::vector<region> chunk_regions(const stage_layout& L, const std::vector<std::byte*>& buffers, split::range r) {
  std::vector<region> out(L.values.size());
  for (std::size_t i = 0; i < L.values.size(); ++i) {
    const stage_value& v = L.values[i];
    if (v.buffer >= 0)
      out[i] = v.v->ops->packed_region(buffers[static_cast<std::size_t>(v.buffer)], v.v->shape, r, v.v->state.get());
    else if (v.v->object)  // viewed in place: inputs, outputs, versions of the caller's data
      out[i] = v.v->ops->host_region(v.v->object, r);
  }
  return out;
}

/// Blocks of a generated kernel over `elements` elements (one partial each).
unsigned fused_grid(std::size_t elements) {
  const std::size_t block = kernel_source::block_size;
  return static_cast<unsigned>(std::clamp<std::size_t>((elements + block - 1) / block, 1, max_blocks_per_chunk));
}

/// Arguments of a stage's generated kernel for one chunk, in parameter order.
std::shared_ptr<const generated_kernel> kernel_for_chunk(const kernel_source& ks,
                                                         const std::shared_ptr<const std::string>& source,
                                                         const stage& s, const std::vector<call_node>& nodes,
                                                         const std::vector<std::byte*>& buffers,
                                                         std::byte* partials, std::size_t elements,
                                                         const std::vector<std::size_t>& partial_offsets) {
  auto k = std::make_shared<generated_kernel>();
  k->name = ks.name;
  k->source = source;
  k->block = kernel_source::block_size;
  k->grid = fused_grid(elements);
  auto push = [&](const void* p, std::size_t size) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, p, size);
    k->args.push_back(bits);
    k->arg_sizes.push_back(static_cast<std::uint8_t>(size));
  };
  for (const kernel_param& p : ks.params) {
    switch (p.what) {
      case kernel_param::kind::elements: {
        const unsigned long long n = elements;
        push(&n, sizeof n);
        break;
      }
      case kernel_param::kind::buffer: {
        const void* b = buffers[static_cast<std::size_t>(p.index)];
        k->pointer_args.push_back(k->args.size());
        push(&b, sizeof b);
        break;
      }
      case kernel_param::kind::scalar: {
        const call_node& n = nodes[static_cast<std::size_t>(s.calls[static_cast<std::size_t>(p.call)])];
        push(n.scalars[static_cast<std::size_t>(p.index)]->object, c_type_size(p.type));
        break;
      }
      case kernel_param::kind::partials: {
        const void* b = partials + partial_offsets[static_cast<std::size_t>(p.index)];
        k->pointer_args.push_back(k->args.size());
        push(&b, sizeof b);
        break;
      }
    }
  }
  return k;
}

/// Runs every call of the stage on one chunk: the body of a launch.
/// An exception of one of a stage's calls, with the call's position in the
/// stage: the stage runs again without that call and what depends on it.
struct call_failed {
  std::size_t position;
  std::exception_ptr error;
};

/// With `use_device_twin`, calls run their device functions: a function given
/// as code enqueues its GPU work on `stream` when that is a CUDA device's,
/// and runs its twin otherwise.
void run_chunk(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
               const std::vector<region>& regions, split::range r, std::byte* partials, bool use_device_twin,
               const stream_view& stream = {}, const std::vector<std::byte*>* buffers = nullptr) {
  std::vector<region> args;
  std::size_t partial_offset = 0;
  for (std::size_t p = 0; p < s.calls.size(); ++p) {
    const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
    const call_slots& cs = L.calls[p];
    args.clear();
    for (int idx : cs.regions) args.push_back(regions[static_cast<std::size_t>(idx)]);
    kernel_args ka{r, args.data(), nullptr};
    if (cs.partial >= 0) {
      ka.partial = partials + partial_offset;
      partial_offset += n.reduction->ops->partial_bytes;
    }
    if (cs.scratch >= 0 && buffers) {
      const auto b = static_cast<std::size_t>(cs.scratch);
      ka.scratch = (*buffers)[b];
      ka.scratch_bytes = L.buffer_unit_bytes[b] * r.size() + L.buffer_fixed_bytes[b];
    }
    try {
      if (!use_device_twin)
        n.cpu(ka);
      else if (!n.kernel)
        n.device_twin(ka);
      else if (stream.dev && stream.dev->kind() == device_kind::cuda)
        n.kernel->gpu(ka, stream);
      else
        n.kernel->twin(ka);
    } catch (const device_fault&) {
      throw;  // the device is lost (a GPU entry's sticky fault): the chunk re-runs on the host
    } catch (...) {
      throw call_failed{p, std::current_exception()};
    }
  }
}

/// Units [rb) of a region that holds units [r) (units run along its width).
region sub_region(const region& g, split::range r, split::range rb) {
  if (!g.data || r.size() == 0) return g;
  const std::size_t unit = g.width / r.size();
  return {g.data + (rb.begin - r.begin) * unit, rb.size() * unit, g.rows, g.pitch};
}

/// What a stage's generated kernel computes on one chunk, run on the host:
/// the device functions' host twins over `grid` blocks of the chunk's units,
/// temporaries in host scratch (the kernel keeps them in registers), each
/// block's reduction partials at its own entry, identities for blocks that
/// get no unit.
void run_fused_description(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
                           std::vector<region> regs, split::range r, std::byte* partials,
                           const std::vector<std::size_t>& partial_offsets, unsigned grid) {
  std::vector<std::vector<std::byte>> scratch;
  for (std::size_t k = 0; k < L.values.size(); ++k) {
    const stage_value& v = L.values[k];
    if (v.cls != value_class::temporary) continue;
    scratch.emplace_back(std::max<std::size_t>(r.size() * v.v->shape.unit_bytes(), 1));
    regs[k] = v.v->ops->packed_region(scratch.back().data(), v.v->shape, r, v.v->state.get());
  }
  const std::vector<split::range> blocks = split::even_chunks(r.size(), grid);
  std::vector<std::byte> packed(std::max<std::size_t>(L.partial_bytes, 1));
  std::vector<region> sub(regs.size());
  for (unsigned b = 0; b < grid; ++b) {
    if (b < blocks.size()) {
      const split::range rb{r.begin + blocks[b].begin, r.begin + blocks[b].end};
      for (std::size_t k = 0; k < regs.size(); ++k) sub[k] = sub_region(regs[k], r, rb);
      run_chunk(s, nodes, L, sub, rb, packed.data(), true);
    } else {
      std::size_t at = 0;
      for (value_state* red : L.reductions) {
        void* identity = nullptr;
        const auto owner = red->ops->make(red->shape, red->state.get(), identity);
        std::memcpy(packed.data() + at, identity, red->ops->partial_bytes);
        at += red->ops->partial_bytes;
      }
    }
    std::size_t at = 0;
    for (std::size_t q = 0; q < L.reductions.size(); ++q) {
      const std::size_t pb = L.reductions[q]->ops->partial_bytes;
      std::memcpy(partials + partial_offsets[q] + b * pb, packed.data() + at, pb);
      at += pb;
    }
  }
}

}  // namespace

stage cancel_failed(const stage& s, const std::vector<call_node>& nodes) {
  stage kept = s;
  kept.calls.clear();
  for (int c : s.calls) {
    const call_node& n = nodes[static_cast<std::size_t>(c)];
    std::exception_ptr err;
    for (const auto& a : n.args)
      if (a.role != arg_role::out && a.value->status == value_status::failed) err = a.value->error;
    for (const auto& v : n.scalars)
      if (v->status == value_status::failed) err = v->error;
    if (!err) {
      kept.calls.push_back(c);
      continue;
    }
    n.for_each_output([&](const value_ptr& v) { v->fail(err); });
  }
  return kept;
}


stage_report report_for(const stage& s, const std::vector<call_node>& nodes, const device& dev,
                        const run_options& opt) {
  stage_report rep;
  for (int c : s.calls) rep.calls.push_back(nodes[static_cast<std::size_t>(c)].name);
  rep.device = dev.name();
  rep.placement_reason = opt.placement_reason;
  rep.units = s.units;
  rep.op = s.contraction ? "gemm" : "stage";
  if (!s.calls.empty())
    if (const char* op = nodes[static_cast<std::size_t>(s.calls.front())].report_op) rep.op = op;
  if (rep.op == "cwise" || rep.op == "reduction") rep.dims = "elements=" + std::to_string(s.units);
  if (s.contraction && !s.calls.empty()) {
    const contraction_desc& d = *nodes[static_cast<std::size_t>(s.calls.front())].contraction;
    rep.dims = "m=" + std::to_string(d.m) + " n=" + std::to_string(d.n) + " k=" + std::to_string(d.k);
  }
  return rep;
}

void add_device_records(stage_report& rep, device& dev, const run_options& opt) {
  const std::vector<op_record> ops = dev.take_records();
  for (const auto& o : ops) {
    if (o.what == phase::h2d) rep.h2d_bytes += o.bytes;
    if (o.what == phase::d2h) rep.d2h_bytes += o.bytes;
    if (o.what == phase::fill) rep.fill_seconds += o.end - o.begin;
    if (o.what == phase::drain) rep.drain_seconds += o.end - o.begin;
    if (o.what == phase::prefault) rep.prefault_seconds += o.end - o.begin;
    if (opt.trace) {
      std::string track = o.what == phase::compute                          ? "stream " + std::to_string(o.stream)
                          : o.what == phase::h2d || o.what == phase::d2h ? std::string(to_string(o.what)) + " copy engine"
                          : o.what == phase::pin                         ? std::string("host memory pinned")
                                                                         : "staging " + std::string(to_string(o.what)) + " threads";
      opt.trace->push_back({dev.name(), std::move(track), o.what == phase::compute ? o.label : to_string(o.what),
                            o.begin, o.end, o.bytes});
    }
  }
  rep.h2d_seconds += busy_seconds(ops, phase::h2d);
  rep.compute_seconds += busy_seconds(ops, phase::compute);
  rep.d2h_seconds += busy_seconds(ops, phase::d2h);
}

void check_caller_objects(const stage& s, const std::vector<call_node>& nodes) {
  for (int c : s.calls) {
    const call_node& n = nodes[static_cast<std::size_t>(c)];
    for (const auto& a : n.args) {
      const value_state& v = *a.value;
      if (a.role == arg_role::out || !v.user_storage || !v.ops || !v.ops->shape_of) continue;
      const split::shape now = v.ops->shape_of(v.object);
      if (now == v.shape) continue;
      throw invalid_argument(n.name, v.label,
                             "the caller's object has " + std::to_string(now.units) + " units of " +
                                 std::to_string(now.unit_bytes()) + " bytes now, but had " +
                                 std::to_string(v.shape.units) + " of " + std::to_string(v.shape.unit_bytes()) +
                                 " when the call was recorded: objects passed to oa must stay alive and unchanged "
                                 "until their calls have run");
    }
  }
}

namespace {

/// Memory for undo logs, kept between stages: fresh memory costs a page fault
/// per page on first touch, more than the copy itself. One block of at most
/// `kept_max` bytes is kept; larger ones go back to the system at once.
class undo_storage {
 public:
  static constexpr std::size_t kept_max = std::size_t{1} << 30;

  static std::unique_ptr<std::byte[]> take(std::size_t bytes, std::size_t& capacity) {
    {
      std::lock_guard lock(m_);
      if (block_ && size_ >= bytes) {
        capacity = size_;
        return std::move(block_);
      }
    }
    capacity = std::max<std::size_t>(bytes, 1);
    return std::unique_ptr<std::byte[]>(new std::byte[capacity]);  // uninitialised: no pass over it
  }
  static void give(std::unique_ptr<std::byte[]> b, std::size_t capacity) noexcept {
    if (!b || capacity > kept_max) return;
    std::lock_guard lock(m_);
    if (!block_ || size_ < capacity) {
      block_ = std::move(b);
      size_ = capacity;
    }
  }

 private:
  static inline std::mutex m_;
  static inline std::unique_ptr<std::byte[]> block_;
  static inline std::size_t size_ = 0;
};

/// Copies of the caller's objects that a stage updates in place, taken chunk
/// by chunk before the chunk's work can write them: a failed stage puts them
/// all back (all or nothing), and a chunk re-run on the host starts from them.
/// Chunks are saved by whichever thread runs them (distinct chunks touch
/// distinct bytes), so on the host device saving is spread over the workers.
class undo_log {
 public:
  undo_log(const stage& s, const std::vector<call_node>& nodes) {
    for (int c : s.calls)
      for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
        if (a.role == arg_role::mut && std::none_of(targets_.begin(), targets_.end(), [&](const value_state* t) {
              return t->object == a.value->object;
            }))
          targets_.push_back(a.value.get());
  }

  ~undo_log() { undo_storage::give(std::move(data_), capacity_); }
  undo_log(const undo_log&) = delete;
  undo_log& operator=(const undo_log&) = delete;

  bool empty() const noexcept { return targets_.empty(); }

  /// Room for these chunks; memory is touched only as chunks are saved.
  void plan(const std::vector<split::range>& ranges) {
    if (targets_.empty()) return;
    ranges_ = ranges;
    offsets_.assign(ranges.size() + 1, 0);
    for (std::size_t j = 0; j < ranges.size(); ++j) {
      std::size_t b = 0;
      for (const value_state* t : targets_) b += t->ops->host_region(t->object, ranges[j]).bytes();
      offsets_[j + 1] = offsets_[j] + b;
    }
    data_ = undo_storage::take(offsets_.back(), capacity_);
    kept_.assign(ranges.size(), 0);
  }

  /// Keeps chunk j's bytes of every object updated in place.
  void save(std::size_t j) noexcept {
    if (targets_.empty()) return;
    std::byte* at = data_.get() + offsets_[j];
    for (const value_state* t : targets_) {
      const region from = t->ops->host_region(t->object, ranges_[j]);
      copy_region(from.packed_at(at), from);
      at += from.bytes();
    }
    kept_[j] = 1;
  }

  /// Chunk j as it was before the stage, and kept so (a re-run may fail too).
  void before_rerun(std::size_t j) noexcept {
    if (targets_.empty()) return;
    if (kept_[j]) restore(j);
    else save(j);
  }

  /// Every chunk saved goes back.
  void restore_all() noexcept {
    for (std::size_t j = 0; j < kept_.size(); ++j)
      if (kept_[j]) restore(j);
  }

  /// Bytes kept (the price of all-or-nothing updates).
  std::size_t bytes() const noexcept {
    std::size_t b = 0;
    for (std::size_t j = 0; j < kept_.size(); ++j)
      if (kept_[j]) b += offsets_[j + 1] - offsets_[j];
    return b;
  }

 private:
  void restore(std::size_t j) noexcept {
    std::byte* at = data_.get() + offsets_[j];
    for (const value_state* t : targets_) {
      const region to = t->ops->host_region(t->object, ranges_[j]);
      copy_region(to, to.packed_at(at));
      at += to.bytes();
    }
  }

  std::vector<const value_state*> targets_;
  std::vector<split::range> ranges_;
  std::vector<std::size_t> offsets_;  // chunk j's bytes: [offsets_[j], offsets_[j + 1])
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_ = 0;
  std::vector<char> kept_;  // one flag per chunk, each written by the thread that saved it
};

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

/// Runs chunks `which` of the stage again on the host device, in place, over
/// its streams. A chunk of a fused stage runs the kernel's description, as
/// the emulated device does, so that it computes the same bits and leaves
/// the same per-block partials (`fused_entries`: blocks per chunk); other
/// chunks run the CPU functions and leave one partial per reduction where
/// the device's entries would have been. Returns the error of the first
/// failing chunk.
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

}  // namespace

/// The shared handle of a value the stage's calls take or make.
value_ptr value_of(const stage& s, const std::vector<call_node>& nodes, const value_state* v) {
  for (int c : s.calls)
    for (const auto& a : nodes[static_cast<std::size_t>(c)].args) {
      if (a.value.get() == v) return a.value;
      if (a.new_value.get() == v) return a.new_value;
    }
  return nullptr;
}

void fail_stage(const stage& s, const std::vector<call_node>& nodes, std::exception_ptr e) {
  for (int c : s.calls)
    nodes[static_cast<std::size_t>(c)].for_each_output([&](const value_ptr& v) { v->fail(e); });
}

stage_report run_stage(const stage& s_in, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& host,
                       const run_options& opt) {
  const auto t0 = clock_type::now();
  stage_report rep = report_for(s_in, nodes, dev, opt);
  const stage s = cancel_failed(s_in, nodes);
  if (s.calls.empty()) return rep;
  check_caller_objects(s, nodes);

  stage_plan P = plan_stage(s, nodes, needed_on_host, dev, host, opt);
  // Whole copies (stage_plan::whole), allocated before the slots; they are
  // freed after the slots' streams are done, or kept when the stage succeeds.
  // Without room for them, the stage is planned again without.
  std::vector<device_buffer> whole_copies(P.layout.values.size());
  std::vector<region> whole_host(P.layout.values.size());
  try {
    for (std::size_t k = 0; k < P.whole.size(); ++k) {
      if (!P.whole[k]) continue;
      whole_host[k] = residency::whole_region(*P.layout.values[k].v);
      whole_copies[k] = device_buffer(dev, residency::span(whole_host[k]));
    }
  } catch (const device_out_of_memory&) {
    whole_copies.clear();
    run_options without = opt;
    without.whole_copies = false;
    P = plan_stage(s, nodes, needed_on_host, dev, host, without);
    whole_copies.resize(P.layout.values.size());
  }
  // Planned without the copies pinned for it: the stage reads every value
  // from the host, which must hold them first.
  if (P.release_pinned) opt.resident->release_pinned();
  // Updates in place: the new version of a value with a buffer of its own
  // lives where the old one does (its copy), and a copy ends up holding the
  // last version.
  std::vector<std::pair<std::size_t, std::size_t>> updates;  // (old, new), in call order
  std::vector<int> next_version(P.layout.values.size(), -1);
  {
    std::unordered_map<const value_state*, std::size_t> index;
    for (std::size_t k = 0; k < P.layout.values.size(); ++k) index[P.layout.values[k].v] = k;
    for (int c : s.calls)
      for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
        if (a.role == arg_role::mut) {
          const std::size_t from = index.at(a.value.get()), to = index.at(a.new_value.get());
          updates.emplace_back(from, to);
          next_version[from] = static_cast<int>(to);
        }
  }
  const auto last_version = [&](std::size_t k) {
    while (next_version[k] >= 0) k = static_cast<std::size_t>(next_version[k]);
    return k;
  };
  const auto in_whole = [&](std::size_t k, const region& host_chunk) {
    return region{whole_copies[k].data() + (host_chunk.data - whole_host[k].data), host_chunk.width, host_chunk.rows,
                  host_chunk.pitch};
  };
  const bool in_place = P.mode == placement_mode::in_place;
  const bool fused = P.mode == placement_mode::fused;
  const bool twins = P.twins;
  const stage_layout& L = P.layout;
  const std::string& what = P.what;
  const std::optional<kernel_source>& ks = P.kernel;
  const std::shared_ptr<const std::string>& source = P.source;
  const std::vector<std::size_t>& partial_offsets = P.partial_offsets;
  const std::size_t chunk_partial_bytes = P.chunk_partial_bytes;
  const std::vector<residency::entry*>& resident_in = P.resident_in;
  const slot_memory& slot_mem = P.slot_mem;
  const std::size_t bytes_per_unit = P.bytes_per_unit;
  chunk_plan plan = P.chunks;  // smaller when the device runs out of memory: re-planned below
  int nslots = P.slots;

  // Host storage of results, created uninitialised and filled chunk by chunk.
  for (const auto& v : L.values)
    if (v.cls == value_class::output && !v.v->object)
      v.v->owned = v.v->ops->make(v.v->shape, v.v->state.get(), v.v->object);
  for (value_state* r : L.reductions) r->owned = r->ops->make(r->shape, r->state.get(), r->object);

  dev.set_recording(true);
  (void)dev.take_records();
  dev.reset_peak();

  // Everything that queued work may touch is declared before the slots, whose
  // destruction waits for their streams: on every path, errors included, it
  // is freed only after the device is done with it.
  std::vector<split::range> ranges;
  std::vector<std::byte> partials;
  std::vector<std::size_t> partial_entries;  // per chunk: entries of each reduction
  std::vector<event> events;
  undo_log undo(s, nodes);
  host_memory_guard pinned_memory{dev, {}};  // outlives the slots: unpinned after their work is done
  std::optional<slots_guard> guard_storage;
  slots_guard& guard = guard_storage.emplace();

  std::vector<std::size_t> faulted;  // chunks to run again on the host
  std::exception_ptr stage_error;    // an error of a call: the stage fails
  std::exception_ptr lost;           // a device fault outside a chunk's work: the device is gone
  std::size_t submitted = 0;         // chunks whose work is all queued

  try {
    // Device memory for every slot; on out-of-memory, smaller chunks, then fewer slots.
    for (;;) {
      try {
        guard.assign(static_cast<std::size_t>(nslots));
        for (auto& sl : guard.slots) allocate_slot(dev, sl, L, plan.chunk_units, in_place ? 0 : chunk_partial_bytes);
        break;
      } catch (const device_out_of_memory&) {
        for (auto& sl : guard.slots) sl.release();
        if (!P.shrink(plan, nslots)) {
          throw plan_error("oa: " + what + ": the device could not allocate one unit on one stream (" +
                           std::to_string(slot_mem.bytes(1)) + " bytes) within its budget of " +
                           std::to_string(dev.memory_budget()) + " bytes");
        }
        plan.chunks = (s.units + plan.chunk_units - 1) / plan.chunk_units;
      }
    }
  } catch (const device_fault&) {
    lost = std::current_exception();
    for (auto& sl : guard.slots) sl.release();
    guard.slots.clear();
  }

  ranges = split::chunks(std::max<std::size_t>(s.units, 1), plan.chunk_units);
  const std::size_t nchunks = s.units == 0 ? 0 : ranges.size();
  partials.assign(nchunks * chunk_partial_bytes, std::byte{0});
  undo.plan(ranges);
  partial_entries.assign(nchunks, 1);
  events.resize(nchunks);
  const std::string launch_name =
      rep.calls.size() == 1 ? rep.calls[0] : rep.calls[0] + " (+" + std::to_string(rep.calls.size() - 1) + ")";

  auto check = [&](std::size_t j) {
    if (!events[j]) return;
    std::exception_ptr err = dev.synchronize_event(events[j]);
    events[j].reset();
    if (!err) return;
    const slot& sl = guard.slots[opt.sequential ? 0 : j % guard.slots.size()];
    try {
      dev.synchronize(sl.stream.id());  // clears the stream's error
    } catch (...) {
    }
    try {
      std::rethrow_exception(err);
    } catch (const device_fault& f) {
      faulted.push_back(j);
      // A sticky fault loses the device: the rest of the stage, and later
      // stages, run on the host. After a transient one the device goes on.
      if (f.sticky() && !lost) lost = err;
    } catch (...) {
      if (!stage_error) stage_error = err;
    }
  };

  if (!lost) {
    progress_line progress(opt.progress, "oa: " + what, nchunks);
    try {
      // Host storage the stage copies from and to, offered to the device to pin.
      if (!in_place && s.units > 0) {
        for (const auto& v : L.values) {
          if (v.buffer < 0 || v.cls == value_class::temporary || !v.v->object) continue;
          const region whole = v.v->ops->host_region(v.v->object, {0, s.units});
          if (!whole.data || whole.bytes() == 0) continue;
          if (std::find(pinned_memory.used.begin(), pinned_memory.used.end(), whole.data) != pinned_memory.used.end())
            continue;
          dev.host_memory_use(whole.data, (whole.rows - 1) * whole.pitch + whole.width);
          pinned_memory.used.push_back(whole.data);
        }
      }
      if (ks) {
        generated_kernel probe;
        probe.name = ks->name;
        probe.source = source;
        dev.prepare(probe);
      }
      for (std::size_t i = 0; i < nchunks && !stage_error; ++i) {
        const std::size_t si = opt.sequential ? 0 : i % guard.slots.size();
        if (i >= guard.slots.size()) check(i - guard.slots.size());  // the slot's previous chunk
        if (stage_error) break;
        slot& sl = guard.slots[si];
        const split::range r = ranges[i];
        // The chunk's bytes of the caller's objects are kept before any of its
        // work can write them: by the worker itself where kernels run in place.
        if (!in_place) undo.save(i);
        std::vector<region> regs = chunk_regions(L, sl.buffers, r);
        std::byte* host_partial = partials.data() + i * chunk_partial_bytes;
        if (!in_place) {
          for (std::size_t k = 0; k < L.values.size(); ++k) {
            const stage_value& v = L.values[k];
            if (v.cls != value_class::input || v.buffer < 0) continue;
            const region host_chunk = v.v->ops->host_region(v.v->object, r);
            if (resident_in[k]) {
              regs[k] = residency::in_copy(*resident_in[k], host_chunk);
              if (v.loaded) rep.resident_bytes_saved += host_chunk.bytes();
            } else {
              if (whole_copies[k].data()) regs[k] = in_whole(k, host_chunk);
              // An overwritten value's old bytes are not needed there.
              if (v.loaded) dev.copy_to_device_async(regs[k], host_chunk, sl.stream.id());
            }
          }
          for (std::size_t k = 0; k < L.values.size(); ++k)
            if (L.values[k].cls == value_class::output && whole_copies[k].data())
              regs[k] = in_whole(k, L.values[k].v->ops->host_region(L.values[k].v->object, r));
          for (const auto& [from, to] : updates)
            if (L.buffer_unit_bytes[static_cast<std::size_t>(L.values[from].buffer)] == 0) regs[to] = regs[from];
        }
        std::byte* kernel_partial = in_place ? host_partial : sl.partials;
        launch k{launch_name, {}, {}};
        if (fused) {
          const std::size_t elements = r.size() * L.values.front().v->shape.inner;
          // Values with a buffer of their own are read and written in their copies.
          std::vector<std::byte*> buffers = sl.buffers;
          for (std::size_t v = 0; v < L.values.size(); ++v)
            if (L.values[v].buffer >= 0 && L.buffer_unit_bytes[static_cast<std::size_t>(L.values[v].buffer)] == 0)
              buffers[static_cast<std::size_t>(L.values[v].buffer)] = regs[v].data;
          k.kernel = kernel_for_chunk(*ks, source, s, nodes, buffers, sl.partials, elements, partial_offsets);
          partial_entries[i] = k.kernel->grid;
          // Its description, for a device that runs it on the host (emulated).
          k.entry = [&s, &nodes, &L, regs, r, dev_partials = sl.partials, &partial_offsets,
                     grid = k.kernel->grid](const stream_view&) {
            run_fused_description(s, nodes, L, regs, r, dev_partials, partial_offsets, grid);
          };
        } else {
          undo_log* keep = in_place ? &undo : nullptr;
          k.entry = [&s, &nodes, &L, regs, r, kernel_partial, keep, i, twins,
                     buffers = &sl.buffers](const stream_view& stream) {
            if (keep) keep->save(i);
            run_chunk(s, nodes, L, regs, r, kernel_partial, twins, stream, buffers);
          };
        }
        dev.launch_async(std::move(k), sl.stream.id());
        if (!in_place) {
          for (std::size_t k = 0; k < L.values.size(); ++k) {
            const stage_value& v = L.values[k];
            if (v.cls == value_class::output && v.buffer >= 0)
              dev.copy_to_host_async(v.v->ops->host_region(v.v->object, r), regs[k], sl.stream.id());
          }
          for (std::size_t q = 0; q < L.reductions.size(); ++q) {
            const std::size_t bytes = partial_entries[i] * L.reductions[q]->ops->partial_bytes;
            dev.copy_to_host_async({host_partial + partial_offsets[q], bytes, 1, bytes},
                                   {sl.partials + partial_offsets[q], bytes, 1, bytes}, sl.stream.id());
          }
        }
        events[i] = dev.record_event(sl.stream.id());
        submitted = i + 1;
        progress.update(i + 1);
      }
    } catch (const device_fault&) {
      // The device refused work (it is lost, as a CUDA context is after a
      // kernel fault): what is queued drains below, the rest runs on the host.
      lost = std::current_exception();
    } catch (...) {
      if (!stage_error) stage_error = std::current_exception();
    }
    for (std::size_t j = 0; j < submitted; ++j) check(j);
  }
  dev.wait_idle();  // work of a chunk only partly queued, too
  rep.peak_device_bytes = dev.peak_bytes();
  if (lost && !stage_error)
    for (std::size_t j = submitted; j < nchunks; ++j) faulted.push_back(j);
  rep.device_chunks = nchunks - faulted.size();
  guard_storage.reset();  // device memory back before any host re-run

  // Chunks the device failed on run again on the host, from the caller's data
  // as it was before the chunk.
  if (!stage_error && !faulted.empty()) {
    // The host reads inputs from their host storage: device-only copies go back first.
    for (residency::entry* e : resident_in) {
      if (!e || e->host_valid || stage_error) continue;
      try {
        opt.resident->write_back(*e);
      } catch (...) {
        stage_error = std::make_exception_ptr(
            device_fault("oa: " + e->value->label + " was kept only in the memory of " + dev.name() +
                         ", and could not be copied back after a device fault: " + message_of(std::current_exception())));
      }
    }
  }
  if (!stage_error && !faulted.empty()) {
    std::sort(faulted.begin(), faulted.end());
    for (std::size_t j : faulted) undo.before_rerun(j);
    if (!fused)
      for (std::size_t j : faulted) partial_entries[j] = 1;
    stage_error = rerun_on_host(*P.fallback, s, nodes, needed_on_host, ranges, faulted, plan.chunk_units, L,
                                partial_offsets, chunk_partial_bytes, partials, fused ? &partial_entries : nullptr);
    rep.host_reruns = faulted.size();
  }

  add_device_records(rep, dev, opt);
  rep.chunk_units = plan.chunk_units;
  rep.chunks = nchunks;
  rep.streams = nslots;
  rep.sequential = opt.sequential;
  rep.bytes_per_unit = bytes_per_unit;
  if (lost) rep.device_fault = message_of(lost);
  rep.rollback_bytes = undo.bytes();

  // Copies updated in place hold the new versions only if every chunk ran
  // on the device and the stage succeeded.
  const bool copies_hold = opt.resident && !stage_error && faulted.empty() && !lost;
  for (std::size_t k = 0; k < resident_in.size(); ++k) {
    if (!resident_in[k] || next_version[k] < 0) continue;
    if (copies_hold)
      opt.resident->rekey(L.values[k].v, value_of(s, nodes, L.values[last_version(k)].v));
    else
      opt.resident->drop(L.values[k].v);
  }

  if (stage_error) {
    // All or nothing: the caller's objects go back to what they were.
    undo.restore_all();
    std::exception_ptr error = stage_error;
    std::optional<std::size_t> culprit;
    try {
      std::rethrow_exception(stage_error);
    } catch (const call_failed& f) {
      culprit = f.position;
      error = f.error;
    } catch (...) {
    }
    rep.error = message_of(error);
    if (culprit) {
      // Only the call that threw fails, and the calls that read what it
      // writes (cancelled when the rest runs again): the others are
      // computed, as a plain program computes what comes before or beside
      // a statement that throws.
      const call_node& bad = nodes[static_cast<std::size_t>(s.calls[*culprit])];
      bad.for_each_output([&](const value_ptr& v) { v->fail(error); });
      stage rest = s;
      rest.calls.erase(rest.calls.begin() + static_cast<std::ptrdiff_t>(*culprit));
      stage_report again = run_stage(rest, nodes, needed_on_host, dev, host, opt);
      again.calls = rep.calls;
      again.error = rep.error;
      again.seconds += seconds_since(t0);
      return again;
    }
    fail_stage(s, nodes, error);
  } else {
    // Every entry of every chunk, in order: the result does not depend on
    // which stream ran which chunk.
    for (std::size_t q = 0; q < L.reductions.size(); ++q) {
      value_state* r = L.reductions[q];
      const std::size_t pb = r->ops->partial_bytes;
      std::vector<std::byte> mine;
      for (std::size_t j = 0; j < nchunks; ++j) {
        const std::byte* from = partials.data() + j * chunk_partial_bytes + partial_offsets[q];
        mine.insert(mine.end(), from, from + partial_entries[j] * pb);
      }
      r->ops->merge(mine.data(), mine.size() / std::max<std::size_t>(pb, 1), r->object);
    }
    for (int c : s.calls)
      nodes[static_cast<std::size_t>(c)].for_each_output([](const value_ptr& v) { v->status = value_status::ready; });
    // Every chunk ran on the device: the whole copies hold what the host does.
    if (copies_hold)
      for (std::size_t k = 0; k < whole_copies.size(); ++k) {
        if (!whole_copies[k].data()) continue;
        rep.resident_bytes += whole_copies[k].size();
        opt.resident->add(value_of(s, nodes, L.values[last_version(k)].v), std::move(whole_copies[k]), whole_host[k],
                          true);
      }
  }
  rep.seconds = seconds_since(t0);
  return rep;
}

}  // namespace oa::detail
