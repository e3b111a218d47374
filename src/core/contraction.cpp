// Contractions, tile by tile. On a device with its own memory, C is cut into
// tiles and k into steps (core/tiling.hpp chooses the shapes from the
// budget); three streams pipeline the work: one stages A and B pieces (and
// C's old tiles) in, one runs the steps, one writes finished C tiles out.
// Events order them, so the pieces of the next steps are copied while the
// current step runs, and a C tile accumulates on the device over all its k
// steps before it goes back once. On a device whose memory is the host's, C
// is cut into one part per stream and each part is one product.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "core/executor.hpp"
#include "core/progress.hpp"
#include "core/tiling.hpp"
#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

/// The blocks a contraction reads and writes, as stored on the host.
struct operands {
  matrix_block a, b;
  matrix_block c_in;   // C's old values (read when beta != 0): C itself, or another matrix
  matrix_block c_out;  // where the result goes
  value_state* out = nullptr;
};

operands operands_of(const call_node& n) {
  const contraction_desc& d = *n.contraction;
  operands o;
  o.a = d.storage[0](n.args[0].value->object);
  o.b = d.storage[1](n.args[1].value->object);
  const node_arg& cw = n.args.back();
  o.out = cw.role == arg_role::mut ? cw.new_value.get() : cw.value.get();
  if (!o.out->object) o.out->owned = o.out->ops->make(o.out->shape, o.out->state.get(), o.out->object);
  o.c_out = d.storage[2](o.out->object);
  if (cw.role == arg_role::mut)
    o.c_in = o.c_out;
  else if (n.args.size() == 4)
    o.c_in = d.storage[2](n.args[2].value->object);
  return o;
}

/// Bytes a block spans in its storage, from its first element.
std::size_t span_bytes(const matrix_block& m) {
  if (m.rows == 0 || m.cols == 0) return 0;
  return ((m.outer() - 1) * m.ld + m.inner()) * m.elem_bytes;
}

/// C's bytes before the stage, to put back if it fails: the caller never
/// sees half a product.
class c_backup {
 public:
  c_backup(const matrix_block& c, bool needed) : c_(c) {
    if (!needed || c.bytes() == 0) return;
    saved_.resize(c.bytes());
    copy_region(c.packed_at(saved_.data()).as_region(), c.as_region());
  }
  void restore() const noexcept {
    if (!saved_.empty()) copy_region(c_.as_region(), c_.packed_at(const_cast<std::byte*>(saved_.data())).as_region());
  }
  std::size_t bytes() const noexcept { return saved_.size(); }

 private:
  matrix_block c_;
  std::vector<std::byte> saved_;
};

