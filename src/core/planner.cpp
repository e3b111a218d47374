#include "core/planner.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>

#include "oa/core/error.hpp"

namespace oa::detail {

std::vector<bool> live_calls(const std::vector<call_node>& nodes) {
  std::vector<bool> live(nodes.size(), false);
  std::unordered_set<const value_state*> read_by_live;
  for (std::size_t i = nodes.size(); i-- > 0;) {
    const call_node& n = nodes[i];
    bool needed = false;
    n.for_each_output([&](const value_ptr& v) {
      needed = needed || v->handles.load(std::memory_order_relaxed) > 0 || v->user_storage || read_by_live.count(v.get());
    });
    if (!needed) continue;
    live[i] = true;
    for (const auto& a : n.args)
      if (a.role != arg_role::out) read_by_live.insert(a.value.get());
    for (const auto& s : n.scalars) read_by_live.insert(s.get());
  }
  return live;
}

std::vector<stage> form_stages(const std::vector<call_node>& nodes, const std::vector<bool>& live) {
  std::vector<stage> stages;
  std::unordered_map<const value_state*, int> produced_in;  // value -> stage
  std::unordered_map<const value_state*, int> last_read_in;  // value -> last stage reading it
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    const call_node& n = nodes[i];
    const bool capable = n.device_twin || n.contraction || n.kernel;
    const bool kernels = static_cast<bool>(n.kernel);
    // The earliest stage this call may join: after every stage producing
    // what it reads (a whole value it reads must be finished: strictly after),
    // and after every stage reading a version it updates in place.
    int earliest = 0;
    for (const auto& a : n.args) {
      if (a.role == arg_role::out) continue;
      if (auto it = produced_in.find(a.value.get()); it != produced_in.end()) earliest = std::max(earliest, it->second);
      if (a.role == arg_role::mut)
        if (auto it = last_read_in.find(a.value.get()); it != last_read_in.end()) earliest = std::max(earliest, it->second);
    }
    for (const auto& v : n.scalars)
      if (auto it = produced_in.find(v.get()); it != produced_in.end()) earliest = std::max(earliest, it->second + 1);
    // Join the last matching stage at or after `earliest`, else open a new one.
    // A contraction is a stage of its own.
    const bool contraction = static_cast<bool>(n.contraction);
    int target = -1;
    for (int s = static_cast<int>(stages.size()) - 1; s >= earliest && !contraction; --s) {
      const stage& st = stages[static_cast<std::size_t>(s)];
      if (!st.contraction && st.units == n.units && st.device_capable == capable && st.kernels == kernels) {
        target = s;
        break;
      }
    }
    if (target < 0) {
      stages.push_back({{}, n.units, capable, kernels, contraction});
      target = static_cast<int>(stages.size() - 1);
    }
    stages[static_cast<std::size_t>(target)].calls.push_back(static_cast<int>(i));
    for (const auto& a : n.args) {
      if (a.role != arg_role::out) {
        int& r = last_read_in[a.value.get()];
        r = std::max(r, target);
      }
    }
    for (const auto& v : n.scalars) {
      int& r = last_read_in[v.get()];
      r = std::max(r, target);
    }
    n.for_each_output([&](const value_ptr& v) { produced_in[v.get()] = target; });
  }
  return stages;
}

std::unordered_set<const value_state*> values_needed_on_host(const std::vector<call_node>& nodes,
                                                           const std::vector<bool>& live,
                                                           const std::vector<stage>& stages,
                                                           std::unordered_set<const value_state*>* demanded) {
  std::unordered_map<int, int> stage_of;  // node -> stage
  for (std::size_t s = 0; s < stages.size(); ++s)
    for (int c : stages[s].calls) stage_of[c] = static_cast<int>(s);
  // The node writing each value: results, and the versions mut calls make
  // of the caller's objects (no `producer` of their own).
  std::unordered_map<const value_state*, int> writer;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (live[i]) nodes[i].for_each_output([&](const value_ptr& v) { writer[v.get()] = static_cast<int>(i); });
  std::unordered_set<const value_state*> superseded, needed;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    for (const auto& a : nodes[i].args) {
      if (a.role == arg_role::mut) superseded.insert(a.value.get());
      // Read by a later stage: its writer's stage must write it back.
      if (a.role == arg_role::out) continue;
      if (auto w = writer.find(a.value.get()); w != writer.end() && stage_of[w->second] != stage_of[static_cast<int>(i)])
        needed.insert(a.value.get());
    }
    for (const auto& v : nodes[i].scalars) needed.insert(v.get());
  }
  std::unordered_set<const value_state*> demand;  // wanted on the host for their own sake
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    for (const auto& v : nodes[i].scalars) demand.insert(v.get());
    nodes[i].for_each_output([&](const value_ptr& v) {
      if (v->handles.load(std::memory_order_relaxed) > 0) demand.insert(v.get());
      if (v->user_storage && !superseded.count(v.get())) demand.insert(v.get());
      if (v->ops->kind == split::split_kind::reduction) demand.insert(v.get());
    });
  }
  needed.insert(demand.begin(), demand.end());
  if (demanded) *demanded = std::move(demand);
  return needed;
}

