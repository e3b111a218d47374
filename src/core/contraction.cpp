// Contractions, tile by tile. On a device with its own memory, C is cut into
// tiles and k into steps (core/tiling.hpp chooses the shapes from the
// budget and the device's rates); three streams pipeline the work: one
// stages A and B pieces (and C's old tiles) in, up to the plan's lookahead
// steps ahead of the steps, one runs the steps, one writes finished C tiles
// out while the next tile computes. Events order them: a load waits only for
// the step that last read its buffer, a step for its own loads; a line's
// held panel is prefetched as the previous line releases it. A C tile
// accumulates on the device over all its k steps before it goes back once.
// On a device whose memory is the host's, C is cut into one part per
// stream and each part is one product.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <new>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/executor.hpp"
#include "core/progress.hpp"
#include "core/product_rates.hpp"
#include "core/tiling.hpp"
#include "oa/core/error.hpp"
#include "oa/core/pinned.hpp"

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

/// An operand that shares storage with C (gemm(1, A, C, 1, C)) would be read
/// after tiles of C were written: it is read from a copy taken first.
struct unaliased {
  std::vector<std::byte> a, b;
  explicit unaliased(operands& o) {
    take(o.a, a, o.c_out);
    take(o.b, b, o.c_out);
  }

 private:
  static void take(matrix_block& m, std::vector<std::byte>& copy, const matrix_block& c) {
    const std::size_t mb = span_bytes(m), cb = span_bytes(c);
    if (mb == 0 || cb == 0 || m.data + mb <= c.data || c.data + cb <= m.data) return;
    copy.assign(m.data, m.data + mb);
    m.data = copy.data();
  }
};

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
  /// C as it was, packed; empty when nothing was kept.
  matrix_block saved() const noexcept {
    return saved_.empty() ? matrix_block{} : c_.packed_at(const_cast<std::byte*>(saved_.data()));
  }

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

/// One C tile of a tiled contraction, in the order the device runs them.
struct tile {
  std::size_t i0, mi, j0, nj;
  bool first_in_line;
};

/// The order of tiles: along the held panel, so it is loaded once per line.
std::vector<tile> tile_order(const tile_plan& plan, const contraction_desc& d) {
  std::vector<tile> tiles;
  const std::size_t TM = plan.tiles_m(), TN = plan.tiles_n();
  const bool cols_outer = plan.hold == held_panel::b_cols;
  for (std::size_t p = 0; p < (cols_outer ? TN : TM); ++p)
    for (std::size_t q = 0; q < (cols_outer ? TM : TN); ++q) {
      const std::size_t ti = cols_outer ? q : p, tj = cols_outer ? p : q;
      const std::size_t i0 = ti * plan.mt, j0 = tj * plan.nt;
      tiles.push_back({i0, std::min(plan.mt, d.m - i0), j0, std::min(plan.nt, d.n - j0), q == 0});
    }
  return tiles;
}

/// Block `bl` of a C tile's outer vectors (columns of a column-major tile).
matrix_block outer_part(const matrix_block& c, const c_block& bl) {
  const std::size_t w = bl.end - bl.begin;
  return c.row_major ? c.sub(bl.begin, 0, w, c.cols) : c.sub(0, bl.begin, c.rows, w);
}

/// A step's operands on the device.
struct step_operands {
  matrix_block a, b, c;
};

/// The part of a step that computes block `bl` of C: B's columns of a
/// column-major C, A's rows of a row-major one. Each element's sum is the
/// same as the whole step's.
step_operands block_of(const contraction_desc& d, const step_operands& s, const c_block& bl) {
  const std::size_t w = bl.end - bl.begin, kl = d.trans_a ? s.a.rows : s.a.cols;
  if (s.c.row_major) return {d.a_tile(s.a, bl.begin, w, 0, kl), s.b, outer_part(s.c, bl)};
  return {s.a, d.b_tile(s.b, 0, kl, bl.begin, w), outer_part(s.c, bl)};
}

/// The blocks each C tile is written back in, and the events of each
/// block's copies. With one C buffer, a tile's last step and the next tile's
/// first run per block of C's outer vectors (contiguous in the packed
/// buffer): a block's copy back starts once its product is done, and the
/// next tile's block waits only for the copies of the bytes it overwrites,
/// so that the write-back overlaps products instead of idling the device.
struct c_tile_blocks {
  std::vector<std::vector<c_block>> blocks;             // per tile; one block: the whole tile
  std::vector<std::size_t> inner;                       // per tile: elements per outer vector
  std::vector<std::vector<event>> loaded, computed, written;  // per tile, per block: old C in, product, copy back

  c_tile_blocks(const std::vector<tile>& tiles, const matrix_block& c, bool split, int most)
      : blocks(tiles.size()), inner(tiles.size()), loaded(tiles.size()), computed(tiles.size()), written(tiles.size()) {
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      const matrix_block ct = c.sub(tiles[t].i0, tiles[t].j0, tiles[t].mi, tiles[t].nj);
      inner[t] = ct.inner();
      blocks[t] = split ? c_write_blocks(ct.outer(), ct.inner(), most) : std::vector<c_block>{{0, ct.outer()}};
    }
  }
  /// Tile t is queued (again): its earlier events are done with.
  void reset(std::size_t t) {
    loaded[t].clear();
    computed[t].clear();
    written[t].clear();
  }
  /// Makes stream `s` wait for the copies back of tile `prev`'s blocks that
  /// share bytes of the C buffer with block `bl` of tile t.
  void wait_written(device& dev, stream_id s, std::size_t prev, std::size_t t, const c_block& bl) const {
    const std::size_t lo = bl.begin * inner[t], hi = bl.end * inner[t];
    for (std::size_t j = 0; j < written[prev].size(); ++j)
      if (blocks[prev][j].begin * inner[prev] < hi && lo < blocks[prev][j].end * inner[prev])
        dev.wait_event(s, written[prev][j]);
  }
  /// Adds tile t's block events, which say whether its copies failed.
  void add_events(std::size_t t, std::vector<const event*>& evs) const {
    for (const auto* v : {&loaded[t], &written[t]})
      for (const event& e : *v) evs.push_back(&e);
  }
};

