#include "core/tiling.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

std::size_t rounded(std::size_t bytes, std::size_t g) { return g <= 1 ? bytes : (bytes + g - 1) / g * g; }
std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

/// The distinct tile extents of [0, len) cut into 1, 2, ... even parts.
std::vector<std::size_t> extents(std::size_t len) {
  std::vector<std::size_t> out;
  for (std::size_t parts = 1; parts <= len;) {
    const std::size_t e = ceil_div(len, parts);
    out.push_back(e);
    // The next part count that gives a smaller extent.
    parts = e > 1 ? ceil_div(len, e - 1) : len + 1;
  }
  return out;
}

// Steps thinner than this make each k step a thin product (poor use of the
// GPU or the cores) and rewrite the C tile too often: plans keep k steps at
// least this thick where the budget allows.
constexpr std::size_t preferred_min_step = 256;

}  // namespace

std::size_t tile_plan_bytes(const tiling_problem& p, std::size_t mt, std::size_t nt, std::size_t kt, held_panel h,
                            int c_buffers) {
  const std::size_t eb = p.elem_bytes, g = p.granularity;
  std::size_t b = static_cast<std::size_t>(c_buffers) * rounded(mt * nt * eb, g);
  b += h == held_panel::a_rows ? rounded(mt * p.k * eb, g) : 2 * rounded(mt * kt * eb, g);
  b += h == held_panel::b_cols ? rounded(p.k * nt * eb, g) : 2 * rounded(kt * nt * eb, g);
  return b;
}

std::size_t tile_plan_traffic(const tiling_problem& p, std::size_t mt, std::size_t nt, held_panel h) {
  const std::size_t tm = ceil_div(p.m, mt), tn = ceil_div(p.n, nt);
  const std::size_t a = p.m * p.k * (h == held_panel::a_rows ? 1 : tn);
  const std::size_t b = p.k * p.n * (h == held_panel::b_cols ? 1 : tm);
  const std::size_t c = p.m * p.n * ((p.reads_c ? 1 : 0) + (p.c_written ? 1 : 0));
  return (a + b + c) * p.elem_bytes;
}

std::string tile_plan::describe() const {
  std::string s = "C tiles " + std::to_string(mt) + "x" + std::to_string(nt) + " (" + std::to_string(tiles_m()) + "x" +
                  std::to_string(tiles_n()) + "), k steps of " + std::to_string(kt) + " (" +
                  std::to_string(steps_k()) + ")";
  if (hold == held_panel::a_rows) s += ", A row panels held";
  if (hold == held_panel::b_cols) s += ", B column panels held";
  s += c_buffers == 0 ? ", C resident" : c_buffers > 1 ? ", 2 C tiles in flight" : ", 1 C tile in flight";
  return s;
}

tile_plan plan_tiles(const tiling_problem& p) {
  if (p.m == 0 || p.n == 0 || p.k == 0) {
    tile_plan t;
    t.m = p.m, t.n = p.n, t.k = p.k;
    t.mt = std::max<std::size_t>(p.m, 1), t.nt = std::max<std::size_t>(p.n, 1), t.kt = std::max<std::size_t>(p.k, 1);
    t.bytes_moved = 0;
    return t;
  }
  const std::vector<std::size_t> ms = extents(p.m), ns = extents(p.n);
  const held_panel holds[] = {held_panel::none, held_panel::a_rows, held_panel::b_cols};

  // The fewest bytes for each number of C buffers, with steps at least
  // `min_step` thick; thinner steps only when nothing else fits.
  auto best_for = [&](int c, std::size_t min_step) {
    tile_plan best;
    for (std::size_t mt : ms)
      for (std::size_t nt : ns)
        for (held_panel h : holds) {
          if (tile_plan_bytes(p, mt, nt, min_step, h, c) > p.budget) continue;
          const std::size_t bytes = tile_plan_traffic(p, mt, nt, h);
          // Ties: larger tiles (fewer, thicker launches).
          if (best.mt == 0 || bytes < best.bytes_moved || (bytes == best.bytes_moved && mt * nt > best.mt * best.nt)) {
            best.mt = mt, best.nt = nt, best.hold = h, best.c_buffers = c, best.bytes_moved = bytes;
          }
        }
    return best;
  };
  tile_plan plan;
  for (std::size_t min_step : {std::min(p.k, preferred_min_step), std::size_t{1}}) {
    if (p.c_resident) {
      plan = best_for(0, min_step);
      if (plan.mt) break;
      continue;
    }
    const tile_plan one = best_for(1, min_step), two = best_for(2, min_step);
    // A second C buffer overlaps a tile's copies with the next tile's steps;
    // worth up to 10% more bytes.
    if (two.mt && two.bytes_moved * 10 <= one.bytes_moved * 11)
      plan = two;
    else
      plan = one;
    if (plan.mt) break;
  }
  if (plan.mt == 0) {
    const std::size_t need = tile_plan_bytes(p, 1, 1, 1, held_panel::none, 1);
    throw plan_error("oa: a contraction of " + std::to_string(p.m) + "x" + std::to_string(p.k) + " by " +
                     std::to_string(p.k) + "x" + std::to_string(p.n) + " cannot be tiled within a device budget of " +
                     std::to_string(p.budget) + " bytes: the smallest tiles need " + std::to_string(need) +
                     " bytes (set OA_DEVICE_MEMORY to at least that)");
  }
  plan.m = p.m, plan.n = p.n, plan.k = p.k;
  // The thickest steps that fit, then evened out over k.
  std::size_t lo = 1, hi = p.k;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (tile_plan_bytes(p, plan.mt, plan.nt, mid, plan.hold, plan.c_buffers) <= p.budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  plan.kt = ceil_div(p.k, ceil_div(p.k, lo));
  plan.device_bytes = tile_plan_bytes(p, plan.mt, plan.nt, plan.kt, plan.hold, plan.c_buffers);
  return plan;
}

double io_lower_bound_bytes(std::size_t n, std::size_t elem_bytes, std::size_t budget) {
  const double nd = static_cast<double>(n), eb = static_cast<double>(elem_bytes);
  const double words = static_cast<double>(budget) / eb;
  return eb * (2.0 * nd * nd * nd / std::sqrt(words) + nd * nd);
}

}  // namespace oa::detail