stage_layout layout_stage(const stage& s, const std::vector<call_node>& nodes, placement_mode mode,
                          const std::unordered_set<const value_state*>& needed_on_host,
                          const std::unordered_set<const value_state*>& own) {
  stage_layout L;
  std::unordered_map<const value_state*, int> index;
  auto add = [&](value_state* v, value_class cls, int first) {
    auto [it, fresh] = index.emplace(v, static_cast<int>(L.values.size()));
    if (fresh) L.values.push_back({v, cls, -1, first, first});
    return it->second;
  };
  auto produced_class = [&](const value_state* v) {
    return needed_on_host.count(v) ? value_class::output : value_class::temporary;
  };

  // Values and their live ranges, by position in the stage; the inputs some
  // call reads (not only overwrites) are loaded.
  std::unordered_set<int> read;
  for (std::size_t p = 0; p < s.calls.size(); ++p) {
    const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
    call_slots cs;
    const int pos = static_cast<int>(p);
    for (const auto& a : n.args) {
      int idx;
      if (a.role == arg_role::out) {
        idx = add(a.value.get(), produced_class(a.value.get()), pos);
      } else {
        idx = add(a.value.get(), value_class::input, -1);
        L.values[static_cast<std::size_t>(idx)].last = pos;
        if (!(a.role == arg_role::mut && a.overwrites)) read.insert(idx);
        if (a.role == arg_role::mut) add(a.new_value.get(), produced_class(a.new_value.get()), pos);
      }
      cs.regions.push_back(idx);
    }
    if (n.reduction) {
      cs.partial = static_cast<int>(L.reductions.size());
      L.reductions.push_back(n.reduction.get());
      L.partial_bytes += n.reduction->ops->partial_bytes;
    }
    L.calls.push_back(std::move(cs));
  }
  for (std::size_t i = 0; i < L.values.size(); ++i) {
    stage_value& v = L.values[i];
    if (v.cls == value_class::output) v.last = INT_MAX;
    if (v.cls == value_class::input && !read.count(static_cast<int>(i))) v.loaded = false;
  }

  // Buffers: inputs are staged at the start of a chunk; a produced value takes
  // a free buffer of its unit size; a mut's new version takes over the
  // buffer of the version it updates; a buffer is free after its last reader.
  std::map<std::size_t, std::vector<int>> free_buffers;
  auto take = [&](std::size_t unit_bytes) {
    auto& f = free_buffers[unit_bytes];
    if (!f.empty()) {
      const int b = f.back();
      f.pop_back();
      return b;
    }
    L.buffer_unit_bytes.push_back(unit_bytes);
    return static_cast<int>(L.buffer_unit_bytes.size() - 1);
  };
  auto needs_buffer = [&](const stage_value& v) {
    switch (mode) {
      case placement_mode::staged: return true;
      case placement_mode::in_place: return v.cls == value_class::temporary;
      case placement_mode::fused: return v.cls != value_class::temporary;
    }
    return true;
  };
  std::unordered_set<int> placeholders;  // buffers standing for own values' copies: never reused
  auto take_for = [&](const stage_value& v) {
    if (!own.count(v.v)) return take(v.v->shape.unit_bytes());
    L.buffer_unit_bytes.push_back(0);
    placeholders.insert(static_cast<int>(L.buffer_unit_bytes.size() - 1));
    return static_cast<int>(L.buffer_unit_bytes.size() - 1);
  };
  for (auto& v : L.values)
    if (v.cls == value_class::input && needs_buffer(v)) v.buffer = take_for(v);
  // Values by the position of their last reader: each position frees only
  // its own, so a long chain lays out in linear time.
  std::vector<std::vector<int>> dying(s.calls.size());
  for (std::size_t i = 0; i < L.values.size(); ++i) {
    const int last = L.values[i].last;
    if (last >= 0 && static_cast<std::size_t>(last) < dying.size()) dying[static_cast<std::size_t>(last)].push_back(static_cast<int>(i));
  }
  std::unordered_set<int> handed_over;
  for (std::size_t p = 0; p < s.calls.size(); ++p) {
    const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
    for (const auto& a : n.args) {
      if (a.role == arg_role::mut) {
        auto& old_v = L.values[static_cast<std::size_t>(index.at(a.value.get()))];
        auto& new_v = L.values[static_cast<std::size_t>(index.at(a.new_value.get()))];
        new_v.buffer = old_v.buffer;
        handed_over.insert(index.at(a.value.get()));
      } else if (a.role == arg_role::out) {
        auto& v = L.values[static_cast<std::size_t>(index.at(a.value.get()))];
        if (needs_buffer(v)) v.buffer = take_for(v);
      }
    }
    for (int i : dying[p]) {
      const auto& v = L.values[static_cast<std::size_t>(i)];
      if (v.buffer >= 0 && !handed_over.count(i) && !placeholders.count(v.buffer))
        free_buffers[v.v->shape.unit_bytes()].push_back(v.buffer);
    }
  }

  // Scratch memory of device functions given as code: a buffer per call that
  // declares some (calls of a chunk run one after another on its stream, so
  // one buffer of the largest would do: a later refinement).
  if (mode != placement_mode::in_place)
    for (std::size_t p = 0; p < s.calls.size(); ++p) {
      const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
      if (!n.kernel || (n.kernel->scratch_per_unit == 0 && n.kernel->scratch_fixed == 0)) continue;
      L.calls[p].scratch = static_cast<int>(L.buffer_unit_bytes.size());
      L.buffer_unit_bytes.push_back(n.kernel->scratch_per_unit);
      L.buffer_fixed_bytes.resize(L.buffer_unit_bytes.size(), 0);
      L.buffer_fixed_bytes.back() = n.kernel->scratch_fixed;
    }
  L.buffer_fixed_bytes.resize(L.buffer_unit_bytes.size(), 0);
  for (std::size_t b : L.buffer_unit_bytes) L.buffer_bytes_per_unit += b;
  for (const auto& v : L.values) {
    const std::size_t ub = v.v->shape.unit_bytes();
    L.working_bytes_per_unit += ub;
    if (v.cls == value_class::input && v.loaded) L.in_bytes_per_unit += ub;
    if (v.cls == value_class::output) L.out_bytes_per_unit += ub;
  }
  return L;
}