/// How the tiled pipeline ended: tiles [0, rerun_from) are done (on the
/// host, or in C's device copy); after a sticky fault (`lost`) the others
/// must run on the host.
struct tiled_outcome {
  std::exception_ptr error;  // an error of the stage's call (not a device fault): the stage fails
  std::exception_ptr fault;  // the first device fault, if any
  bool lost = false;         // a sticky fault: the device is unusable
  tile_plan plan;
  std::vector<tile> tiles;
  std::size_t rerun_from = 0;
  std::size_t host_tiles = 0;  // tiles that failed on the device and ran on the host
};

/// Runs tiles [from, to) of a plan on the host; returns the first error.
using host_rerun_fn = std::function<std::exception_ptr(const tile_plan& plan, const std::vector<tile>& tiles,
                                                       std::size_t from, std::size_t to)>;

/// Sorts an error of the pipeline into the outcome.
void classify(tiled_outcome& out, const std::exception_ptr& e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const device_fault& f) {
    if (!out.fault) out.fault = e;
    out.lost = out.lost || f.sticky();
  } catch (...) {
    if (!out.error) out.error = e;
  }
}

/// A buffer of host memory aligned as the device's allocations are.
struct aligned_bytes {
  static constexpr std::size_t alignment = 256;
  explicit aligned_bytes(std::size_t bytes)
      : p(static_cast<std::byte*>(::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{alignment}))) {}
  ~aligned_bytes() { ::operator delete(p, std::align_val_t{alignment}); }
  aligned_bytes(const aligned_bytes&) = delete;
  aligned_bytes& operator=(const aligned_bytes&) = delete;
  std::byte* p;
};

/// One tile as the device computes it: A's and B's pieces and C's tile
/// packed as in device memory, the same k steps of the same step function
/// (the emulated device's twin), so that the host gets the device's bits.
void host_tile(const contraction_desc& d, const operands& o, const tile_plan& plan, const tile& tl,
               const matrix_block& c_old) {
  const std::size_t eb = d.elem_bytes;
  aligned_bytes cbuf(tl.mi * tl.nj * eb), abuf(tl.mi * plan.kt * eb), bbuf(plan.kt * tl.nj * eb);
  const matrix_block c_host = o.c_out.sub(tl.i0, tl.j0, tl.mi, tl.nj);
  const matrix_block c = c_host.packed_at(cbuf.p);
  if (d.reads_c) copy_region(c.as_region(), c_old.sub(tl.i0, tl.j0, tl.mi, tl.nj).as_region());
  for (std::size_t kk = 0; kk < plan.steps_k(); ++kk) {
    const std::size_t k0 = kk * plan.kt, kl = std::min(plan.kt, d.k - k0);
    const matrix_block a_host = d.a_tile(o.a, tl.i0, tl.mi, k0, kl), b_host = d.b_tile(o.b, k0, kl, tl.j0, tl.nj);
    const matrix_block a = a_host.packed_at(abuf.p), b = b_host.packed_at(bbuf.p);
    copy_region(a.as_region(), a_host.as_region());
    copy_region(b.as_region(), b_host.as_region());
    d.cpu(a, b, c, kk == 0, {});
  }
  copy_region(c_host.as_region(), c.as_region());
}

/// Tiles [from, end) of a tiled contraction again on the host, one per
/// launch over the host's streams; C's old tiles from `c_old`. Returns the
/// first error.
std::exception_ptr rerun_tiles_on_host(const call_node& n, const operands& o, device& host, const tile_plan& plan,
                                       const std::vector<tile>& tiles, std::size_t from, std::size_t to,
                                       const matrix_block& c_old) {
  const contraction_desc& d = *n.contraction;
  if (!d.cpu)
    return std::make_exception_ptr(
        invalid_argument(n.name, "device", "has no host entry to re-run tiles on (the annotation gives none)"));
  if (d.reads_c && !c_old.data)
    return std::make_exception_ptr(
        invalid_argument(n.name, "C", "has no copy of its old values to re-run tiles from (internal error)"));
  const std::size_t left = to - from;
  const auto nstreams = std::min<std::size_t>(static_cast<std::size_t>(std::max(host.preferred_streams(), 1)), left);
  stream_set ss(host);
  std::exception_ptr first;
  try {
    for (std::size_t i = 0; i < nstreams; ++i) ss.add();
    for (std::size_t k = 0; k < left; ++k) {
      const tile tl = tiles[from + k];
      host.launch_async({"host re-run", [&d, &o, &plan, tl, c_old](const stream_view&) { host_tile(d, o, plan, tl, c_old); }, {}},
                        ss.streams[k % nstreams].id());
    }
  } catch (...) {
    first = std::current_exception();
  }
  if (std::exception_ptr e = ss.drain(); e && !first) first = e;
  return first;
}