/// Streams of one stage, destroyed (after their work) on every path.
struct stream_set {
  explicit stream_set(device& d) : dev(d) {}
  stream_id add() {
    streams.emplace_back(dev);
    return streams.back().id();
  }
  /// Waits for every stream; returns the first error and clears them all.
  std::exception_ptr drain() noexcept {
    std::exception_ptr first;
    for (const oa::stream& s : streams) {
      try {
        dev.synchronize(s.id());
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    return first;
  }
  device& dev;
  std::vector<oa::stream> streams;
};

/// Host memory a stage copies from and to, offered to the device to pin.
struct pinned_blocks {
  device& dev;
  std::vector<const void*> used;
  void add(const matrix_block& m) {
    const std::size_t bytes = span_bytes(m);
    if (!bytes || std::find(used.begin(), used.end(), m.data) != used.end()) return;
    dev.host_memory_use(m.data, bytes);
    used.push_back(m.data);
  }
  ~pinned_blocks() {
    for (const void* p : used) dev.host_memory_done(p);
  }
};

std::string launch_name(const call_node& n) { return n.name; }

/// C in one part per stream, each part one product over all of k, in place
/// in host memory (the host device).
std::exception_ptr run_in_host_memory(const call_node& n, const operands& o, device& dev, const run_options& opt,
                                      stage_report& rep) {
  const contraction_desc& d = *n.contraction;
  if (d.reads_c && o.c_in.data != o.c_out.data) copy_region(o.c_out.as_region(), o.c_in.as_region());
  const int streams = opt.sequential ? 1 : opt.streams > 0 ? opt.streams : dev.preferred_streams();
  // Parts along C's longer side: each is a large product, as Eigen likes.
  const bool by_cols = d.n >= d.m;
  const auto parts = split::even_chunks(by_cols ? d.n : d.m, static_cast<std::size_t>(std::max(streams, 1)));
  std::vector<event> done(parts.size());
  stream_set ss(dev);
  std::exception_ptr first;
  try {
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const split::range r = parts[p];
      const std::size_t i0 = by_cols ? 0 : r.begin, mi = by_cols ? d.m : r.size();
      const std::size_t j0 = by_cols ? r.begin : 0, nj = by_cols ? r.size() : d.n;
      const matrix_block a = d.a_tile(o.a, i0, mi, 0, d.k), b = d.b_tile(o.b, 0, d.k, j0, nj);
      const matrix_block c = o.c_out.sub(i0, j0, mi, nj);
      const stream_id s = ss.add();
      dev.launch_async({launch_name(n), [&d, a, b, c](const stream_view& v) { d.cpu(a, b, c, true, v); }, {}}, s);
    }
  } catch (...) {
    first = std::current_exception();
  }
  if (std::exception_ptr e = ss.drain(); e && !first) first = e;
  rep.chunks = parts.size();
  rep.streams = static_cast<int>(parts.size());
  rep.tiling = parts.size() == 1 ? std::string("C whole, k whole")
                                  : "C in " + std::to_string(parts.size()) + (by_cols ? " column" : " row") +
                                        " parts, k whole";
  return first;
}

/// The tiled pipeline on a device with its own memory. Returns the first
/// error; on return the device has finished everything it was given.
std::exception_ptr run_tiled(const call_node& n, const operands& o, device& dev, const run_options& opt,
                             stage_report& rep, const std::string& what, device_buffer& kept) {
  const contraction_desc& d = *n.contraction;
  const std::size_t eb = d.elem_bytes;
  const std::size_t reserved = opt.resident ? opt.resident->pinned_bytes() : 0;
  tiling_problem prob{d.m, d.n, d.k, eb, d.reads_c, dev.memory_budget() - std::min(reserved, dev.memory_budget()),
                      dev.allocation_granularity()};
  if (opt.chunk_bytes) prob.budget = std::min(prob.budget, opt.chunk_bytes);
  // A result a later stage reads here is computed in place in a copy of C
  // that stays on the device, when C and the tiles fit.
  std::optional<tile_plan> resident_plan;
  const std::size_t c_bytes = residency::span(o.c_out.as_region());
  if (opt.keep_result && opt.resident && n.args.back().role == arg_role::out && c_bytes < prob.budget) {
    tiling_problem rp = prob;
    rp.budget -= c_bytes + dev.allocation_granularity();
    rp.c_resident = true;
    rp.c_written = opt.result_on_host;
    try {
      resident_plan = plan_tiles(rp);
    } catch (const plan_error&) {
    }
  }
  const bool resident = resident_plan.has_value();
  const tile_plan plan = resident ? *resident_plan : plan_tiles(prob);
  rep.tiling = plan.describe();
  const bool on_gpu = dev.kind() == device_kind::cuda;
  const contraction_desc::step_fn& step = on_gpu ? d.device : d.cpu;
  if (!step)
    throw invalid_argument(n.name, "device", "has no entry for " + dev.name() + " (the annotation gives none)");

  // The order of tiles: along the held panel, so it is loaded once per line.
  struct tile {
    std::size_t i0, mi, j0, nj;
    bool first_in_line;
  };
  std::vector<tile> tiles;
  const std::size_t TM = plan.tiles_m(), TN = plan.tiles_n(), KS = plan.steps_k();
  const bool cols_outer = plan.hold == held_panel::b_cols;
  for (std::size_t p = 0; p < (cols_outer ? TN : TM); ++p)
    for (std::size_t q = 0; q < (cols_outer ? TM : TN); ++q) {
      const std::size_t ti = cols_outer ? q : p, tj = cols_outer ? p : q;
      const std::size_t i0 = ti * plan.mt, j0 = tj * plan.nt;
      tiles.push_back({i0, std::min(plan.mt, d.m - i0), j0, std::min(plan.nt, d.n - j0), q == 0});
    }

  // Everything queued work touches outlives the streams (destroyed first,
  // after their work): pinned host memory, buffers, events.
  pinned_blocks pins{dev, {}};
  pins.add(o.a);
  pins.add(o.b);
  if (d.reads_c) pins.add(o.c_in);
  pins.add(o.c_out);
  const auto alloc = [&](std::size_t bytes) { return device_buffer(dev, std::max<std::size_t>(bytes, 1)); };
  device_buffer whole_c = resident ? alloc(c_bytes) : device_buffer();
  std::vector<device_buffer> cbuf, abuf, bbuf;
  for (int i = 0; i < plan.c_buffers; ++i) cbuf.push_back(alloc(plan.mt * plan.nt * eb));
  if (plan.hold == held_panel::a_rows)
    abuf.push_back(alloc(plan.mt * d.k * eb));
  else
    for (int i = 0; i < 2; ++i) abuf.push_back(alloc(plan.mt * plan.kt * eb));
  if (plan.hold == held_panel::b_cols)
    bbuf.push_back(alloc(d.k * plan.nt * eb));
  else
    for (int i = 0; i < 2; ++i) bbuf.push_back(alloc(plan.kt * plan.nt * eb));
  std::vector<event> done(tiles.size() * KS);         // step s finished
  std::vector<event> c_free(tiles.size());            // tile t written back: its C buffer is free
  std::vector<event> a_last(KS), b_last(KS);          // held panels: the latest step reading piece kk
  stream_set ss(dev);
  // Sequential: one stream, so nothing overlaps (the baseline of the pipeline).
  const stream_id in = ss.add();
  const stream_id run = opt.sequential ? in : ss.add();
  const stream_id out = opt.sequential ? in : ss.add();

  progress_line progress(opt.progress, "oa: " + what, done.size(), "tile step");
  std::exception_ptr first;
  try {
    std::size_t s = 0;
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      const tile& tl = tiles[t];
      const matrix_block c_host = o.c_out.sub(tl.i0, tl.j0, tl.mi, tl.nj);
      // C's tile: in place in the resident copy (host layout), or packed in a tile buffer.
      matrix_block c_dev = c_host;
      if (resident)
        c_dev.data = whole_c.data() + (c_host.data - o.c_out.data);
      else
        c_dev = c_host.packed_at(cbuf[t % cbuf.size()].data());
      const event* c_reuse = !resident && t >= cbuf.size() ? &c_free[t - cbuf.size()] : nullptr;
      for (std::size_t kk = 0; kk < KS; ++kk, ++s) {
        const std::size_t k0 = kk * plan.kt, kl = std::min(plan.kt, d.k - k0);
        // A's piece: its slot in the held row panel, loaded with the line's
        // first tile once the previous line's last step has read that slot;
        // or a double buffer, free once step s-2 has run.
        const matrix_block a_host = d.a_tile(o.a, tl.i0, tl.mi, k0, kl);
        const matrix_block b_host = d.b_tile(o.b, k0, kl, tl.j0, tl.nj);
        matrix_block a_dev, b_dev;
        bool load_a = true, load_b = true;
        if (plan.hold == held_panel::a_rows) {
          a_dev = a_host.packed_at(abuf[0].data() + kk * plan.mt * plan.kt * eb);
          load_a = tl.first_in_line;
          if (load_a && a_last[kk]) dev.wait_event(in, a_last[kk]);
        } else {
          a_dev = a_host.packed_at(abuf[s % 2].data());
        }
        if (plan.hold == held_panel::b_cols) {
          b_dev = b_host.packed_at(bbuf[0].data() + kk * plan.kt * plan.nt * eb);
          load_b = tl.first_in_line;
          if (load_b && b_last[kk]) dev.wait_event(in, b_last[kk]);
        } else {
          b_dev = b_host.packed_at(bbuf[s % 2].data());
        }
        if (s >= 2) dev.wait_event(in, done[s - 2]);  // the double-buffered slots of step s-2
        if (load_a) dev.copy_to_device_async(a_dev.as_region(), a_host.as_region(), in);
        if (load_b) dev.copy_to_device_async(b_dev.as_region(), b_host.as_region(), in);
        if (kk == 0 && d.reads_c) {
          if (c_reuse) dev.wait_event(in, *c_reuse);
          const matrix_block c_old = o.c_in.sub(tl.i0, tl.j0, tl.mi, tl.nj);
          dev.copy_to_device_async(c_dev.as_region(), c_old.as_region(), in);
        }
        dev.wait_event(run, dev.record_event(in));
        if (kk == 0 && !d.reads_c && c_reuse) dev.wait_event(run, *c_reuse);
        const bool first_step = kk == 0;
        dev.launch_async({launch_name(n),
                          [&step, a_dev, b_dev, c_dev, first_step](const stream_view& v) {
                            step(a_dev, b_dev, c_dev, first_step, v);
                          },
                          {}},
                         run);
        done[s] = dev.record_event(run);
        if (plan.hold == held_panel::a_rows) a_last[kk] = done[s];
        if (plan.hold == held_panel::b_cols) b_last[kk] = done[s];
        progress.update(s + 1);
      }
      if (!resident || opt.result_on_host) {
        dev.wait_event(out, done[s - 1]);
        dev.copy_to_host_async(c_host.as_region(), c_dev.as_region(), out);
        c_free[t] = dev.record_event(out);
      }
    }
  } catch (...) {
    first = std::current_exception();
  }
  if (std::exception_ptr e = ss.drain(); e && !first) first = e;
  if (resident && !first) {
    kept = std::move(whole_c);
    rep.resident_bytes = c_bytes;
  }
  rep.chunks = tiles.size();
  rep.streams = opt.sequential ? 1 : 3;
  rep.sequential = opt.sequential;
  return first;
}

