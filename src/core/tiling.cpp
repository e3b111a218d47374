#include "core/tiling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <vector>

#include "core/product_rates.hpp"
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

/// Write-back blocks a plan with `c_buffers` C buffers gets.
int blocks_for(const tiling_problem& p, int c_buffers) {
  return c_buffers == 1 ? (p.c_blocks > 0 ? p.c_blocks : default_c_blocks) : 1;
}

}  // namespace

std::size_t tile_plan_bytes(const tiling_problem& p, std::size_t mt, std::size_t nt, std::size_t kt, held_panel h,
                            int c_buffers, int lookahead) {
  const std::size_t eb = p.elem_bytes, g = p.granularity, la = static_cast<std::size_t>(std::max(lookahead, 2));
  std::size_t b = static_cast<std::size_t>(c_buffers) * rounded(mt * nt * eb, g);
  b += h == held_panel::a_rows ? rounded(mt * p.k * eb, g) : la * rounded(mt * kt * eb, g);
  b += h == held_panel::b_cols ? rounded(p.k * nt * eb, g) : la * rounded(kt * nt * eb, g);
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
  if (predicted_seconds > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f", copy_per_compute);
    s += ", loads " + std::to_string(lookahead) + " steps ahead, copy/compute " + ratio + " (predicted)";
  }
  return s;
}

