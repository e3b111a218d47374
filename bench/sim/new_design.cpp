// The staging engine being built (parameters new_* of the profile): a
// device-wide ring of pinned slots per direction. A chunk's pieces take the
// slots round-robin per direction. At a chunk's submission, fill threads
// copy each input piece into its slot as soon as the slot's previous DMA is
// done (the source is ready), and the stream's DMA waits for the fill
// through a stream memory op (new_wait_latency_us), not a host function.
// After each D2H DMA, drain threads copy the slot out, and the stream waits
// for the chunk's drains before its next chunk (new_drains_in_parallel: 0
// for the engine that waited after each piece, one drain at a time). The host submits chunk j
// once chunk j - streams is done (its device slot is free), so no piece
// holds a ring slot while its stream is still busy with an earlier chunk.
// Outputs are pre-faulted by threads of their own from the stage's start,
// so drains write touched pages. Host copies share the host's memory
// bandwidth (host_memcpy_cap_gbps). With --host-memory pinned the arrays
// are the caller's pinned memory: DMAs are direct, no staging.

#include <algorithm>
#include <deque>

#include "sim/cases.hpp"
#include "sim/machine.hpp"

namespace oa_sim {

namespace {

struct ring_copies {
  const profile& p;
  machine& m;
  staging how;
  int start;  // the stage's setup op
  std::size_t slot_bytes, slots;
  std::vector<int> in_dma, out_drain;  // per piece in issue order: what frees its slot

  ring_copies(const profile& pr, machine& mc, staging h)
      : p(pr), m(mc), how(h), start(mc.setup(pr)),
        slot_bytes(static_cast<std::size_t>(pr["new_slot_mib"] * 1048576.0)),
        slots(static_cast<std::size_t>(std::max(1.0, pr["new_ring_slots"]))) {}

  /// Pre-faults `bytes` of an output; returns the op its drains wait for.
  int prefault(std::size_t bytes, const std::string& what) {
    if (how == staging::pinned_host) return start;
    return m.g.add({"prefault " + what, m.prefault, static_cast<double>(bytes), 0, 0, {start}});
  }

  /// A DMA straight from the caller's memory of `bytes` in `segments`
  /// contiguous runs (a panel of a larger matrix: one per column): each run
  /// costs the engine dma_segment_us beside its bytes. Slots are contiguous.
  double direct_rate(std::size_t bytes, std::size_t segments, double peak_gbps) const {
    if (segments <= 1 || p["dma_segment_us"] <= 0) return 0;  // the resource's rate
    const double b = static_cast<double>(bytes);
    return b / (b / (peak_gbps * gb) + static_cast<double>(segments) * p["dma_segment_us"] * m.us);
  }

  /// Copies in on `s`; the fills start at `submitted` (the chunk's submission).
  void in(stream& s, std::size_t bytes, int submitted, const std::string& what, std::size_t segments = 1) {
    const double wait = p["new_wait_latency_us"] * m.us, lat = p["op_latency_us"] * m.us;
    if (how == staging::pinned_host) {
      s.add({"h2d " + what, m.h2d, static_cast<double>(bytes), direct_rate(bytes, segments, p["h2d_pinned_gbps"]), lat,
             {}});
      return;
    }
    for (std::size_t b : pieces(bytes, slot_bytes)) {
      std::vector<int> deps{submitted};
      if (in_dma.size() >= slots) deps.push_back(in_dma[in_dma.size() - slots]);  // the slot is free
      const int fill = m.g.add({"fill " + what, m.fill, static_cast<double>(b), 0, 0, deps});
      in_dma.push_back(s.add({"h2d " + what, m.h2d, static_cast<double>(b), 0, wait, {fill}}));
    }
  }

  /// Copies out on `s`; returns the drains the stream waits for before its next work.
  std::vector<int> out(stream& s, std::size_t bytes, int faulted, const std::string& what, std::size_t segments = 1) {
    const double lat = p["op_latency_us"] * m.us;
    if (how == staging::pinned_host) {
      s.add({"d2h " + what, m.d2h, static_cast<double>(bytes), direct_rate(bytes, segments, p["d2h_pinned_gbps"]), lat,
             {}});
      return {};
    }
    std::vector<int> drains;
    const bool one_at_a_time = p["new_drains_in_parallel"] <= 0;
    for (std::size_t b : pieces(bytes, slot_bytes)) {
      std::vector<int> deps;
      if (out_drain.size() >= slots) deps.push_back(out_drain[out_drain.size() - slots]);  // the slot is drained
      const int dma = s.add({"d2h " + what, m.d2h, static_cast<double>(b), 0, lat, deps});
      out_drain.push_back(m.g.add({"drain " + what, m.drain, static_cast<double>(b), 0, 0, {dma, faulted}}));
      drains.push_back(out_drain.back());
      // The engine before 2026-11-26: the stream waited for each piece's drain before its next work.
      if (one_at_a_time) wait_for(s, {out_drain.back()}, what);
    }
    return drains;
  }