bool is_device_fault(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const device_fault&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

stage_report run_contraction(const stage& s_in, const std::vector<call_node>& nodes, device& dev, device& host,
                             const run_options& opt) {
  const auto t0 = clock_type::now();
  stage_report rep = report_for(s_in, nodes, dev, opt);
  const stage s = cancel_failed(s_in, nodes);
  if (s.calls.empty()) return rep;
  check_caller_objects(s, nodes);
  const call_node& n = nodes[static_cast<std::size_t>(s.calls.front())];
  const contraction_desc& d = *n.contraction;
  const std::string what = opt.stage_name + " [" + n.name + " " + std::to_string(d.m) + "x" + std::to_string(d.k) +
                           " by " + std::to_string(d.k) + "x" + std::to_string(d.n) + "] on " + dev.name();

  const operands o = operands_of(n);
  // C goes back to what it was if the stage fails: kept when the caller sees
  // C, or when C is read and written in place (a host re-run needs the old C).
  const c_backup backup(o.c_out, o.out->user_storage || (d.reads_c && o.c_in.data == o.c_out.data));
  rep.rollback_bytes = backup.bytes();

  dev.set_recording(true);
  (void)dev.take_records();
  dev.reset_peak();
  const bool degenerate = d.m == 0 || d.n == 0 || d.k == 0;
  device_buffer kept;  // the result's resident copy, when one is kept
  std::exception_ptr err = dev.host_accessible() || degenerate ? run_in_host_memory(n, o, dev, opt, rep)
                                                               : run_tiled(n, o, dev, opt, rep, what, kept);
  rep.peak_device_bytes = dev.peak_bytes();
  add_device_records(rep, dev, opt);
  rep.device_chunks = rep.chunks;

  if (err && is_device_fault(err) && &dev != &host) {
    // The device is lost: the whole product again on the host, from C as it was.
    rep.device_fault = message_of(err);
    rep.device_chunks = 0;
    backup.restore();
    host.set_recording(true);
    (void)host.take_records();
    stage_report again;
    err = run_in_host_memory(n, o, host, {}, again);
    (void)host.take_records();
    rep.host_reruns = again.chunks;
  }
  if (err) {
    backup.restore();
    rep.error = message_of(err);
    fail_stage(s, nodes, err);
  } else {
    if (kept.data())
      opt.resident->add(n.args.back().value, std::move(kept), residency::whole_region(*o.out), opt.result_on_host);
    n.for_each_output([](const value_ptr& v) { v->status = value_status::ready; });
  }
  rep.seconds = seconds_since(t0);
  return rep;
}

}  // namespace oa::detail