namespace {
std::size_t round_up(std::size_t n, std::size_t to) { return to <= 1 ? n : (n + to - 1) / to * to; }

/// a * b, or SIZE_MAX when it overflows.
std::size_t saturating_mul(std::size_t a, std::size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}
std::size_t saturating_add(std::size_t a, std::size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
}  // namespace

std::size_t slot_memory::bytes(std::size_t chunk_units) const noexcept {
  std::size_t total = fixed ? round_up(fixed, granularity) : 0;
  for (std::size_t b = 0; b < unit_bytes.size(); ++b) {
    const std::size_t extra = b < buffer_fixed.size() ? buffer_fixed[b] : 0;
    total = saturating_add(total, round_up(saturating_add(saturating_mul(unit_bytes[b], chunk_units), extra), granularity));
  }
  return total;
}

std::size_t slot_memory::bytes_per_unit() const noexcept {
  std::size_t total = 0;
  for (std::size_t ub : unit_bytes) total = saturating_add(total, ub);
  return total;
}

chunk_plan plan_chunks(std::size_t units, std::size_t bytes_per_unit, std::size_t fixed_bytes_per_slot,
                       std::size_t budget, int streams, std::size_t chunk_bytes, const std::string& what,
                       const chunk_costs* costs) {
  return plan_chunks(units, slot_memory{{bytes_per_unit}, fixed_bytes_per_slot, 1, {}}, budget, streams, chunk_bytes,
                     what, costs);
}

namespace {
std::size_t ceil_div(std::size_t a, std::size_t b) { return a / b + (a % b != 0); }

/// Refuses a stage whose values cannot exist in this machine's memory: a
/// unit's bytes overflow, or the units of one buffer pass the largest object
/// C++ can address (PTRDIFF_MAX bytes). Named before any chunk is planned.
void check_addressable(std::size_t units, const slot_memory& slot, const std::string& what) {
  constexpr auto largest = static_cast<std::size_t>(PTRDIFF_MAX);
  std::size_t unit = 0;
  for (std::size_t ub : slot.unit_bytes) unit = saturating_add(unit, ub);
  unit = std::max(unit, slot.moved_bytes_per_unit);
  if (units == 0 || unit == 0 || units <= largest / unit) return;
  const bool overflow = unit == SIZE_MAX || units > SIZE_MAX / unit;
  throw invalid_argument(what, "size",
                         std::to_string(units) + " units of " + std::to_string(unit) + " bytes " +
                             (overflow ? "overflow a size in bytes" : "exceed the largest object this machine can address") +
                             " (" + std::to_string(largest) + " bytes)");
}

/// The size of `chunks` even chunks of `units`, large ones rounded up to a
/// multiple of `align` units.
std::size_t even_chunk(std::size_t units, std::size_t chunks, std::size_t align) {
  std::size_t even = ceil_div(units, chunks);
  if (chunks > 1 && even >= 2 * align) even = round_up(even, align);  // even <= units / 2 + 1: no overflow
  return even;
}
}  // namespace

}  // namespace oa::detail