  /// The stream waits for `drains` (a stream memory op on their counter).
  void wait_for(stream& s, std::vector<int> drains, const std::string& what) {
    if (!drains.empty()) s.add({"drained " + what, -1, 0, 0, p["new_wait_latency_us"] * m.us, std::move(drains)});
  }
};

}  // namespace

graph new_streaming(const profile& p, const streaming_case& c, staging how) {
  machine m(p);
  ring_copies ring(p, m, how);
  std::vector<std::vector<int>> faulted(c.chunk_units.size());
  for (std::size_t i = 0; i < c.chunk_units.size(); ++i)
    for (std::size_t b : c.out_unit_bytes)
      faulted[i].push_back(ring.prefault(b * c.chunk_units[i], "chunk " + std::to_string(i)));
  std::vector<stream> streams(static_cast<std::size_t>(std::max(c.streams, 1)), stream(m.g));
  const double lat = p["op_latency_us"] * m.us;
  for (std::size_t i = 0; i < c.chunk_units.size(); ++i) {
    stream& s = streams[i % streams.size()];
    const std::size_t u = c.chunk_units[i];
    const std::string tag = "chunk " + std::to_string(i);
    // Submitted once the stream's previous chunk is done (stream order), drains included.
    const int submitted = s.add({tag + " submitted", -1, 0, 0, 0, {ring.start}});
    for (std::size_t b : c.in_unit_bytes) ring.in(s, b * u, submitted, tag);
    s.add({"kernel " + tag, m.gpu, static_cast<double>(u), 1.0 / c.kernel_seconds_per_unit, lat, {}});
    std::vector<int> drains;
    for (std::size_t k = 0; k < c.out_unit_bytes.size(); ++k)
      for (int d : ring.out(s, c.out_unit_bytes[k] * u, faulted[i][k], tag)) drains.push_back(d);
    ring.wait_for(s, drains, tag);
  }
  return std::move(m.g);
}

graph new_gemm(const profile& p, const gemm_case& c, staging how) {
  machine m(p);
  ring_copies ring(p, m, how);
  const auto& pl = c.plan;
  const std::size_t eb = c.elem_bytes;
  const std::size_t TM = pl.tiles_m(), TN = pl.tiles_n();
  // C's tiles are pre-faulted in the order they are written back.
  std::vector<int> faulted;
  for (std::size_t t = 0; t < TM * TN; ++t)
    faulted.push_back(ring.prefault(pl.mt * pl.nt * eb, "C tile " + std::to_string(t)));
  stream in(m.g), run(m.g), out(m.g);
  in.add({"issued", -1, 0, 0, 0, {ring.start}});
  const double lat = p["op_latency_us"] * m.us;
  // Loads run as many steps ahead as the plan has piece buffers (run_tiled).
  const std::size_t ahead = static_cast<std::size_t>(std::max(pl.lookahead, 2));
  // As run_tiled: the next line's panel slot kk, read last by this line's
  // last tile at step s, is copied in before the loads of step
  // s + min(lag + kk, steps); a line's first tile then loads no panel.
  const std::size_t KS = pl.steps_k(), lag = std::min(ahead, KS);
  struct panel_piece {
    std::size_t after, before, bytes, segments;
  };
  std::deque<panel_piece> prefetch;
  std::vector<int> done;
  const std::size_t cb = static_cast<std::size_t>(std::max(pl.c_buffers, 0));
  // As run_tiled: with one C buffer a tile's first and last steps run per
  // block of C's columns; a first step's block waits only for the copies
  // back of the earlier tile's blocks sharing its bytes, and a last step's
  // block is copied back as soon as it is computed.
  std::vector<std::vector<oa::detail::c_block>> blocks;
  std::vector<std::size_t> rows;  // per tile: its C buffer's column length
  std::vector<std::vector<int>> c_free, computed;  // per tile: each block's copy back, its last product
  const auto tile_blocks = [&](const gemm_step& st) {
    if (blocks.size() <= st.t) {
      rows.push_back(st.mi);
      blocks.push_back(cb == 1 ? oa::detail::c_write_blocks(st.nj, st.mi, pl.c_blocks)
                               : std::vector<oa::detail::c_block>{{0, st.nj}});
    }
    return blocks[st.t];
  };
  const auto queue_products = [&](const gemm_step& st) {
    const bool first = st.kk == 0, last = st.kk + 1 == KS;
    const std::vector<oa::detail::c_block> bls =
        first || last ? tile_blocks(st) : std::vector<oa::detail::c_block>{{0, st.nj}};
    computed.resize(st.t + 1);
    for (std::size_t j = 0; j < bls.size(); ++j) {
      const oa::detail::c_block& bl = bls[j];
      const std::string tag = bls.size() > 1 ? "block " + std::to_string(j) + " of " + st.tag : st.tag;
      std::vector<int> rw;
      if (first && cb > 0 && st.t >= cb) {
        const auto& before = blocks[st.t - cb];
        const std::size_t r = rows[st.t - cb];
        for (std::size_t i = 0; i < before.size(); ++i)  // the bytes block j overwrites
          if (before[i].begin * r < bl.end * st.mi && bl.begin * st.mi < before[i].end * r)
            rw.push_back(c_free[st.t - cb][i]);
      }
      if (!rw.empty()) run.add({"wait C " + tag, -1, 0, 0, 0, rw});
      const double step = new_gemm_step_seconds(p, eb, st.mi, bl.end - bl.begin, st.kl, st.kk > 0);
      const int g = run.add({"gemm " + tag, m.gpu, step, 1.0, lat, {}});
      if (last) computed[st.t].push_back(g);
    }
    done.push_back(run.last());
  };
  const auto submit = [&](std::vector<int> waits, const std::string& tag) {
    waits.push_back(ring.start);
    const int submitted = m.g.add({"submit " + tag, -1, 0, 0, 0, std::move(waits)});
    in.add({"wait " + tag, -1, 0, 0, 0, {submitted}});
    return submitted;
  };
  for_each_gemm_step(
      c,
      [&](const gemm_step& st) {
        for (; !prefetch.empty() && prefetch.front().before <= st.s; prefetch.pop_front()) {
          const std::string tag = "panel after step " + std::to_string(prefetch.front().after);
          ring.in(in, prefetch.front().bytes, submit({done[prefetch.front().after]}, tag), tag, prefetch.front().segments);
        }
        // Submitted when the step's device buffers are free; its fills need not wait for the stream.
        const int submitted = submit(st.s >= ahead ? std::vector<int>{done[st.s - ahead]} : std::vector<int>{}, st.tag);
        // Column-major A and B: a piece is one run per column, unless its columns are whole.
        if (st.load_a && !(st.panel_prefetched && pl.hold == oa::detail::held_panel::a_rows))
          ring.in(in, st.mi * eb * st.kl, submitted, "A " + st.tag, st.mi < c.n ? st.kl : 1);
        if (st.load_b && !(st.panel_prefetched && pl.hold == oa::detail::held_panel::b_cols))
          ring.in(in, st.kl * eb * st.nj, submitted, "B " + st.tag, st.kl < c.n ? st.nj : 1);
        run.add({"wait " + st.tag, -1, 0, 0, 0, {in.last()}});
        queue_products(st);
        if (st.next_panel_elems) {
          // The next line's piece of its held panel: kl columns of A's rows, or B's columns of kl.
          const bool rows = pl.hold == oa::detail::held_panel::a_rows;
          const std::size_t segments = rows ? (st.next_panel_elems / st.kl < c.n ? st.kl : 1)
                                            : (st.kl < c.n ? st.next_panel_elems / st.kl : 1);
          prefetch.push_back({st.s, st.s + std::min(lag + st.kk, KS), st.next_panel_elems * eb, segments});
        }
      },
      [&](const gemm_step& st) {
        const std::vector<oa::detail::c_block> bls = tile_blocks(st);
        std::vector<int> drains;
        c_free.emplace_back();
        for (std::size_t j = 0; j < bls.size(); ++j) {
          const std::string tag = bls.size() > 1 ? "block " + std::to_string(j) + " of " + st.tag : st.tag;
          out.add({"wait " + tag, -1, 0, 0, 0, {computed[st.t][j]}});
          const std::size_t cols = bls[j].end - bls[j].begin;
          for (int d : ring.out(out, st.mi * eb * cols, faulted[st.t], "C " + tag, st.mi < c.n ? cols : 1))
            drains.push_back(d);
          c_free.back().push_back(out.last());  // the block's bytes of the C buffer are free once copied out
        }
        ring.wait_for(out, std::move(drains), "C " + st.tag);
      });
  return std::move(m.g);
}

}  // namespace oa_sim