/// After a fault, the finished tiles of a C kept only on the device go to the
/// host (the result is not kept there); all tiles re-run if that fails too.
void copy_back_finished(device& dev, tiled_outcome& res, const operands& o, const device_buffer& whole_c,
                        const std::vector<char>& on_host) {
  // Tiles the host ran before are run again with the others: C is whole on the host either way.
  if (res.lost) {
    res.rerun_from = 0;
    res.host_tiles = 0;
    return;
  }
  try {
    stream_set ss(dev);
    const stream_id s = ss.add();
    for (std::size_t t = 0; t < res.rerun_from; ++t) {
      if (on_host[t]) continue;
      const tile& tl = res.tiles[t];
      const matrix_block c_host = o.c_out.sub(tl.i0, tl.j0, tl.mi, tl.nj);
      matrix_block c_dev = c_host;
      c_dev.data = whole_c.data() + (c_host.data - o.c_out.data);
      dev.copy_to_host_async(c_host.as_region(), c_dev.as_region(), s);
    }
    if (std::exception_ptr e = ss.drain()) std::rethrow_exception(e);
  } catch (...) {
    res.rerun_from = 0;
    res.host_tiles = 0;
    res.lost = true;  // the device could not give back what it holds: give up on it
    if (!res.fault) res.fault = std::current_exception();
  }
}

/// How a tiled contraction is cut: the plan, and whether it computes C in
/// place in a copy of C (`c_bytes` of it) that stays on the device.
struct tiled_choice {
  tile_plan plan;
  bool resident = false;
  std::size_t c_bytes = 0;
};

/// The tiling of a contraction on a device with its own memory, whose steps run `step`.
tiled_choice choose_tiling(const call_node& n, const operands& o, device& dev, const run_options& opt,
                           const contraction_desc::step_fn& step) {
  const contraction_desc& d = *n.contraction;
  const std::size_t reserved = opt.resident ? opt.resident->pinned_bytes() : 0;
  tiling_problem prob{d.m, d.n, d.k, d.elem_bytes, d.reads_c,
                      dev.memory_budget() - std::min(reserved, dev.memory_budget()), dev.allocation_granularity()};
  if (opt.chunk_bytes) prob.budget = std::min(prob.budget, opt.chunk_bytes);
  // Over a known link, a GPU's steps are timed at the rates measured for
  // each shape there (cuBLAS); other devices plan with the rates they report.
  const bool own_rates = set_tiling_device(prob, dev);
  if (own_rates && prob.rates.h2d > 0 && prob.rates.d2h > 0 &&
      (dev.kind() == device_kind::cuda || prob.rates.flops(d.elem_bytes) > 0))
    prob.shapes = product_rates(dev, d, step, prob.budget, prob.rates.flops(d.elem_bytes));
  // Pageable operands go through the staging engine: the time model counts its rate.
  prob.staged = !is_pinned(o.a.data, span_bytes(o.a)) || !is_pinned(o.b.data, span_bytes(o.b));
  // A result a later stage reads here is computed in place in a copy of C
  // that stays on the device, when C and the tiles fit.
  tiled_choice ch;
  ch.c_bytes = residency::span(o.c_out.as_region());
  if (opt.keep_result && opt.resident && n.args.back().role == arg_role::out && ch.c_bytes < prob.budget) {
    tiling_problem rp = prob;
    rp.budget -= ch.c_bytes + dev.allocation_granularity();
    rp.c_resident = true;
    rp.c_written = opt.result_on_host;
    try {
      ch.plan = plan_tiles(rp);
      ch.resident = true;
    } catch (const plan_error&) {
    }
  }
  if (!ch.resident) ch.plan = plan_tiles(prob);
  return ch;
}

/// One slot of the next line's held panel, copied in on `in` after step
/// `after` has read the slot and before the loads of step `before`.
struct panel_piece {
  std::size_t after, before;
  matrix_block dev, host;
};

/// The tiled pipeline's state: the plan, the streams, and what queued work
/// touches. Everything queued work touches outlives the streams (declared
/// after it, so destroyed first, after their work): pinned host memory,
/// buffers, events.
struct tiled_pipeline {
  tiled_pipeline(const call_node& node, const operands& ops, device& target, const run_options& opt,
                 const contraction_desc::step_fn& fn, const tiled_choice& ch, const matrix_block& old_c,
                 tiled_outcome& outcome, stage_report& rep);
  std::size_t queue_tiles(std::size_t begin, progress_line& progress, std::exception_ptr& first);
  std::size_t first_failed(std::size_t begin, std::size_t queued);

  const call_node& n;
  const operands& o;
  device& dev;
  const contraction_desc& d;
  const contraction_desc::step_fn& step;
  tiled_outcome& res;
  const tile_plan& plan;
  const std::vector<tile>& tiles;
  const matrix_block& c_kept;  // C's old values for the rounds after the first
  const bool resident, write_back;
  const std::size_t eb, KS;
  // A streamed operand has one piece buffer per step of lookahead: step s
  // uses buffer s % lookahead, free once step s - lookahead has run.
  const std::size_t ahead;
  const std::size_t lag;  // a slot read by step s is needed by step s + KS

  pinned_blocks pins;
  device_buffer whole_c;
  std::vector<device_buffer> cbuf, abuf, bbuf;
  std::vector<event> done;    // step s finished
  std::vector<event> loaded;  // step s's pieces copied in
  c_tile_blocks cblocks;
  std::vector<event> a_last, b_last;  // held panels: the latest step reading piece kk
  stream_set ss;
  stream_id in = 0, run = 0, out = 0;
  std::deque<panel_piece> prefetch;