namespace {

/// The plan moving the fewest bytes (the planner without rates).
tile_plan fewest_bytes_plan(const tiling_problem& p) {
  const std::vector<std::size_t> ms = extents(p.m), ns = extents(p.n);
  const int la = std::max(p.lookahead, 2);
  const held_panel holds[] = {held_panel::none, held_panel::a_rows, held_panel::b_cols};

  // The fewest bytes for each number of C buffers, with steps at least
  // `min_step` thick; thinner steps only when nothing else fits.
  auto best_for = [&](int c, std::size_t min_step) {
    tile_plan best;
    for (std::size_t mt : ms)
      for (std::size_t nt : ns)
        for (held_panel h : holds) {
          if (tile_plan_bytes(p, mt, nt, min_step, h, c, la) > p.budget) continue;
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
    const tile_plan one = p.c_buffers == 2 ? tile_plan{} : best_for(1, min_step);
    const tile_plan two = p.c_buffers == 1 ? tile_plan{} : best_for(2, min_step);
    // A second C buffer overlaps a tile's copies with the next tile's steps;
    // worth up to 10% more bytes.
    if (two.mt && (!one.mt || two.bytes_moved * 10 <= one.bytes_moved * 11))
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
    if (tile_plan_bytes(p, plan.mt, plan.nt, mid, plan.hold, plan.c_buffers, la) <= p.budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  plan.kt = ceil_div(p.k, ceil_div(p.k, lo));
  plan.lookahead = la;
  plan.c_blocks = blocks_for(p, plan.c_buffers);
  plan.device_bytes = tile_plan_bytes(p, plan.mt, plan.nt, plan.kt, plan.hold, plan.c_buffers, la);
  return plan;
}

}  // namespace

bool tiling_problem::timed() const noexcept {
  return ((shapes && shapes->flops > 0) || rates.flops(elem_bytes) > 0) && rates.h2d > 0 && rates.d2h > 0;
}

double predicted_step_seconds(const device_rates& r, std::size_t elem_bytes, std::size_t m, std::size_t n,
                              std::size_t k, bool reads_c_tile, const product_curve* shapes) {
  double rate = 0;
  if (shapes && shapes->flops > 0) {
    rate = shapes->rate(m, n, k);
  } else {
    const bool aligned = m % 8 == 0 && n % 8 == 0 && k % 8 == 0;
    rate = r.flops(elem_bytes) * (aligned || r.gemm_unaligned <= 0 ? 1.0 : r.gemm_unaligned);
  }
  if (rate <= 0) return 0;
  double s = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / rate;
  // cuBLAS reads and writes the C tile once per call: thin k steps pay it against few flops.
  if (r.kernel_bytes > 0) s += static_cast<double>(m * n * elem_bytes) * (reads_c_tile ? 2 : 1) / r.kernel_bytes;
  return s;
}

namespace {

/// Calls f(extent, count) for [0, len) cut every `e`: the full pieces, then the shorter last one.
template <class F>
void for_pieces(std::size_t len, std::size_t e, F&& f) {
  if (len / e) f(e, len / e);
  if (len % e) f(len % e, std::size_t{1});
}

/// Seconds the link needs for `in` bytes to the device and `out` back, were it alone.
double link_seconds(const tiling_problem& p, double in, double out) {
  const device_rates& r = p.rates;
  const bool staged = p.staged && r.staging > 0;
  const double h2d = staged ? std::min(r.staging, r.h2d) : r.h2d, d2h = staged ? std::min(r.staging, r.d2h) : r.d2h;
  double s = std::max(in / h2d, out / d2h);
  if (r.both_ways > 0) s = std::max(s, (in + out) / r.both_ways);
  return s;
}

/// Blocks a plan's full tiles are written back in (1: whole, after the last step).
std::size_t write_blocks(const tiling_problem& p, const tile_plan& t) {
  if (t.c_buffers != 1) return 1;
  return c_write_blocks(std::min(t.nt, p.n), std::min(t.mt, p.m), t.c_blocks).size();
}

/// Every step's seconds, launches included (a blocked step launches once per
/// block); each tile's first step reads C only if the product does.
double compute_seconds(const tiling_problem& p, const tile_plan& t) {
  const device_rates& r = p.rates;
  const std::size_t k0 = std::min(t.kt, p.k);
  double s = 0;
  for_pieces(p.m, t.mt, [&](std::size_t mi, std::size_t cm) {
    for_pieces(p.n, t.nt, [&](std::size_t nj, std::size_t cn) {
      double tile = predicted_step_seconds(r, p.elem_bytes, mi, nj, k0, p.reads_c, p.shapes.get());
      for_pieces(p.k - k0, t.kt, [&](std::size_t kl, std::size_t ck) {
        tile += static_cast<double>(ck) * predicted_step_seconds(r, p.elem_bytes, mi, nj, kl, true, p.shapes.get());
      });
      s += static_cast<double>(cm * cn) * tile;
    });
  });
  // A tile of one step runs it once in blocks: it is its first and last.
  const std::size_t launches = t.steps_k() + (t.steps_k() > 1 ? 2 : 1) * (write_blocks(p, t) - 1);
  return s + static_cast<double>(t.tiles_m() * t.tiles_n() * launches) * r.op_latency;
}

/// Bytes a plan moves, by kind.
struct plan_traffic {
  double pieces = 0;  // streamed A and B pieces
  double panels = 0;  // held panels, once per line
  double c_in = 0, c_out = 0;
};

plan_traffic traffic_of(const tiling_problem& p, const tile_plan& t) {
  const double eb = static_cast<double>(p.elem_bytes), m = static_cast<double>(p.m), n = static_cast<double>(p.n),
               k = static_cast<double>(p.k);
  const bool hold_a = t.hold == held_panel::a_rows, hold_b = t.hold == held_panel::b_cols;
  plan_traffic b;
  b.pieces = eb * ((hold_a ? 0 : m * k * static_cast<double>(t.tiles_n())) +
                   (hold_b ? 0 : k * n * static_cast<double>(t.tiles_m())));
  b.panels = eb * (hold_a ? m * k : hold_b ? k * n : 0);
  b.c_in = p.reads_c ? eb * m * n : 0;
  b.c_out = p.c_written ? eb * m * n : 0;
  return b;
}

/// The edges no overlap hides: the first step's loads before it runs, the
/// last tile's copy back after it.
double edge_seconds(const tiling_problem& p, const tile_plan& t) {
  const double eb = static_cast<double>(p.elem_bytes);
  const double mi = static_cast<double>(std::min(t.mt, p.m)), nj = static_cast<double>(std::min(t.nt, p.n)),
               kl = static_cast<double>(std::min(t.kt, p.k));
  const double first = eb * (mi * kl + kl * nj + (p.reads_c ? mi * nj : 0));
  const double lm = static_cast<double>(p.m - (t.tiles_m() - 1) * t.mt), ln = static_cast<double>(p.n - (t.tiles_n() - 1) * t.nt);
  const double last = p.c_written ? link_seconds(p, 0, eb * lm * ln) : 0;
  return link_seconds(p, first, 0) + last + 2 * p.rates.op_latency;
}

/// With one C buffer, the GPU waits for a tile's C copies (back, and in for
/// the next tile) but for what the blocked last and next first steps hide:
/// block j's copy overlaps the products of the blocks after it; at least
/// one block's copies stay exposed. The blocks go back while the next
/// steps' pieces come in (`load_share` of the time): on a both-ways link
/// at its share of the cap.
double serial_c_seconds(const tiling_problem& p, const tile_plan& t, const plan_traffic& b, double tiles,
                        double load_share) {
  const device_rates& r = p.rates;
  const double in = link_seconds(p, b.c_in / tiles, 0), back = link_seconds(p, 0, b.c_out / tiles);
  const double nb = static_cast<double>(write_blocks(p, t));
  if (nb <= 1) return in + back;
  const double cap = r.both_ways > 0 ? std::max(1.0, (r.h2d + r.d2h) / r.both_ways) : 1.0;
  const double shared = back * (1 + std::clamp(load_share, 0.0, 1.0) * (cap - 1));
  const std::size_t mi = std::min(t.mt, p.m), nj = std::min(t.nt, p.n), kf = std::min(t.kt, p.k);
  const double first = predicted_step_seconds(r, p.elem_bytes, mi, nj, kf, p.reads_c, p.shapes.get());
  const double last = predicted_step_seconds(r, p.elem_bytes, mi, nj, p.k - (t.steps_k() - 1) * t.kt, true,
                                             p.shapes.get());
  return std::max((in + shared) / nb, in + shared - (nb - 1) / nb * (first + last));
}

}  // namespace

tile_prediction predict_tile_plan(const tiling_problem& p, const tile_plan& t) {
  tile_prediction out;
  if (!p.timed() || t.mt == 0 || t.nt == 0 || t.kt == 0 || p.m == 0 || p.n == 0 || p.k == 0) return out;
  const plan_traffic b = traffic_of(p, t);
  out.compute = compute_seconds(p, t);
  out.link = link_seconds(p, b.pieces + b.panels + b.c_in, b.c_out);
  out.copy_per_compute = out.link / out.compute;
  // Per tile, on average: its steps, and its copies overlapping them; with
  // one C buffer, C's copies wait for the previous tile and hold up the next.
  const double tiles = static_cast<double>(t.tiles_m() * t.tiles_n()), steps = static_cast<double>(t.steps_k());
  const double ct = out.compute / tiles;
  const bool c_serial = t.c_buffers == 1;
  const double lt = link_seconds(p, (b.pieces + (c_serial ? 0 : b.c_in)) / tiles, c_serial ? 0 : b.c_out / tiles);
  const double serial = c_serial ? serial_c_seconds(p, t, b, tiles, lt / ct) : 0;
  const double regular = std::max(ct, lt) + serial;
  // Held panels: the first line's loads along its first tile's steps; each
  // later one is prefetched while the previous line's last tile runs, so a
  // line change puts a panel on the link over two tiles' steps (one when a
  // line is one tile). Buffers beyond two let earlier steps' spare link
  // time take pieces of the window ahead.
  const double lines = static_cast<double>(t.hold == held_panel::a_rows ? t.tiles_m()
                                           : t.hold == held_panel::b_cols ? t.tiles_n() : 0);
  double all_tiles = tiles * regular;
  if (lines > 0) {
    const double panel = link_seconds(p, b.panels / lines, 0), w = std::min(2.0, tiles / lines);
    const double spare = std::min(static_cast<double>(t.lookahead - 2), steps) * std::max(0.0, ct - lt) / steps;
    const double first = std::max(ct, lt + panel) + serial;
    const double change = std::max(w * ct, w * lt + panel - spare) + w * serial;
    all_tiles = first + (lines - 1) * change + (tiles - 1 - (lines - 1) * w) * regular;
  }
  out.seconds = edge_seconds(p, t) + all_tiles;
  return out;
}

namespace {

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

/// Tile extents of [0, len) in multiples of `align` (the last tile shorter), one per part count.
std::vector<std::size_t> aligned_extents(std::size_t len, std::size_t align) {
  std::vector<std::size_t> out;
  for (std::size_t parts = 1;; ++parts) {
    const std::size_t e = std::min(len, round_up(ceil_div(len, parts), align));
    if (out.empty() || e < out.back()) out.push_back(e);
    if (e <= align) break;
  }
  return out;
}

/// The thickest k step in multiples of `align` (or k whole) with which the
/// plan fits, evened out over k; 0 when none fits.
std::size_t thickest_step(const tiling_problem& p, const tile_plan& t, std::size_t align) {
  const auto fits = [&](std::size_t kt) {
    return tile_plan_bytes(p, t.mt, t.nt, kt, t.hold, t.c_buffers, t.lookahead) <= p.budget;
  };
  if (fits(p.k)) return p.k;
  if (align >= p.k || !fits(align)) return 0;
  std::size_t lo = 1, hi = p.k / align;  // in units of align
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid * align))
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::size_t most = lo * align;
  for (std::size_t parts = ceil_div(p.k, most);; ++parts) {
    const std::size_t kt = round_up(ceil_div(p.k, parts), align);
    if (kt <= most) return kt;
  }
}

/// Whether plan a is preferred to b among plans predicted within 2% of the
/// fastest: fewer bytes, then larger tiles, thicker steps, fewer buffers.
bool preferred(const tile_plan& a, const tile_plan& b) {
  if (a.bytes_moved != b.bytes_moved) return a.bytes_moved < b.bytes_moved;
  if (a.mt * a.nt != b.mt * b.nt) return a.mt * a.nt > b.mt * b.nt;
  if (a.kt != b.kt) return a.kt > b.kt;
  if (a.lookahead != b.lookahead) return a.lookahead < b.lookahead;
  return a.predicted_seconds < b.predicted_seconds;
}

// Copies at most 0.8 of compute absorb the link's jitter (its both-ways
// rate varied 67-88 GB/s between samples on the H100): worth up to 5% of
// predicted time, no more, or thin k steps would qualify by slowing compute.
constexpr double max_copy_per_compute = 0.8;
constexpr double jitter_margin = 1.05;
constexpr double time_tolerance = 1.02;  // closer than the model's accuracy: fewer bytes decide
// Plans move at most this many times the I/O lower bound where any fits:
// time is not bought with traffic the link of a busier host may not have.
constexpr double max_bytes_over_bound = 1.4;

/// The I/O lower bound of p's product (Hong-Kung, as io_lower_bound_bytes).
double lower_bound_bytes(const tiling_problem& p) {
  const double eb = static_cast<double>(p.elem_bytes), words = static_cast<double>(p.budget) / eb;
  const double mn = static_cast<double>(p.m) * static_cast<double>(p.n);
  return eb * (2.0 * mn * static_cast<double>(p.k) / std::sqrt(words) + mn * ((p.reads_c ? 1 : 0) + (p.c_written ? 1 : 0)));
}
constexpr int lookaheads[] = {2, 3, 4, 6, 8};

/// Every plan with extents and steps in multiples of `align` that fits, timed.
std::vector<tile_plan> timed_candidates(const tiling_problem& p, std::size_t align) {
  std::vector<tile_plan> out;
  const std::vector<std::size_t> ms = aligned_extents(p.m, align), ns = aligned_extents(p.n, align);
  const std::vector<int> cbs = p.c_resident  ? std::vector<int>{0}
                               : p.c_buffers ? std::vector<int>{p.c_buffers}
                                             : std::vector<int>{1, 2};
  const std::vector<int> las = p.lookahead ? std::vector<int>{std::max(p.lookahead, 2)}
                                           : std::vector<int>(std::begin(lookaheads), std::end(lookaheads));
  for (std::size_t mt : ms)
    for (std::size_t nt : ns)
      for (held_panel h : {held_panel::none, held_panel::a_rows, held_panel::b_cols})
        for (int cb : cbs)
          for (int la : las) {
            tile_plan t;
            t.m = p.m, t.n = p.n, t.k = p.k, t.mt = mt, t.nt = nt, t.hold = h, t.c_buffers = cb, t.lookahead = la;
            t.c_blocks = blocks_for(p, cb);
            t.kt = thickest_step(p, t, align);
            if (t.kt == 0) continue;
            t.device_bytes = tile_plan_bytes(p, mt, nt, t.kt, h, cb, la);
            t.bytes_moved = tile_plan_traffic(p, mt, nt, h);
            const tile_prediction pr = predict_tile_plan(p, t);
            t.predicted_seconds = pr.seconds;
            t.copy_per_compute = pr.copy_per_compute;
            out.push_back(t);
          }
  return out;
}

/// Among plans near the I/O lower bound (all plans when none is), the
/// fastest plan whose copies take at most 0.8 of its compute, when one is
/// within 5% of the fastest of all (else the fastest of all); then the
/// preferred plan within 2% of it.
tile_plan choose(const tiling_problem& p, std::vector<tile_plan> c) {
  const double cap = max_bytes_over_bound * lower_bound_bytes(p);
  const auto over = [&](const tile_plan& t) { return static_cast<double>(t.bytes_moved) > cap; };
  if (!std::all_of(c.begin(), c.end(), over)) c.erase(std::remove_if(c.begin(), c.end(), over), c.end());
  const auto fastest_of = [&](auto&& pred) {
    double f = 0;
    for (const tile_plan& t : c)
      if (pred(t) && (f == 0 || t.predicted_seconds < f)) f = t.predicted_seconds;
    return f;
  };
  const auto under = [](const tile_plan& t) { return t.copy_per_compute <= max_copy_per_compute; };
  const double all = fastest_of([](const tile_plan&) { return true; }), calm = fastest_of(under);
  const bool only_under = calm > 0 && calm <= all * jitter_margin;
  const auto eligible = [&](const tile_plan& t) { return !only_under || under(t); };
  const double fastest = only_under ? calm : all;
  const tile_plan* best = nullptr;
  for (const tile_plan& t : c)
    if (eligible(t) && t.predicted_seconds <= fastest * time_tolerance && (!best || preferred(t, *best))) best = &t;
  return *best;
}

/// The plan by predicted time, extents in multiples of 64 elements, else of 8; none when neither fits.
std::optional<tile_plan> timed_plan(const tiling_problem& p) {
  for (std::size_t align : {std::size_t{64}, std::size_t{8}}) {
    std::vector<tile_plan> c = timed_candidates(p, align);
    if (!c.empty()) return choose(p, std::move(c));
  }
  return std::nullopt;
}

}  // namespace

tile_plan plan_tiles(const tiling_problem& p) {
  if (p.m == 0 || p.n == 0 || p.k == 0) {
    tile_plan t;
    t.m = p.m, t.n = p.n, t.k = p.k;
    t.mt = std::max<std::size_t>(p.m, 1), t.nt = std::max<std::size_t>(p.n, 1), t.kt = std::max<std::size_t>(p.k, 1);
    t.bytes_moved = 0;
    return t;
  }
  if (p.timed())
    if (std::optional<tile_plan> t = timed_plan(p)) return *t;
  return fewest_bytes_plan(p);
}

namespace {
std::mutex override_mutex;
std::optional<tiling_override> override_now;
}  // namespace

bool set_tiling_device(tiling_problem& p, const device& d) {
  std::lock_guard lock(override_mutex);
  const bool own = !override_now || !override_now->rates;
  p.rates = own ? d.rates() : *override_now->rates;
  if (!override_now) return own;
  p.lookahead = override_now->lookahead;
  p.c_blocks = override_now->c_blocks;
  p.c_buffers = override_now->c_buffers;
  return own;
}

void override_tiling(std::optional<tiling_override> o) {
  std::lock_guard lock(override_mutex);
  override_now = std::move(o);
}

std::vector<c_block> c_write_blocks(std::size_t outer, std::size_t inner, int blocks) {
  // Eigen's kernel sums each element over k in the same order for any column
  // count when blocks start at multiples of its register blocking (at most
  // 8 columns); products under 20 rows + columns + depth, or of one column,
  // take other paths: a tile with fewer than 20 rows is not cut.
  constexpr std::size_t min_inner = 20, small = 8, large = 64;
  if (blocks <= 1 || inner < min_inner || outer < 2 * small) return {{0, outer}};
  std::size_t w = ceil_div(outer, static_cast<std::size_t>(blocks));
  w = round_up(w, w >= large ? large : small);
  std::vector<c_block> out;
  for (std::size_t b = 0; b < outer; b += w) out.push_back({b, std::min(outer, b + w)});
  if (out.size() > 1 && out.back().end - out.back().begin < small) {
    out[out.size() - 2].end = outer;
    out.pop_back();
  }
  return out;
}

double io_lower_bound_bytes(std::size_t n, std::size_t elem_bytes, std::size_t budget) {
  const double nd = static_cast<double>(n), eb = static_cast<double>(elem_bytes);
  const double words = static_cast<double>(budget) / eb;
  return eb * (2.0 * nd * nd * nd / std::sqrt(words) + nd * nd);
}

}  // namespace oa::detail
