#include "dag_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <oa/annotations/stl.hpp>
#include <oa/core/pinned.hpp>
#include <oa/oa.hpp>
#include <random>
#include <thread>

#include "bench_table.hpp"

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

namespace oa_bench {

namespace {

using vec = std::vector<double>;
using in_vec = std::vector<double, oa::pinned_allocator<double>>;

in_vec random_vec(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(0.0, 1.0);
  in_vec v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// Every result of a run, packed for the modes to compare (first the
/// `rounded` values whose bits depend on how the data is cut into chunks:
/// reductions, prefix sums; then the arrays computed element by element or
/// sorted); called after the run's clock stops.
using packer = std::function<vec()>;

/// A workload: its inputs, made once, and one run, which returns once every
/// result is in host memory (what the clock measures), with their packer.
struct dag_workload {
  std::vector<in_vec> in;
  std::size_t rounded = 0;
  std::string describe;
  std::function<packer(const std::vector<in_vec>&)> run;
  double data_bytes() const {
    double b = 0;
    for (const auto& v : in) b += static_cast<double>(v.size() * sizeof(double));
    return b;
  }
};

template <class V>
void append(vec& out, const V& v) { out.insert(out.end(), v.begin(), v.end()); }

dag_workload image(std::size_t n, std::uint64_t seed) {
  dag_workload w;
  w.in = {random_vec(n, seed), random_vec(n / 4, seed + 1), random_vec(n / 4, seed + 2)};
  w.rounded = 3;
  w.describe = "luma " + std::to_string(n) + " pixels, chroma 2 x " + std::to_string(n / 4) +
               "; luma: contrast and edge planes and their energy, chroma: colour statistics";
  w.run = [](const std::vector<in_vec>& p) {
    const in_vec &y = p[0], &cb = p[1], &cr = p[2];
    auto contrast = oa::stl::transform(y, y, std::multiplies<>{});  // luma: two planes out
    auto edge = oa::stl::transform(contrast, y, std::minus<>{});
    oa::lazy<double> luma = oa::stl::transform_reduce(edge, edge, 0.0);
    oa::lazy<double> hue = oa::stl::transform_reduce(cb, cr, 0.0);  // chroma: statistics only
    oa::lazy<double> saturation = oa::stl::transform_reduce(cb, cb, 0.0);
    (void)luma.get(), (void)contrast.get(), (void)edge.get();  // every result computed
    return packer([=] {
      vec out{luma.get(), hue.get(), saturation.get()};
      append(out, contrast.get());
      append(out, edge.get());
      return out;
    });
  };
  return w;
}

dag_workload ensemble(std::size_t n, std::uint64_t seed) {
  dag_workload w;
  w.in = {random_vec(n, seed), random_vec(n, seed + 1)};
  w.rounded = n + 1;  // the linear score and the prefix sums
  w.describe = std::to_string(n) + " samples; a linear score, a rank model (sort) and a trend (prefix sum)";
  w.run = [](const std::vector<in_vec>& p) {
    const in_vec &x = p[0], &weights = p[1];
    oa::lazy<double> linear = oa::stl::transform_reduce(x, weights, 0.0);  // model 1
    auto ranked = std::make_shared<in_vec>(x);                                  // model 2 sorts a copy
    oa::stl::sort(*ranked);
    auto trend = oa::stl::inclusive_scan(x, std::plus<>{});                 // model 3
    oa::evaluate();
    return packer([=] {
      vec out{linear.get()};
      append(out, trend.get());
      append(out, *ranked);
      return out;
    });
  };
  return w;
}

dag_workload union_of(std::size_t n, std::uint64_t seed) {
  dag_workload w;
  w.in = {random_vec(n, seed), random_vec(n, seed + 1), random_vec(n / 2, seed + 2), random_vec(n / 4, seed + 3),
          random_vec(n / 8, seed + 4)};
  w.rounded = 2;
  w.describe = "tables of " + std::to_string(n) + ", " + std::to_string(n / 2) + ", " + std::to_string(n / 4) +
               " and " + std::to_string(n / 8) + " rows; three aggregates and a projection of two columns";
  w.run = [](const std::vector<in_vec>& t) {
    oa::lazy<double> q1 = oa::stl::transform_reduce(t[0], t[1], 0.0);  // revenue: price x quantity
    auto q2_net = oa::stl::transform(t[2], t[2], std::minus<>{});      // a projection: two columns back
    auto q2_gross = oa::stl::transform(t[2], t[2], std::plus<>{});
    oa::lazy<double> q3 = oa::stl::transform_reduce(t[3], t[3], 0.0);  // energy
    auto q4 = oa::stl::transform(t[4], std::negate<>{});               // a column negated, back to the host
    (void)q1.get();  // every result computed
    return packer([=] {
      vec out{q1.get(), q3.get()};
      append(out, q2_net.get());
      append(out, q2_gross.get());
      append(out, q4.get());
      return out;
    });
  };
  return w;
}

struct outcome {
  std::string mode, device;
  double seconds = std::numeric_limits<double>::infinity();
  oa::stage_report total;
  std::size_t stages = 0, together = 0;  // stages of the fastest run; those run together with another
  std::optional<std::string> failure;
  std::optional<bool> exact;  // arrays bit for bit those of mode serial
  double reduction_error = 0;  // reductions against mode serial's, relative
};

/// Arrays must be mode serial's bit for bit; a reduction's (or a prefix
/// sum's) bits depend on its chunks (a share of the budget makes smaller
/// ones), so those are compared to 1e-12 relative, the largest difference
/// reported.
void compare(outcome& r, const vec& got, const vec& ref, std::size_t rounded) {
  bool same = got.size() == ref.size();
  for (std::size_t i = 0; same && i < got.size(); ++i) {
    if (i < rounded)
      r.reduction_error = std::max(r.reduction_error, std::abs(got[i] - ref[i]) / std::max(1.0, std::abs(ref[i])));
    else
      same = got[i] == ref[i];
  }
  r.exact = r.exact.value_or(true) && same && r.reduction_error <= 1e-12;
}

/// Runs the workload, untimed, until no stage's placement calibrates (at
/// most eight runs: a kind of stage is measured twice on each side).
void calibrate(const dag_workload& w, const std::string& mode) {
  constexpr int most = 8;
  for (int run = 1; run <= most; ++run) {
    oa::clear_reports();
    (void)w.run(w.in);
    bool calibrating = false;
    for (const auto& r : oa::reports())
      calibrating = calibrating || r.placement_reason.find("calibrating") != std::string::npos;
    std::cerr << "mode " << mode << ": cost models calibrating, run " << run << (calibrating ? "" : ": calibrated")
              << '\n';
    if (!calibrating) return;
  }
  std::cerr << "mode " << mode << ": some stages still calibrate after " << most << " runs; timing goes on\n";
}

}  // namespace

const std::vector<std::string>& dag_modes() {
  static const std::vector<std::string> modes{"serial", "oa"};
  return modes;
}

bool run_dag(const dag_options& opt, json_sink* sink) {
  const std::size_t n = opt.elements;
  if (n < 8) throw std::invalid_argument("--elements: the DAG workloads need at least 8 elements");
  std::cerr << "generating the random inputs (seed " << opt.seed << ")\n";
  const dag_workload w = opt.workload == "dag-image"      ? image(n, opt.seed)
                         : opt.workload == "dag-ensemble" ? ensemble(n, opt.seed)
                                                          : union_of(n, opt.seed);
  std::vector<std::string> modes;
  for (const auto& m : dag_modes())
    if (opt.modes.empty() || std::find(opt.modes.begin(), opt.modes.end(), m) != opt.modes.end()) modes.push_back(m);

  std::vector<outcome> results;
  vec reference;
  for (const auto& mode : modes) {
    outcome r;
    r.mode = mode;
    r.device = opt.device;
    configure_oa_mode(opt, false);
    oa::config c = oa::current_config();
    c.serial_stages = mode == "serial";
    oa::set_config(c, opt.origin);
    (void)oa::current_device();  // made here: no run times its creation
    // By cost, the models first learn each stage on each side (their first
    // runs place stages to measure them), untimed: each mode's timed runs
    // are placed by calibrated models, whichever mode ran first.
    if (opt.placement == "cost") {
      try {
        calibrate(w, mode);
      } catch (const std::exception& e) {
        r.failure = e.what();
      }
    }
    for (int rep = first_run(opt); rep <= opt.repeat && !r.failure; ++rep) {
      announce_run(opt.workload, mode, rep, opt.repeat);
      try {
        oa::clear_reports();
        const auto t0 = std::chrono::steady_clock::now();
        const packer pack = w.run(w.in);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const vec got = pack();  // after the clock: packing for the comparison is not the workload's
        // Mode serial's first run is the reference; without it, nothing to compare.
        if (mode == "serial" && reference.empty()) reference = got;
        if (!reference.empty()) compare(r, got, reference, w.rounded);
        if (rep < 1) continue;  // a warm-up: checked, not timed
        if (s < r.seconds) {
          const auto reps = oa::reports();
          r.total = oa::total(reps);
          r.stages = reps.size();
          r.together = 0;
          for (const auto& st : reps)
            r.together += st.placement_reason.find("together with stages") != std::string::npos ? 1 : 0;
          if (!r.total.device.empty()) r.device = r.total.device;
        }
        r.seconds = std::min(r.seconds, s);
      } catch (const std::exception& e) {
        r.failure = e.what();
      }
    }
    results.push_back(std::move(r));
  }

  std::optional<double> serial;
  for (const auto& r : results)
    if (r.mode == "serial" && !r.failure) serial = r.seconds;
  const double data_bytes = w.data_bytes();
  std::cout << "\n" << opt.workload << ": " << w.describe << " (" << format_bytes(data_bytes) << ")\n";
  if (emulated_run(opt)) std::cout << "EMULATED DEVICE: host memory posing as device memory; these are not GPU timings\n";
  text_table table(
      {"mode", "device", "seconds", "stages", "together", "chunks", "moved", "vs serial", "arrays exact", "reductions"});
  for (const auto& r : results) {
    if (r.failure) {
      table.add_row({r.mode, r.device, "failed", "", "", "", "", "", "error (below)", ""});
      continue;
    }
    const auto& t = r.total;
    table.add_row({r.mode, r.device, format("%.4f", r.seconds), std::to_string(r.stages), std::to_string(r.together),
                   std::to_string(t.chunks), format_bytes(static_cast<double>(t.h2d_bytes + t.d2h_bytes)),
                   serial ? format("%.2fx", *serial / r.seconds) : std::string(),
                   r.exact ? (*r.exact ? "yes" : "NO") : "-", r.exact ? format("%.1e", r.reduction_error) : "-"});
  }
  table.print(std::cout);
  // What running stages together can gain where one device's link bounds
  // them: moving serial's copies, each direction still takes serial's busy
  // time in it, so no schedule of those copies beats the busier direction
  // (a mode that copies less, reading copies kept on the device, can).
  std::optional<double> ceiling;
  for (const auto& r : results) {
    const double busiest = std::max(r.total.h2d_seconds, r.total.d2h_seconds);
    const auto& by = r.total.chunks_by_device;
    const bool one_device = std::count_if(by.begin(), by.end(), [](const auto& d) { return d.first != "host"; }) <= 1;
    if (r.mode != "serial" || r.failure || busiest <= 0 || !one_device) continue;
    ceiling = r.seconds / busiest;
    std::cout << format("mode serial's copies kept the link busy %.4f s in, %.4f s out: with those copies, stages "
                        "together cannot take less than %.4f s (%.2fx serial)\n",
                        r.total.h2d_seconds, r.total.d2h_seconds, busiest, *ceiling);
  }
  std::cout << std::flush;

  bool ok = true;
  for (const auto& r : results) {
    const auto& t = r.total;
    const bool timed = !r.failure;
    if (sink) {
      nlohmann::json record = {{"workload", opt.workload},
                               {"mode", r.mode},
                               {"device", r.device},
                               {"requested_device", opt.device},
                               {"elements", n},
                               {"data_bytes", data_bytes},
                               {"device_memory_budget", opt.device_memory},
                               {"peak_device_bytes", t.peak_device_bytes},
                               {"stages", r.stages},
                               {"stages_together", r.together},
                               {"chunks", t.chunks},
                               {"h2d_bytes", t.h2d_bytes},
                               {"d2h_bytes", t.d2h_bytes},
                               {"seconds", timed ? nlohmann::json(r.seconds) : nlohmann::json(nullptr)},
                               {"error", r.failure ? nlohmann::json(*r.failure) : nlohmann::json(nullptr)},
                               {"exact", r.exact ? nlohmann::json(*r.exact) : nlohmann::json(nullptr)},
                               {"reduction_rel_error", r.exact ? nlohmann::json(r.reduction_error) : nlohmann::json(nullptr)},
                               {"speedup_vs_serial", serial && timed ? nlohmann::json(*serial / r.seconds)
                                                                     : nlohmann::json(nullptr)},
                               {"h2d_busy_seconds", r.total.h2d_seconds},
                               {"d2h_busy_seconds", r.total.d2h_seconds},
                               {"link_ceiling_vs_serial", ceiling ? nlohmann::json(*ceiling) : nlohmann::json(nullptr)},
                               {"threads", std::max(1u, std::thread::hardware_concurrency())},
                               {"link_gbps", opt.link_gbps},
                               {"seed", opt.seed},
                               {"repeat", opt.repeat},
                               {"emulated", emulated_run(opt)},
                               {"hostname", hostname()},
                               {"timestamp", utc_timestamp()},
                               {"oa_version", OA_VERSION}};
      add_device_fields(record, opt, t, true);
      sink->write(record);
    }
    if (r.failure) {
      std::cerr << "oa-bench: " << opt.workload << ", mode " << r.mode << " failed: " << *r.failure << '\n';
      ok = false;
      continue;
    }
    if (r.exact && !*r.exact) {
      std::cerr << "oa-bench: " << opt.workload << ", mode " << r.mode << ": results differ from mode serial's (arrays bit for bit, reductions past 1e-12)\n";
      ok = false;
    }
  }
  return ok;
}

}  // namespace oa_bench