 private:
  void allocate_buffers(std::size_t c_bytes);
  matrix_block c_tile_on_device(std::size_t t, const matrix_block& c_host) const;
  step_operands load_step(std::size_t begin, std::size_t t, std::size_t kk, std::size_t s);
  bool place_piece(bool held, const std::vector<device_buffer>& bufs, std::size_t slot_bytes, const event& last,
                   bool first_tile, std::size_t kk, std::size_t s, const matrix_block& host, matrix_block& on_device);
  void flush_prefetch(std::size_t s);
  void prefetch_next_panel(std::size_t t, std::size_t kk, std::size_t s, const step_operands& op);
  void run_step(std::size_t begin, std::size_t t, std::size_t kk, std::size_t s, const step_operands& op,
                const matrix_block& c_host);
  void ready_c_block(std::size_t begin, std::size_t t, const step_operands& part, const c_block& bl);
  void write_back_block(std::size_t t, const step_operands& part, const matrix_block& c_host_part);
};

tiled_pipeline::tiled_pipeline(const call_node& node, const operands& ops, device& target, const run_options& opt,
                               const contraction_desc::step_fn& fn, const tiled_choice& ch,
                               const matrix_block& old_c, tiled_outcome& outcome, stage_report& rep)
    : n(node), o(ops), dev(target), d(*node.contraction), step(fn), res(outcome), plan(outcome.plan),
      tiles(outcome.tiles), c_kept(old_c), resident(ch.resident), write_back(!ch.resident || opt.result_on_host),
      eb(d.elem_bytes), KS(plan.steps_k()), ahead(static_cast<std::size_t>(std::max(plan.lookahead, 2))),
      lag(std::min(ahead, KS)),
      pins{dev, {}}, done(tiles.size() * KS), loaded(tiles.size() * KS),
      cblocks(tiles, o.c_out, !resident && plan.c_buffers == 1, plan.c_blocks), a_last(KS), b_last(KS), ss(dev) {
  pins.add(o.a);
  pins.add(o.b);
  if (d.reads_c) pins.add(o.c_in);
  pins.add(o.c_out);
  allocate_buffers(ch.c_bytes);
  if (cblocks.blocks[0].size() > 1)
    rep.tiling += ", C written back in " + std::to_string(cblocks.blocks[0].size()) + " blocks";
  // Sequential: one stream, so nothing overlaps (the baseline of the pipeline).
  in = ss.add();
  run = opt.sequential ? in : ss.add();
  out = opt.sequential ? in : ss.add();
}

/// C's resident copy, its tile buffers, and A's and B's: a held panel, or a
/// piece buffer per step of lookahead.
void tiled_pipeline::allocate_buffers(std::size_t c_bytes) {
  const auto alloc = [&](std::size_t bytes) { return device_buffer(dev, std::max<std::size_t>(bytes, 1)); };
  if (resident) whole_c = alloc(c_bytes);
  for (int i = 0; i < plan.c_buffers; ++i) cbuf.push_back(alloc(plan.mt * plan.nt * eb));
  if (plan.hold == held_panel::a_rows)
    abuf.push_back(alloc(plan.mt * d.k * eb));
  else
    for (std::size_t i = 0; i < ahead; ++i) abuf.push_back(alloc(plan.mt * plan.kt * eb));
  if (plan.hold == held_panel::b_cols)
    bbuf.push_back(alloc(d.k * plan.nt * eb));
  else
    for (std::size_t i = 0; i < ahead; ++i) bbuf.push_back(alloc(plan.kt * plan.nt * eb));
}

/// C's tile: in place in the resident copy (host layout), or packed in a tile buffer.
matrix_block tiled_pipeline::c_tile_on_device(std::size_t t, const matrix_block& c_host) const {
  matrix_block c_dev = c_host;
  if (resident)
    c_dev.data = whole_c.data() + (c_host.data - o.c_out.data);
  else
    c_dev = c_host.packed_at(cbuf[t % cbuf.size()].data());
  return c_dev;
}

/// Queues tiles [begin, end); returns how many were queued whole, and the
/// error that stopped the queueing.
std::size_t tiled_pipeline::queue_tiles(std::size_t begin, progress_line& progress, std::exception_ptr& first) {
  std::size_t queued = begin;
  prefetch.clear();
  try {
    std::size_t s = begin * KS;
    for (std::size_t t = begin; t < tiles.size(); ++t) {
      const tile& tl = tiles[t];
      const matrix_block c_host = o.c_out.sub(tl.i0, tl.j0, tl.mi, tl.nj);
      const matrix_block c_dev = c_tile_on_device(t, c_host);
      cblocks.reset(t);
      for (std::size_t kk = 0; kk < KS; ++kk, ++s) {
        step_operands op = load_step(begin, t, kk, s);
        op.c = c_dev;
        run_step(begin, t, kk, s, op, c_host);
        if (plan.hold == held_panel::a_rows) a_last[kk] = done[s];
        if (plan.hold == held_panel::b_cols) b_last[kk] = done[s];
        prefetch_next_panel(t, kk, s, op);
        progress.update(s + 1);
      }
      queued = t + 1;
    }
  } catch (...) {
    first = std::current_exception();
  }
  return queued;
}

