#pragma once
// What a simulated run does, in the terms both designs are built from: a
// streaming stage's chunks and arrays, or a product's tile plan.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/product_rates.hpp"
#include "core/tiling.hpp"
#include "sim/engine.hpp"
#include "sim/profile.hpp"

namespace oa_sim {

/// How host arrays reach the DMA engines.
enum class staging { registered, pinned_buffers, pinned_host };  // pinned_host: --host-memory pinned, direct DMA

struct streaming_case {
  std::string workload;
  std::size_t units = 0;
  std::vector<std::size_t> chunk_units;    // per chunk
  int streams = 1;                         // pipeline slots (1: sequential)
  std::vector<std::size_t> in_unit_bytes;  // per array copied in
  std::vector<std::size_t> out_unit_bytes; // per array copied back
  double kernel_seconds_per_unit = 0;
  std::size_t in_bytes() const;
  std::size_t out_bytes() const;
};

struct gemm_case {
  std::size_t n = 0, elem_bytes = 8;
  oa::detail::tile_plan plan;
  bool sequential = false;
  double flops() const { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n); }
};

/// One step of a tiled product, in the order run_tiled issues them: tile t's
/// k step kk (global step s), its sizes, and whether it loads A's and B's
/// pieces (a held panel loads on its line's first tile only).
struct gemm_step {
  std::size_t t, kk, s, mi, nj, kl;
  bool load_a, load_b;
  std::string tag;  // "tile <t>"
  // The new design: a line's held panel is prefetched by the previous
  // line's last tile, whose step kk releases slot kk for the next line's
  // piece of next_panel_elems (0: no next line, or not a line's last tile).
  bool panel_prefetched = false;
  std::size_t next_panel_elems = 0;
};

/// Held panels: the latest step reading each k piece, which a reload of
/// that piece waits for.
struct held_panels {
  explicit held_panels(const oa::detail::tile_plan& plan)
      : hold(plan.hold), a_last(plan.steps_k(), -1), b_last(plan.steps_k(), -1) {}
  /// What step st's loads wait for besides the free buffers.
  void add_waits(const gemm_step& st, std::vector<int>& waits) const {
    if (hold == oa::detail::held_panel::a_rows && st.load_a && a_last[st.kk] >= 0) waits.push_back(a_last[st.kk]);
    if (hold == oa::detail::held_panel::b_cols && st.load_b && b_last[st.kk] >= 0) waits.push_back(b_last[st.kk]);
  }
  /// Step st ran as op `done`.
  void read_by(const gemm_step& st, int done) {
    if (hold == oa::detail::held_panel::a_rows) a_last[st.kk] = done;
    if (hold == oa::detail::held_panel::b_cols) b_last[st.kk] = done;
  }
  oa::detail::held_panel hold;
  std::vector<int> a_last, b_last;
};

/// Calls step(gemm_step) for every step of c's plan in run_tiled's order,
/// and tile_end(last step of the tile) after each tile.
template <class Step, class TileEnd>
void for_each_gemm_step(const gemm_case& c, Step&& step, TileEnd&& tile_end) {
  const auto& pl = c.plan;
  const std::size_t n = c.n, KS = pl.steps_k(), TM = pl.tiles_m(), TN = pl.tiles_n();
  const bool cols_outer = pl.hold == oa::detail::held_panel::b_cols;
  std::size_t t = 0;
  for (std::size_t p0 = 0; p0 < (cols_outer ? TN : TM); ++p0)
    for (std::size_t q = 0; q < (cols_outer ? TM : TN); ++q, ++t) {
      const std::size_t ti = cols_outer ? q : p0, tj = cols_outer ? p0 : q;
      gemm_step st{t, 0, 0, std::min(pl.mt, n - ti * pl.mt), std::min(pl.nt, n - tj * pl.nt), 0, true, true,
                   "tile " + std::to_string(t)};
      for (std::size_t kk = 0; kk < KS; ++kk) {
        st.kk = kk;
        st.s = t * KS + kk;
        st.kl = std::min(pl.kt, n - kk * pl.kt);
        st.load_a = pl.hold != oa::detail::held_panel::a_rows || q == 0 || t == 0;
        st.load_b = pl.hold != oa::detail::held_panel::b_cols || q == 0 || t == 0;
        st.panel_prefetched = pl.hold != oa::detail::held_panel::none && q == 0 && t > 0;
        const std::size_t lines = cols_outer ? TN : TM, ext = cols_outer ? pl.nt : pl.mt;
        const bool line_end = pl.hold != oa::detail::held_panel::none && q + 1 == (cols_outer ? TM : TN);
        st.next_panel_elems = line_end && p0 + 1 < lines ? std::min(ext, n - (p0 + 1) * ext) * st.kl : 0;
        step(st);
      }
      tile_end(st);
    }
}

/// Chunks of `units` as the planner evens them: `chunks` of ceil(units / chunks), the last shorter.
std::vector<std::size_t> even_chunks(std::size_t units, std::size_t chunks);

/// The seconds of one cuBLAS call on an m x n x k tile as the old design's
/// replay fits them: in-core rate times the tile efficiency, less for a tile
/// whose smallest side is small.
double gemm_step_seconds(const profile& p, std::size_t elem_bytes, std::size_t m, std::size_t n, std::size_t k);

/// The device's rates as the profile gives them, for the planner's time
/// model: pinned link rates; `staged` copies (pageable host memory through
/// the new design's ring) at the ring's fill rate.
oa::device_rates profile_rates(const profile& p);

/// cuBLAS's rates by step shape for `elem_bytes`-byte elements, as the
/// runtime measures them (src/core/product_rates.hpp), from the profile's
/// `cublas_<type>_curve_*` parameters (bench/staging_probe.cu's gemm
/// section); null when the profile has none.
std::shared_ptr<const oa::detail::product_curve> profile_shapes(const profile& p, std::size_t elem_bytes);

/// The new design's seconds of one cuBLAS call: oa's own step model
/// (oa::detail::predicted_step_seconds) on profile_rates and
/// profile_shapes, launch excluded.
double new_gemm_step_seconds(const profile& p, std::size_t elem_bytes, std::size_t m, std::size_t n, std::size_t k,
                             bool reads_c_tile);

/// Seconds the link needs at least for these bytes (per-direction peaks, both-ways cap).
double link_bound_seconds(const profile& p, double h2d_bytes, double d2h_bytes);

/// The least seconds when the both-ways cap is shared as the engine shares
/// it (each direction slowed in proportion while both run): the lighter
/// direction wholly under the heavier one, the rest of the heavier alone.
/// Above link_bound_seconds when the cap binds: reaching that bound needs a
/// link that favours the heavier direction.
double shared_link_bound_seconds(const profile& p, double h2d_bytes, double d2h_bytes);

/// The op graphs of the design measured on the H100 (b10d541): staging
/// `registered` (arrays pinned with cudaHostRegister before the stage) or
/// `pinned_buffers` (one staging buffer per stream, filled and drained by
/// host functions on CUDA's single callback thread).
graph old_streaming(const profile& p, const streaming_case& c, staging s);
graph old_gemm(const profile& p, const gemm_case& c, staging s);

/// The staging engine being built: a device-wide ring of pinned slots per
/// direction filled and drained by oa's host threads ahead of the streams,
/// outputs pre-faulted off the critical path, GEMM loads ahead on their own
/// stream. `pinned_host`: the arrays are pinned by the caller, DMA direct.
graph new_streaming(const profile& p, const streaming_case& c, staging s);
graph new_gemm(const profile& p, const gemm_case& c, staging s);

}  // namespace oa_sim
