#include "sim/replay.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "sim/cases.hpp"
#include "sim/machine.hpp"
#include "sim/workloads.hpp"

namespace oa_sim {

namespace {

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("oa_sim::load_cases: cannot open '" + path + "'");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

double ratio(const replay_case& c) { return static_cast<double>(c.data_bytes) / static_cast<double>(c.budget); }

gemm_case recorded_gemm(const replay_case& c) {
  gemm_case g = plan_gemm(c.n, c.type == "float" ? 4 : 8, c.budget, c.mode == "sequential", 0);
  const std::string tiling = c.record.value("tiling", std::string());
  if (tiling.rfind(g.plan.describe(), 0) != 0 && g.plan.describe() != tiling)
    throw std::runtime_error("oa_sim::predict_case: the planner tiles gemm n=" + std::to_string(c.n) + " as '" +
                             g.plan.describe() + "', the run as '" + tiling + "'");
  return g;
}

}  // namespace

void measure_links(profile& p, const std::string& folder) {
  const auto bw = read_jsonl(folder + "/bandwidth.jsonl").at(0).at("results");
  const std::string src = "bandwidth.jsonl (oa-bandwidth --bytes 1GiB --repeat 10, best)";
  p.set("h2d_pinned_gbps", bw.at("h2d_pinned").at("best_gbps"), "measured", src);
  p.set("d2h_pinned_gbps", bw.at("d2h_pinned").at("best_gbps"), "measured", src);
  p.set("both_ways_pinned_gbps", bw.at("bidirectional_pinned").at("best_gbps"), "measured", src);
  p.set("h2d_pageable_gbps", bw.at("h2d_pageable").at("best_gbps"), "measured", src);
  p.set("d2h_pageable_gbps", bw.at("d2h_pageable").at("best_gbps"), "measured", src);
  p.set("device_memory_gbps", bw.at("d2d").at("best_gbps"), "measured", src + ": d2d, device memory read and written");
}

std::vector<nlohmann::json> load_engine_records(const std::string& folder) {
  std::vector<nlohmann::json> out;
  for (auto& r : read_jsonl(folder + "/bench.jsonl")) {
    if (!r.contains("host_memory")) r["host_memory"] = "pageable";  // GEMM records before they carried it
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<replay_case> load_cases(const std::string& folder) {
  std::vector<replay_case> cases;
  for (const std::string f : {"bench.jsonl", "bench_staging_pinned.jsonl", "gemm.jsonl", "gemm-staging-pinned.jsonl"})
    for (const auto& r : read_jsonl(folder + "/" + f)) {
      const std::string mode = r.at("mode");
      if ((mode != "oa" && mode != "sequential") || r.at("seconds").is_null()) continue;
      replay_case c;
      c.file = f;
      c.workload = r.at("workload");
      c.mode = mode;
      c.staging = f.find("pinned") != std::string::npos ? "pinned" : "register";
      c.type = r.value("type", std::string("double"));
      c.elements = r.at("elements");
      c.n = r.value("n", std::size_t{0});
      c.budget = r.at("device_memory_budget");
      c.data_bytes = r.at("data_bytes");
      c.measured = r.at("seconds");
      c.record = r;
      cases.push_back(std::move(c));
    }
  mark_fit_set(cases);
  return cases;
}

void mark_fit_set(std::vector<replay_case>& cases) {
  for (auto& c : cases) {
    const double x = ratio(c);
    const bool scale = std::abs(x - 0.25) < 0.01 || std::abs(x - 1) < 0.01 || std::abs(x - 4) < 0.01;
    c.fit = c.workload != "gemm" && (c.staging == "pinned" || scale);
  }
}

double predict_case(const profile& p, const replay_case& c) {
  const staging s = c.staging == "pinned" ? staging::pinned_buffers : staging::registered;
  graph g = c.workload == "gemm" ? old_gemm(p, recorded_gemm(c), s) : old_streaming(p, recorded_streaming(p, c.record), s);
  return simulate(g).makespan;
}

namespace {

double sum_of(const std::vector<replay_case>& cs, const std::string& file, const std::string& mode,
              const std::string& key) {
  double s = 0;
  for (const auto& c : cs)
    if (c.file == file && c.mode == mode) s += c.record.at(key).get<double>();
  return s;
}

/// gemm_unaligned_factor: the rate cuBLAS keeps on steps whose extents are
/// not multiples of 8, from the oa double n=16384 record (every step of its
/// 8192x3277 tiles by 1821 is so): its compute_seconds less the step model's
/// C traffic, against its misaligned steps' flops at the in-core rate.
void fit_unaligned(profile& p, const std::vector<replay_case>& cases) {
  for (const auto& c : cases) {
    if (c.workload != "gemm" || c.file != "gemm.jsonl" || c.mode != "oa" || c.type != "double" || c.n != 16384) continue;
    profile aligned = p, flops_only = p;
    aligned.set("gemm_unaligned_factor", 1, "fitted", "");
    flops_only.set("gemm_unaligned_factor", 1, "fitted", "");
    flops_only.set("device_memory_gbps", 1e30, "fitted", "");
    double misaligned = 0, rest = 0;
    for_each_gemm_step(
        recorded_gemm(c),
        [&](const gemm_step& st) {
          const double f = new_gemm_step_seconds(flops_only, 8, st.mi, st.nj, st.kl, st.kk > 0);
          const bool off = st.mi % 8 || st.nj % 8 || st.kl % 8;
          misaligned += off ? f : 0;
          rest += new_gemm_step_seconds(aligned, 8, st.mi, st.nj, st.kl, st.kk > 0) - (off ? f : 0);
        },
        [](const gemm_step&) {});
    p.set("gemm_unaligned_factor", misaligned / (c.record.at("compute_seconds").get<double>() - rest), "fitted",
          "gemm.jsonl: oa double n=16384 (tiles 8192x3277, k steps of 1821: none a multiple of 8): flops at "
          "cublas_double_tflops over (compute_seconds - C tiles' read and write at device_memory_gbps)");
  }
}

void measure(profile& p, const std::string& folder, const std::vector<replay_case>& cases) {
  measure_links(p, folder);
  for (const auto& r : read_jsonl(folder + "/gemm.jsonl"))
    if (r.at("mode") == "cublas" && r.at("n") == 16384)
      p.set(r.at("type") == "float" ? "cublas_float_tflops" : "cublas_double_tflops", r.at("gflops").get<double>() / 1e3,
            "measured", "gemm.jsonl: mode cublas, n=16384 (in core)");
  const std::string seq = "bench.jsonl: sum of bytes over sum of DMA seconds, mode sequential";
  p.set("h2d_registered_gbps", sum_of(cases, "bench.jsonl", "sequential", "h2d_bytes") /
                                   sum_of(cases, "bench.jsonl", "sequential", "h2d_seconds") / gb, "measured", seq);
  p.set("d2h_registered_gbps", sum_of(cases, "bench.jsonl", "sequential", "d2h_bytes") /
                                   sum_of(cases, "bench.jsonl", "sequential", "d2h_seconds") / gb, "measured", seq);
  const std::string seq2 = "gemm.jsonl: sum of bytes over sum of 2D DMA seconds, mode sequential";
  p.set("h2d_registered_2d_gbps", sum_of(cases, "gemm.jsonl", "sequential", "h2d_bytes") /
                                      sum_of(cases, "gemm.jsonl", "sequential", "h2d_seconds") / gb, "measured", seq2);
  p.set("d2h_registered_2d_gbps", sum_of(cases, "gemm.jsonl", "sequential", "d2h_bytes") /
                                      sum_of(cases, "gemm.jsonl", "sequential", "d2h_seconds") / gb, "measured", seq2);
  for (const std::string w : {"blackscholes", "haversine"}) {
    std::vector<double> v;
    for (const auto& c : cases)
      if (c.workload == w && c.staging == "register")
        v.push_back(c.record.at("compute_seconds").get<double>() / static_cast<double>(c.elements) * 1e9);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    p.set(w + "_kernel_ns_per_element", v[v.size() / 2], "measured",
          "bench.jsonl: median of compute_seconds / elements over " + std::to_string(v.size()) + " records");
  }
  // The DMAs after a host function: their timed seconds beyond the pinned peak, per piece.
  for (const auto& c : cases)
    if (c.staging == "pinned" && c.workload != "gemm") {
      const streaming_case sc = recorded_streaming(p, c.record);
      std::size_t n = 0;
      for (std::size_t u : sc.chunk_units)
        for (std::size_t b : sc.in_unit_bytes) n += pieces(b * u, std::size_t{32} << 20).size();
      const double extra = c.record.at("h2d_seconds").get<double>() - static_cast<double>(sc.in_bytes()) / (p["h2d_pinned_gbps"] * gb);
      p.set("host_function_resume_us", extra / static_cast<double>(n) * 1e6, "measured",
            c.file + ": (h2d_seconds - h2d_bytes / pinned peak) / " + std::to_string(n) + " staged pieces");
    }
  fit_unaligned(p, cases);
  // cuBLAS in tiles: the oa double record's compute seconds against its tiles at the in-core rate.
  for (const auto& c : cases)
    if (c.workload == "gemm" && c.file == "gemm.jsonl" && c.mode == "oa" && c.type == "double" && c.n == 16384) {
      profile q = p;
      q.set("gemm_tile_efficiency", 1, "measured", "");
      const gemm_case g = recorded_gemm(c);
      double ideal = 0;
      const auto& pl = g.plan;
      for (std::size_t i = 0; i < pl.tiles_m(); ++i)
        for (std::size_t j = 0; j < pl.tiles_n(); ++j)
          for (std::size_t k = 0; k < pl.steps_k(); ++k)
            ideal += gemm_step_seconds(q, 8, std::min(pl.mt, c.n - i * pl.mt), std::min(pl.nt, c.n - j * pl.nt),
                                       std::min(pl.kt, c.n - k * pl.kt));
      p.set("gemm_tile_efficiency", ideal / c.record.at("compute_seconds").get<double>(), "measured",
            "gemm.jsonl: oa double n=16384, its tiles at the in-core rate over its compute_seconds");
    }
}

/// Solves the normal equations `a x = b` (k x k, a symmetric positive definite) by elimination.
std::vector<double> solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const std::size_t k = b.size();
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t r = i + 1; r < k; ++r) {
      const double f = a[r][i] / a[i][i];
      for (std::size_t j = i; j < k; ++j) a[r][j] -= f * a[i][j];
      b[r] -= f * b[i];
    }
  std::vector<double> x(k);
  for (std::size_t i = k; i-- > 0;) {
    double v = b[i];
    for (std::size_t j = i + 1; j < k; ++j) v -= a[i][j] * x[j];
    x[i] = v / a[i][i];
  }
  return x;
}

/// Arrays a registered case pins: the streaming workload's inputs and results, or a product's A, B and C.
double registered_arrays(const profile& p, const replay_case& c) {
  if (c.workload == "gemm") return 3;
  const streaming_case sc = recorded_streaming(p, c.record);
  return static_cast<double>(sc.in_unit_bytes.size() + sc.out_unit_bytes.size());
}

/// Least squares of relative errors `sum (x.v - y)^2 / m^2` over the rows,
/// with only the parameters `idx` free (the others held at zero).
std::vector<double> relative_fit(const std::vector<std::vector<double>>& xs, const std::vector<double>& ys,
                                 const std::vector<double>& ms, const std::vector<std::size_t>& idx) {
  std::vector<std::vector<double>> a(idx.size(), std::vector<double>(idx.size(), 0));
  std::vector<double> b(idx.size(), 0);
  for (std::size_t r = 0; r < xs.size(); ++r) {
    const double w = 1 / (ms[r] * ms[r]);
    for (std::size_t i = 0; i < idx.size(); ++i) {
      for (std::size_t j = 0; j < idx.size(); ++j) a[i][j] += w * xs[r][idx[i]] * xs[r][idx[j]];
      b[i] += w * xs[r][idx[i]] * ys[r];
    }
  }
  return solve(a, b);
}

/// The fit set's parameters `keys` (each adds to a registered case's time in
/// proportion to its regressor: a stage, an array, inputs' GiB, results'
/// GiB) by least squares of relative errors, none negative: a parameter the
/// solution makes negative is held at zero and the rest refitted (an active
/// set, enough for four unknowns).
std::vector<double> fit_nonnegative(const profile& p, const std::vector<replay_case>& cases,
                                    const std::vector<std::string>& keys, int& n) {
  profile q = p;
  for (const auto& k : keys) q.set(k, k.find("per_gib") != std::string::npos ? 1e-12 : 0, "fitted", "");
  std::vector<std::vector<double>> xs;
  std::vector<double> ys, ms;
  for (const auto& c : cases) {
    if (!c.fit || c.staging != "register") continue;
    std::vector<double> x;
    for (const auto& k : keys)
      x.push_back(k == "stage_fixed_seconds"                ? 1
                  : k == "register_fixed_seconds_per_array" ? registered_arrays(p, c)
                  : k == "register_touched_seconds_per_gib" ? c.record.at("h2d_bytes").get<double>() / gib
                                                            : c.record.at("d2h_bytes").get<double>() / gib);
    xs.push_back(x);
    ys.push_back(c.measured - predict_case(q, c));
    ms.push_back(c.measured);
  }
  n = static_cast<int>(xs.size());
  if (xs.empty()) throw std::runtime_error("oa_sim::calibrate: no registered streaming record in the fit set");
  std::vector<std::size_t> idx(keys.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  for (;;) {
    const std::vector<double> s = relative_fit(xs, ys, ms, idx);
    const auto neg = std::min_element(s.begin(), s.end());
    if (*neg < 0) {
      idx.erase(idx.begin() + (neg - s.begin()));
      continue;
    }
    std::vector<double> v(keys.size(), 0);
    for (std::size_t i = 0; i < idx.size(); ++i) v[idx[i]] = s[i];
    return v;
  }
}

/// The old design's fixed costs and the pinning rates of resident (inputs)
/// and untouched (results) pages, fitted on the registered fit set. A fixed
/// cost per stage and one per registered array both explain those records
/// (Black-Scholes registers 7 arrays, Haversine 5); both are fitted, neither
/// negative. The new design registers nothing, so the per-stage share is
/// what it keeps: `stage_fixed_seconds_if_per_stage` records the
/// alternative (the whole fixed cost per stage) for the bars' sensitivity.
std::string fit_register(profile& p, std::vector<replay_case>& cases) {
  // A registration's fixed cost measured by the probe stays; the rest is fitted around it.
  const bool measured = p.params.count("register_fixed_seconds_per_array") &&
                        p.params.at("register_fixed_seconds_per_array").provenance == "measured";
  std::vector<std::string> keys{"stage_fixed_seconds", "register_touched_seconds_per_gib",
                                "register_untouched_seconds_per_gib"};
  if (!measured) keys.push_back("register_fixed_seconds_per_array");
  int n = 0;
  const std::vector<double> v = fit_nonnegative(p, cases, keys, n);
  const std::string how = "non-negative least squares of relative errors over the " + std::to_string(n) +
                          " registered streaming records at 1/4x, 1x, 4x the budget (per stage, per registered "
                          "array, inputs' GiB, results' GiB)";
  std::string line = "register:";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    p.set(keys[i], v[i], "fitted", how);
    line += " " + keys[i] + " " + std::to_string(v[i]);
  }
  const std::vector<std::string> alt_keys{"stage_fixed_seconds", "register_touched_seconds_per_gib",
                                          "register_untouched_seconds_per_gib"};
  profile without = p;
  without.set("register_fixed_seconds_per_array", 0, "fitted", "");
  const std::vector<double> alt = fit_nonnegative(without, cases, alt_keys, n);
  p.set("stage_fixed_seconds_if_per_stage", alt[0], "fitted",
        "the same records fitted with no per-array cost: the whole fixed cost per stage (the bars' sensitivity)");
  return line + " (" + how + "); if per stage only: stage_fixed_seconds " + std::to_string(alt[0]);
}

/// staging_fill_gbps: the rate at which the streaming pinned-staging record's time is reproduced.
std::string fit_staging(profile& p, std::vector<replay_case>& cases) {
  for (const auto& c : cases) {
    if (!c.fit || c.staging != "pinned") continue;
    double lo = 0.5, hi = 500;
    for (int i = 0; i < 40; ++i) {
      const double mid = std::sqrt(lo * hi);
      p.set("staging_fill_gbps", mid, "fitted", "");
      (predict_case(p, c) > c.measured ? lo : hi) = mid;
    }
    const double v = std::sqrt(lo * hi);
    const std::string how = "bisection on " + c.file + " (" + c.workload + ", " + std::to_string(c.elements) +
                            " elements): the copy pool's memcpy rate inside CUDA's callback thread";
    p.set("staging_fill_gbps", v, "fitted", how);
    return "staging: staging_fill_gbps " + std::to_string(v) + " (" + how + ")";
  }
  throw std::runtime_error("oa_sim::calibrate: no pinned-staging streaming record to fit staging_fill_gbps on");
}

}  // namespace

std::vector<std::string> calibrate(profile& p, const std::string& folder, std::vector<replay_case>& cases) {
  mark_fit_set(cases);
  measure(p, folder, cases);
  std::vector<std::string> lines = fit_probe(p, folder);
  lines.push_back(fit_register(p, cases));
  lines.push_back(fit_staging(p, cases));
  return lines;
}

}  // namespace oa_sim