/// Queues the loads of tile t's step kk (global s) on `in`, after the panel
/// prefetches due by then; returns A's and B's pieces on the device.
step_operands tiled_pipeline::load_step(std::size_t begin, std::size_t t, std::size_t kk, std::size_t s) {
  const tile& tl = tiles[t];
  const std::size_t k0 = kk * plan.kt, kl = std::min(plan.kt, d.k - k0);
  const matrix_block a_host = d.a_tile(o.a, tl.i0, tl.mi, k0, kl);
  const matrix_block b_host = d.b_tile(o.b, k0, kl, tl.j0, tl.nj);
  matrix_block a_dev, b_dev;
  const bool load_a = place_piece(plan.hold == held_panel::a_rows, abuf, plan.mt * plan.kt * eb, a_last[kk],
                                  t == begin, kk, s, a_host, a_dev);
  const bool load_b = place_piece(plan.hold == held_panel::b_cols, bbuf, plan.kt * plan.nt * eb, b_last[kk],
                                  t == begin, kk, s, b_host, b_dev);
  flush_prefetch(s);
  if (s >= begin * KS + ahead) dev.wait_event(in, done[s - ahead]);  // the piece buffers of step s - ahead
  if (load_a) dev.copy_to_device_async(a_dev.as_region(), a_host.as_region(), in);
  if (load_b) dev.copy_to_device_async(b_dev.as_region(), b_host.as_region(), in);
  loaded[s] = dev.record_event(in);
  return {a_dev, b_dev, {}};
}

/// Where step s's piece of an operand goes: its slot kk in the held panel,
/// prefetched by the previous line's last tile (loaded here by the first
/// tile queued, once the step that last read the slot has run); or a piece
/// buffer, free once step s - ahead has run. Returns whether to copy it in.
bool tiled_pipeline::place_piece(bool held, const std::vector<device_buffer>& bufs, std::size_t slot_bytes,
                                 const event& last, bool first_tile, std::size_t kk, std::size_t s,
                                 const matrix_block& host, matrix_block& on_device) {
  if (!held) {
    on_device = host.packed_at(bufs[s % ahead].data());
    return true;
  }
  on_device = host.packed_at(bufs[0].data() + kk * slot_bytes);
  if (first_tile && last) dev.wait_event(in, last);
  return first_tile;
}

/// Copies in the panel slots due before the loads of step s.
void tiled_pipeline::flush_prefetch(std::size_t s) {
  for (; !prefetch.empty() && prefetch.front().before <= s; prefetch.pop_front()) {
    dev.wait_event(in, done[prefetch.front().after]);
    dev.copy_to_device_async(prefetch.front().dev.as_region(), prefetch.front().host.as_region(), in);
  }
}

/// The next line's held panel is prefetched slot by slot: slot kk, read
/// last by this line's last tile at step `after`, is copied in on `in`
/// before the loads of step after + min(lag + kk, KS): never waiting longer
/// than those loads do, and spread over two tiles' steps so that the
/// panel does not crowd the pieces of the steps in between off the link.
void tiled_pipeline::prefetch_next_panel(std::size_t t, std::size_t kk, std::size_t s, const step_operands& op) {
  if (plan.hold == held_panel::none || t + 1 >= tiles.size() || !tiles[t + 1].first_in_line) return;
  const tile& nx = tiles[t + 1];
  const std::size_t k0 = kk * plan.kt, kl = std::min(plan.kt, d.k - k0);
  const std::size_t before = s + std::min(lag + kk, KS);
  prefetch.push_back(plan.hold == held_panel::a_rows
                         ? panel_piece{s, before, op.a, d.a_tile(o.a, nx.i0, nx.mi, k0, kl)}
                         : panel_piece{s, before, op.b, d.b_tile(o.b, k0, kl, nx.j0, nx.nj)});
  prefetch.back().dev = prefetch.back().host.packed_at(prefetch.back().dev.data);
}

/// Queues tile t's step kk (global s) on `run` once its pieces are in, per
/// block on a tile's first and last steps: the first's blocks wait for the
/// C buffer's bytes (and load C's old values, when read), the last's go
/// back to the host one by one.
void tiled_pipeline::run_step(std::size_t begin, std::size_t t, std::size_t kk, std::size_t s,
                              const step_operands& op, const matrix_block& c_host) {
  const bool first_step = kk == 0, last_step = kk + 1 == KS;
  const std::vector<c_block> whole{{0, op.c.outer()}};
  const std::vector<c_block>& bls = first_step || last_step ? cblocks.blocks[t] : whole;
  dev.wait_event(run, loaded[s]);
  for (const c_block& bl : bls) {
    const step_operands part = block_of(d, op, bl);
    if (first_step) ready_c_block(begin, t, part, bl);
    dev.launch_async({launch_name(n),
                      [&fn = step, part, first_step](const stream_view& v) { fn(part.a, part.b, part.c, first_step, v); },
                      {}},
                     run);
    if (last_step && write_back) write_back_block(t, part, outer_part(c_host, bl));
  }
  done[s] = dev.record_event(run);
}