namespace oa {

device_rates device_rates::snapped() const noexcept {
  const auto snap = [](double v) { return v > 0 && std::isfinite(v) ? std::exp2(std::floor(2 * std::log2(v)) / 2) : v; };
  device_rates r = *this;
  for (double* v : {&r.h2d, &r.d2h, &r.both_ways, &r.staging, &r.kernel_bytes, &r.gemm_flops[0], &r.gemm_flops[1]})
    *v = snap(*v);
  return r;
}

}  // namespace oa

namespace oa::detail {

double link_seconds(const device_rates& r, double h2d_bytes, double d2h_bytes) noexcept {
  const double inf = std::numeric_limits<double>::infinity();
  const double rh = r.h2d > 0 ? r.h2d : inf, rd = r.d2h > 0 ? r.d2h : inf;
  const double alone = std::max(h2d_bytes / rh, d2h_bytes / rd);
  if (!(r.both_ways > 0)) return alone;
  if (rh + rd <= r.both_ways) return alone;
  if (!std::isfinite(rh + rd)) return std::max(alone, (h2d_bytes + d2h_bytes) / r.both_ways);
  // Both run at their share of the cap until the shorter finishes; the other goes on alone.
  const double sh = rh * r.both_ways / (rh + rd), sd = rd * r.both_ways / (rh + rd);
  const double both = std::min(h2d_bytes / sh, d2h_bytes / sd);
  return both + (h2d_bytes - sh * both) / rh + (d2h_bytes - sd * both) / rd;
}

double pipeline_seconds(const chunk_costs& c, std::size_t units, std::size_t chunks, int slots) {
  if (units == 0 || chunks == 0) return 0;
  const device_rates& r = c.rates;
  const double u = static_cast<double>(units) / static_cast<double>(chunks);
  const auto per = [](double bytes, double rate) { return rate > 0 ? bytes / rate : 0.0; };
  const double in_b = static_cast<double>(c.in_bytes_per_unit) * u, out_b = static_cast<double>(c.out_bytes_per_unit) * u;
  // Staging fills and drains run beside their DMAs, piece by piece: the slower sets the pace.
  const double in = std::max(per(in_b, r.h2d), per(static_cast<double>(c.staged_in_per_unit) * u, r.staging)) +
                    static_cast<double>(c.copies_in) * r.op_latency;
  const double out = std::max(per(out_b, r.d2h), per(static_cast<double>(c.staged_out_per_unit) * u, r.staging)) +
                     static_cast<double>(c.copies_out) * r.op_latency;
  const double kernels = per(static_cast<double>(c.kernel_bytes_per_unit) * u, r.kernel_bytes) +
                         static_cast<double>(c.launches) * r.op_latency;
  const double round_trip = in + kernels + out;
  const double busiest = std::max({in, kernels, out, link_seconds(r, in_b, out_b),
                                   round_trip / static_cast<double>(std::max(slots, 1))});
  return round_trip + static_cast<double>(chunks - 1) * busiest;
}

namespace {

/// The chunk count from `fewest` up that the time model predicts fastest,
/// taking the fewest chunks within 1% of the best (per-chunk host work the
/// model leaves out favours fewer). Candidates grow by about 1/16 a step.
std::size_t fastest_chunks(const chunk_costs& c, std::size_t units, std::size_t fewest, std::size_t largest_chunk,
                           int slots, std::size_t align) {
  std::vector<std::pair<std::size_t, double>> tried;
  double best = std::numeric_limits<double>::infinity();
  // Up to one chunk per `align` units: finer chunks only add operations.
  const std::size_t most = std::max(fewest, std::min<std::size_t>(units / align, fewest * 256));
  for (std::size_t n = fewest; n <= most; n += std::max<std::size_t>(1, n / 16)) {
    if (even_chunk(units, n, align) > largest_chunk) continue;
    const double t = pipeline_seconds(c, units, n, slots);
    tried.emplace_back(n, t);
    best = std::min(best, t);
  }
  for (const auto& [n, t] : tried)
    if (t <= best * 1.01) return n;
  return fewest;
}

}  // namespace

chunk_plan plan_chunks(std::size_t units, const slot_memory& slot, std::size_t budget, int streams,
                       std::size_t chunk_bytes, const std::string& what, const chunk_costs* costs) {
  chunk_plan plan;
  streams = std::max(streams, 1);
  if (units == 0) return {1, 0, 1};
  check_addressable(units, slot, what);
  const std::size_t bytes_per_unit = std::max(slot.bytes_per_unit(), slot.moved_bytes_per_unit);
  // The cap: at most chunk_bytes per chunk, but never less than one unit.
  std::size_t most = units;
  if (chunk_bytes != 0 && bytes_per_unit != 0) most = std::min(most, std::max<std::size_t>(1, chunk_bytes / bytes_per_unit));
  // The most units per chunk such that `s` slots fit (slot bytes grow with the chunk).
  auto largest_fit = [&](std::size_t s) -> std::size_t {
    if (saturating_mul(slot.bytes(1), s) > budget) return 0;
    std::size_t lo = 1, hi = most;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo + 1) / 2;
      if (saturating_mul(slot.bytes(mid), s) <= budget) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  std::size_t cu = 0;
  int s = streams;
  for (; s >= 1; --s)
    if ((cu = largest_fit(static_cast<std::size_t>(s))) >= 1) break;
  if (cu == 0)
    throw plan_error("oa: " + what + ": the device budget of " + std::to_string(budget) +
                     " bytes cannot hold one unit (" + std::to_string(bytes_per_unit) + " bytes per unit plus " +
                     std::to_string(slot.fixed) + " fixed bytes, even on one stream); the smallest budget that "
                     "runs it is " + std::to_string(slot.bytes(1)) + " bytes");
  // As few chunks as fit, as even as possible; when chunks are large, their
  // starts fall on multiples of `align` units, so vectorized CPU code sees the
  // same alignment (and gives the same bits) as over the whole array, and
  // copies start aligned. Where the aligned size of the fewest chunks passes
  // `cu`, the fewest chunks whose aligned size fits are those of the largest
  // multiple of `align` within `cu` (cu >= 2 align there): computed, not
  // searched, so any number of units plans at once.
  constexpr std::size_t align = 64;
  std::size_t chunks = ceil_div(units, cu);
  if (even_chunk(units, chunks, align) > cu) chunks = ceil_div(units, cu / align * align);
  if (costs && costs->known())
    chunks = fastest_chunks(*costs, units, chunks, std::max(cu, even_chunk(units, chunks, align)), s, align);
  plan.chunk_units = even_chunk(units, chunks, align);
  plan.chunks = ceil_div(units, plan.chunk_units);
  plan.streams = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(s), plan.chunks));
  return plan;
}

std::string describe(const stage& s, const std::vector<call_node>& nodes) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(s.calls.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    out += nodes[static_cast<std::size_t>(s.calls[i])].name;
  }
  if (s.calls.size() > shown) out += " (+" + std::to_string(s.calls.size() - shown) + " more)";
  return out;
}

}  // namespace oa::detail