/// Before block `bl` of tile t's first step: a reused C buffer's bytes wait
/// for the copies back of the tile that used them, and C's old values, when
/// read, come in.
void tiled_pipeline::ready_c_block(std::size_t begin, std::size_t t, const step_operands& part, const c_block& bl) {
  const bool reuse = !resident && t >= begin + cbuf.size();
  if (reuse) cblocks.wait_written(dev, d.reads_c ? in : run, t - cbuf.size(), t, bl);
  if (!d.reads_c) return;
  // After a fault, C in place may hold tiles the device wrote before
  // its stream failed: later rounds read the old values kept aside.
  const tile& tl = tiles[t];
  const matrix_block c_old = (begin == 0 ? o.c_in : c_kept).sub(tl.i0, tl.j0, tl.mi, tl.nj);
  dev.copy_to_device_async(part.c.as_region(), outer_part(c_old, bl).as_region(), in);
  cblocks.loaded[t].push_back(dev.record_event(in));
  dev.wait_event(run, cblocks.loaded[t].back());
}

/// A block of tile t's product goes back to the host on `out` once computed.
void tiled_pipeline::write_back_block(std::size_t t, const step_operands& part, const matrix_block& c_host_part) {
  cblocks.computed[t].push_back(dev.record_event(run));
  dev.wait_event(out, cblocks.computed[t].back());
  dev.copy_to_host_async(c_host_part.as_region(), part.c.as_region(), out);
  cblocks.written[t].push_back(dev.record_event(out));
}

/// The first tile of [begin, queued) whose events carry an error (a stream
/// that failed skipped its later work: that tile and those after it did not
/// finish), or `queued`.
std::size_t tiled_pipeline::first_failed(std::size_t begin, std::size_t queued) {
  for (std::size_t t = begin; t < queued; ++t) {
    std::vector<const event*> evs;
    for (std::size_t st = t * KS; st < (t + 1) * KS; ++st) evs.insert(evs.end(), {&loaded[st], &done[st]});
    cblocks.add_events(t, evs);
    bool failed = false;
    for (const event* e : evs)
      if (*e)
        if (std::exception_ptr err = dev.synchronize_event(*e)) {
          classify(res, err);
          failed = true;
        }
    if (failed) return t;
  }
  return queued;
}

/// The tiled pipeline on a device with its own memory; on return the device
/// has finished everything it was given.
tiled_outcome run_tiled(const call_node& n, const operands& o, device& dev, const run_options& opt,
                        stage_report& rep, const std::string& what, device_buffer& kept, const matrix_block& c_kept,
                        const host_rerun_fn& host_rerun) {
  const contraction_desc& d = *n.contraction;
  const bool on_gpu = dev.kind() == device_kind::cuda;
  const contraction_desc::step_fn& step = on_gpu ? d.device : d.cpu;
  if (!step)
    throw invalid_argument(n.name, "device", "has no entry for " + dev.name() + " (the annotation gives none)");
  const tiled_choice ch = choose_tiling(n, o, dev, opt, step);
  rep.tiling = ch.plan.describe();

  tiled_outcome res;
  res.plan = ch.plan;
  res.tiles = tile_order(ch.plan, d);
  const std::vector<tile>& tiles = res.tiles;
  tiled_pipeline p(n, o, dev, opt, step, ch, c_kept, res, rep);
  progress_line progress(opt.progress, "oa: " + what, p.done.size(), "tile step");

  // Rounds: after a transient fault the tile that failed runs on the host,
  // and the device goes on with the tiles after it.
  std::vector<char> on_host(tiles.size(), 0);
  for (std::size_t begin = 0; begin < tiles.size();) {
    std::exception_ptr first;
    const std::size_t queued = p.queue_tiles(begin, progress, first);
    if (std::exception_ptr e = p.ss.drain(); e && !first) first = e;
    classify(res, first);
    res.rerun_from = p.first_failed(begin, queued);
    if (res.error || res.lost || res.rerun_from == tiles.size()) break;
    if (std::exception_ptr e = host_rerun(res.plan, tiles, res.rerun_from, res.rerun_from + 1)) {
      res.error = e;
      break;
    }
    on_host[res.rerun_from] = 1;
    ++res.host_tiles;
    begin = res.rerun_from + 1;
    res.rerun_from = tiles.size();
  }
  if (!res.fault && !res.error && ch.resident) {
    kept = std::move(p.whole_c);
    rep.resident_bytes = ch.c_bytes;
  } else if (ch.resident && !opt.result_on_host && !res.error) {
    copy_back_finished(dev, res, o, p.whole_c, on_host);
  }
  rep.chunks = tiles.size();
  rep.streams = opt.sequential ? 1 : 3;
  rep.sequential = opt.sequential;
  return res;
}

}  // namespace

namespace {

/// A part of a contraction over several devices: C's rows [p0, p0 + len)
/// (or its columns, when C has more), with the operands' blocks for them.
struct contraction_part {
  call_node node;  // the call, with the part's dimensions
  operands ops;
  bool by_rows = true;
  std::size_t p0 = 0, len = 0;
  /// The part's block of a matrix shaped as C (C's old values).
  matrix_block of_c(const matrix_block& c) const {
    const contraction_desc& d = *node.contraction;
    return by_rows ? c.sub(p0, 0, len, d.n) : c.sub(0, p0, d.m, len);
  }
};

/// C cut along its longer side into one part per device, each in proportion
/// to its device's link (equal where a link is unthrottled or unknown).
std::vector<contraction_part> cut(const call_node& n, const operands& o, const std::vector<device*>& devs) {
  const contraction_desc& d = *n.contraction;
  const bool by_rows = d.m >= d.n;
  const std::size_t extent = by_rows ? d.m : d.n;
  std::vector<double> weight;
  bool known = true;
  for (device* dev : devs) {
    const device_rates r = dev->rates();
    weight.push_back(std::min(r.h2d, r.d2h > 0 ? r.d2h : r.h2d));
    known = known && weight.back() > 0;
  }
  double total = 0;
  for (double& w : weight) total += known ? w : (w = 1);
  std::vector<contraction_part> parts;
  std::size_t p0 = 0;
  double acc = 0;
  for (std::size_t k = 0; k < devs.size(); ++k) {
    acc += weight[k];
    const std::size_t p1 =
        k + 1 == devs.size() ? extent : std::max(p0, static_cast<std::size_t>(double(extent) * acc / total + 0.5));
    contraction_part p{n, o, by_rows, p0, p1 - p0};
    auto sub = std::make_shared<contraction_desc>(d);
    (by_rows ? sub->m : sub->n) = p.len;
    if (by_rows)
      p.ops.a = d.trans_a ? o.a.sub(0, p0, d.k, p.len) : o.a.sub(p0, 0, p.len, d.k);
    else
      p.ops.b = d.trans_b ? o.b.sub(p0, 0, p.len, d.k) : o.b.sub(0, p0, d.k, p.len);
    p.node.contraction = std::move(sub);
    p.ops.c_out = p.of_c(o.c_out);
    if (o.c_in.data) p.ops.c_in = p.of_c(o.c_in);
    parts.push_back(std::move(p));
    p0 = p1;
  }
  return parts;
}

/// One part on one device (its own thread): the tiled pipeline, then the
/// tiles it did not finish after a sticky fault again on the host.
struct part_run {
  stage_report rep;
  tiled_outcome out;
  std::exception_ptr err;
  std::size_t host_tiles = 0;
};

/// Runs part `p` on `dev`; tiles re-run on `host` one part at a time
/// (`host_mutex`), from C's old values `part_old`.
part_run run_part(const contraction_part& p, device& dev, device& host, const run_options& opt,
                  const matrix_block& part_old, std::mutex& host_mutex) {
  part_run r;
  try {
    dev.set_recording(true);
    (void)dev.take_records();
    dev.reset_peak();
    const host_rerun_fn on_host = [&](const tile_plan& plan, const std::vector<tile>& tiles, std::size_t from,
                                      std::size_t to) {
      std::lock_guard lock(host_mutex);
      return rerun_tiles_on_host(p.node, p.ops, host, plan, tiles, from, to, part_old);
    };
    device_buffer kept;  // none: nothing is kept
    r.out = run_tiled(p.node, p.ops, dev, opt, r.rep, opt.stage_name + " on " + dev.name(), kept, part_old, on_host);
    r.err = r.out.error;
    r.host_tiles = r.out.host_tiles;
    if (!r.err && r.out.lost) {
      // The device is lost: the tiles of its part it did not finish run on the host.
      std::lock_guard lock(host_mutex);
      r.err = rerun_tiles_on_host(p.node, p.ops, host, r.out.plan, r.out.tiles, r.out.rerun_from, r.out.tiles.size(),
                                  part_old);
      r.host_tiles += r.out.tiles.size() - r.out.rerun_from;
    }
  } catch (...) {
    r.err = std::current_exception();
  }
  r.rep.peak_device_bytes = dev.peak_bytes();
  return r;
}

}  // namespace

stage_report run_contraction(const stage& s_in, const std::vector<call_node>& nodes, const std::vector<device*>& devs,
                             device& host, const run_options& opt) {
  if (devs.size() == 1) return run_contraction(s_in, nodes, *devs.front(), host, opt);
  const auto t0 = clock_type::now();
  stage_report rep = report_for(s_in, nodes, *devs.front(), opt);
  for (std::size_t k = 1; k < devs.size(); ++k) rep.device += " + " + devs[k]->name();
  const stage s = cancel_failed(s_in, nodes, &rep.error);
  if (s.calls.empty()) return rep;
  check_caller_objects(s, nodes);
  const call_node& n = nodes[static_cast<std::size_t>(s.calls.front())];
  const contraction_desc& d = *n.contraction;
  if (d.m == 0 || d.n == 0 || d.k == 0) return run_contraction(s, nodes, *devs.front(), host, opt);
  operands o = operands_of(n);
  const unaliased copies(o);
  const c_backup backup(o.c_out, o.out->user_storage || (d.reads_c && o.c_in.data == o.c_out.data));
  rep.rollback_bytes = backup.bytes();
  const matrix_block c_old_whole = o.c_in.data == o.c_out.data ? backup.saved() : o.c_in;
  std::vector<contraction_part> parts = cut(n, o, devs);
  // A C too small to give every device a block: the one device with a block runs it.
  std::vector<std::size_t> with_block;
  for (std::size_t k = 0; k < parts.size(); ++k)
    if (parts[k].len > 0) with_block.push_back(k);
  if (with_block.size() == 1) {
    const std::size_t k = with_block.front();
    stage_report one = run_contraction(s, nodes, *devs[k], host, opt);
    if (opt.lost && !one.device_fault.empty()) (*opt.lost)[k] = {one.device_fault, one.host_reruns};
    return one;
  }
  std::vector<part_run> runs(devs.size());
  std::vector<std::vector<trace_event>> traces(devs.size());  // each thread's, joined after
  std::mutex host_mutex;  // re-runs after faults share the host device, one at a time
  run_options mine = opt;
  mine.resident = nullptr;  // each part reads and writes the host; nothing is kept
  mine.keep_result = false;
  mine.result_on_host = true;
  const auto one = [&](std::size_t k) {
    if (parts[k].len == 0) return;
    runs[k] = run_part(parts[k], *devs[k], host, mine, parts[k].of_c(c_old_whole), host_mutex);
    try {  // nothing may escape a thread
      run_options records = opt;
      records.trace = opt.trace ? &traces[k] : nullptr;
      add_device_records(runs[k].rep, *devs[k], records);
    } catch (...) {
      if (!runs[k].err) runs[k].err = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  for (std::size_t k = 1; k < devs.size(); ++k) others.emplace_back(one, k);
  one(0);
  for (auto& t : others) t.join();

  std::exception_ptr err;
  rep.streams = 0;
  for (std::size_t k = 0; k < devs.size(); ++k) {
    const part_run& r = runs[k];
    if (opt.trace) opt.trace->insert(opt.trace->end(), traces[k].begin(), traces[k].end());
    if (!err) err = r.err;
    rep.h2d_bytes += r.rep.h2d_bytes;
    rep.d2h_bytes += r.rep.d2h_bytes;
    rep.h2d_seconds += r.rep.h2d_seconds;
    rep.compute_seconds += r.rep.compute_seconds;
    rep.d2h_seconds += r.rep.d2h_seconds;
    rep.fill_seconds += r.rep.fill_seconds;
    rep.drain_seconds += r.rep.drain_seconds;
    rep.prefault_seconds += r.rep.prefault_seconds;
    rep.peak_device_bytes = std::max(rep.peak_device_bytes, r.rep.peak_device_bytes);
    rep.chunks += r.rep.chunks;
    rep.streams += r.rep.streams;
    rep.host_reruns += r.host_tiles;
    rep.chunks_by_device.emplace_back(devs[k]->name(), r.rep.chunks - r.host_tiles);
    if (r.out.lost) {
      const std::string why = message_of(r.out.fault);
      rep.device_fault += (rep.device_fault.empty() ? "" : "; ") + why;
      if (opt.lost) (*opt.lost)[k] = {why, r.host_tiles};
    }
    if (parts[k].len > 0) rep.tiling += devs[k]->name() + ": " + r.rep.tiling + "; ";
  }
  rep.tiling += "C cut in " + std::to_string(with_block.size()) + (d.m >= d.n ? " row" : " column") +
                " blocks, one per device";
  rep.device_chunks = rep.chunks - rep.host_reruns;
  rep.sequential = opt.sequential;
  if (err) {
    backup.restore();
    rep.error = message_of(err);
    fail_stage(s, nodes, err);
  } else {
    n.for_each_output([](const value_ptr& v) { v->status = value_status::ready; });
  }
  rep.seconds = seconds_since(t0);
  return rep;
}

stage_report run_contraction(const stage& s_in, const std::vector<call_node>& nodes, device& dev, device& host,
                             const run_options& opt) {
  const auto t0 = clock_type::now();
  stage_report rep = report_for(s_in, nodes, dev, opt);
  const stage s = cancel_failed(s_in, nodes, &rep.error);
  if (s.calls.empty()) return rep;
  check_caller_objects(s, nodes);
  const call_node& n = nodes[static_cast<std::size_t>(s.calls.front())];
  const contraction_desc& d = *n.contraction;
  const std::string what = opt.stage_name + " [" + n.name + " " + std::to_string(d.m) + "x" + std::to_string(d.k) +
                           " by " + std::to_string(d.k) + "x" + std::to_string(d.n) + "] on " + dev.name();

  operands o = operands_of(n);
  const unaliased copies(o);
  // C goes back to what it was if the stage fails: kept when the caller sees
  // C, or when C is read and written in place (a host re-run needs the old C).
  const c_backup backup(o.c_out, o.out->user_storage || (d.reads_c && o.c_in.data == o.c_out.data));
  rep.rollback_bytes = backup.bytes();

  dev.set_recording(true);
  (void)dev.take_records();
  dev.reset_peak();
  const bool degenerate = d.m == 0 || d.n == 0 || d.k == 0;
  device_buffer kept;  // the result's resident copy, when one is kept
  std::exception_ptr err;
  if (dev.host_accessible() || degenerate) {
    err = run_in_host_memory(n, o, dev, opt, rep);
    rep.peak_device_bytes = dev.peak_bytes();
    add_device_records(rep, dev, opt);
    rep.device_chunks = rep.chunks;
  } else {
    // Tiles the device failed on run on the host from C's old values, as the
    // device computes them (its twin); the host's work is not the device's.
    const matrix_block c_old = o.c_in.data == o.c_out.data ? backup.saved() : o.c_in;
    const host_rerun_fn on_host = [&](const tile_plan& plan, const std::vector<tile>& tiles, std::size_t from,
                                      std::size_t to) {
      return rerun_tiles_on_host(n, o, host, plan, tiles, from, to, c_old);
    };
    tiled_outcome t = run_tiled(n, o, dev, opt, rep, what, kept, c_old, on_host);
    rep.peak_device_bytes = dev.peak_bytes();
    add_device_records(rep, dev, opt);
    err = t.error;
    rep.host_reruns = t.host_tiles;
    if (!err && t.lost) {
      // The device is lost: what it did not finish runs on the host, and later stages too.
      rep.device_fault = message_of(t.fault);
      err = rerun_tiles_on_host(n, o, host, t.plan, t.tiles, t.rerun_from, t.tiles.size(), c_old);
      rep.host_reruns += t.tiles.size() - t.rerun_from;
    }
    rep.device_chunks = rep.chunks - rep.host_reruns;
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
