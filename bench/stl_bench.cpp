#include "stl_bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#if defined(OA_BENCH_HAS_TBB)
#include <execution>
#endif

#include "bench_table.hpp"
#if defined(OA_BENCH_HAS_THRUST)
#include "stl_thrust.hpp"
#endif

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

namespace oa_bench {

namespace {

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int> d(-100, 100);  // (a + b) c fits int32; sums, int64
    for (auto& x : v) x = static_cast<T>(d(g));
  } else {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (auto& x : v) x = static_cast<T>(d(g));
  }
  return v;
}

/// The accumulator of the chain: int64 for integers (no overflow), else T.
template <class T>
using acc_t = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;

/// |got - want| relative to max(|want|, 1).
double relative(double got, double want) { return std::abs(got - want) / std::max(1.0, std::abs(want)); }

/// A timed run of one mode: seconds, and the error against the reference
/// when verifying.
struct timed_run {
  double seconds = 0;
  std::optional<double> error;
};

/// Seconds of one run of `mode`: `standard()` (cpu), `standard(par)` (par),
/// or `through_oa()` (oa, sequential: the configuration says which).
template <class Standard, class ThroughOa>
double time_mode(const std::string& mode, Standard&& standard, ThroughOa&& through_oa) {
  const auto t0 = clock_type::now();
  if (mode == "cpu") standard();
#if defined(OA_BENCH_HAS_TBB)
  else if (mode == "par") standard(std::execution::par);
#endif
  else through_oa();
  return seconds_since(t0);
}

/// sum((a + b) * c) over three random arrays.
template <class T>
struct chain_workload {
  std::vector<T> a, b, c;
  std::optional<acc_t<T>> ref;

  chain_workload(std::size_t n, std::uint64_t seed, bool verify)
      : a(random_vector<T>(n, seed)), b(random_vector<T>(n, seed + 1)), c(random_vector<T>(n, seed + 2)) {
    if (verify) ref = standard(a, b, c);
  }
  std::string describe() const { return "sum((a + b) * c), three arrays of"; }
  double data_bytes() const { return 3.0 * static_cast<double>(a.size() * sizeof(T)); }

  /// With the standard algorithms, sequential or under `policy`: a + b is a
  /// temporary vector, as a program would write it.
  template <class... Policy>
  static acc_t<T> standard(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c,
                           Policy&&... policy) {
    std::vector<T> t(a.size());
    std::transform(policy..., a.begin(), a.end(), b.begin(), t.begin(), std::plus<>{});
    return std::transform_reduce(policy..., t.begin(), t.end(), c.begin(), acc_t<T>(0), std::plus<>{},
                                 std::multiplies<>{});
  }
  /// Through oa::stl. No handle holds a + b when the chain runs (the
  /// temporary handle is gone at the end of the first statement): it is
  /// never a host array, only a chunk at a time.
  static acc_t<T> through_oa(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c) {
    const oa::lazy<acc_t<T>> sum = oa::stl::inner_product(oa::stl::transform(a, b, std::plus<>{}), c, acc_t<T>(0));
    return sum.get();
  }

  timed_run run(const std::string& mode) const {
    acc_t<T> got{};
    timed_run r{time_mode(mode, [&](auto&&... policy) { got = standard(a, b, c, policy...); },
                          [&] { got = through_oa(a, b, c); }),
                std::nullopt};
    if (ref) r.error = relative(static_cast<double>(got), static_cast<double>(*ref));
    return r;
  }
};

/// The inclusive sum of one random array, into a new vector.
template <class T>
struct scan_workload {
  std::vector<T> a;
  std::vector<T> ref;

  scan_workload(std::size_t n, std::uint64_t seed, bool verify) : a(random_vector<T>(n, seed)) {
    if (verify) {
      ref.resize(n);
      std::inclusive_scan(a.begin(), a.end(), ref.begin());
    }
  }
  std::string describe() const { return "inclusive_scan (sum) of one array of"; }
  double data_bytes() const { return 2.0 * static_cast<double>(a.size() * sizeof(T)); }

  timed_run run(const std::string& mode) const {
    std::vector<T> out;
    oa::lazy<std::vector<T>> sums;
    timed_run r{time_mode(
                    mode,
                    [&](auto&&... policy) {
                      out.resize(a.size());
                      std::inclusive_scan(policy..., a.begin(), a.end(), out.begin());
                    },
                    [&] {
                      sums = oa::stl::inclusive_scan(a);
                      (void)sums.get();
                    }),
                std::nullopt};
    const std::vector<T>& got = sums.valid() ? sums.get() : out;
    if (!ref.empty()) {
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, relative(static_cast<double>(got[i]), static_cast<double>(ref[i])));
      r.error = got.size() == ref.size() ? worst : std::numeric_limits<double>::infinity();
    }
    return r;
  }
};

/// One random array sorted in place (a copy made before the clock starts).
template <class T>
struct sort_workload {
  std::vector<T> a;
  std::vector<T> ref;

  sort_workload(std::size_t n, std::uint64_t seed, bool verify) : a(random_vector<T>(n, seed)) {
    if constexpr (std::is_integral_v<T>) {
      // The full range of the type, not random_vector's small one.
      std::mt19937_64 g(seed);
      for (auto& x : a) x = static_cast<T>(g());
    }
    if (verify) {
      ref = a;
      std::sort(ref.begin(), ref.end());
    }
  }
  std::string describe() const { return "sort of one array of"; }
  double data_bytes() const { return static_cast<double>(a.size() * sizeof(T)); }

  timed_run run(const std::string& mode) const {
    std::vector<T> x = a;
    if (mode == "thrust") {
#if defined(OA_BENCH_HAS_THRUST)
      const auto t0 = clock_type::now();
      oa_bench::thrust_sort(x);
      timed_run r{seconds_since(t0), std::nullopt};
      if (!ref.empty()) r.error = x == ref ? 0.0 : std::numeric_limits<double>::infinity();
      return r;
#else
      throw std::runtime_error("this oa-bench was built without the CUDA toolkit (mode thrust)");
#endif
    }
    timed_run r{time_mode(
                    mode, [&](auto&&... policy) { std::sort(policy..., x.begin(), x.end()); },
                    [&] {
                      oa::stl::sort(x);
                      oa::evaluate();
                    }),
                std::nullopt};
    if (!ref.empty()) r.error = x == ref ? 0.0 : std::numeric_limits<double>::infinity();
    return r;
  }
};

template <class T, class Workload>
bool run_typed(const stl_options& opt, json_sink* sink) {
  const std::size_t n = opt.elements;
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> modes;
  for (const auto& m : stl_modes()) {
    if (opt.modes.empty() && m == "thrust") continue;  // a GPU's in-core ceiling: when asked for
    if (opt.modes.empty() || std::find(opt.modes.begin(), opt.modes.end(), m) != opt.modes.end()) modes.push_back(m);
  }

  std::cerr << "generating the random inputs: " << n << " " << opt.type << " per array (seed " << opt.seed << ")\n";
  const Workload w(n, opt.seed, opt.verify);

  std::vector<mode_outcome> results;
  for (const auto& mode : modes) {
    mode_outcome r;
    r.mode = mode;
    r.device = r.oa_mode() ? opt.device : mode == "thrust" ? "gpu" : "cpu";
    if (mode == "thrust" && opt.workload != "sort")
      r.failure = "mode thrust is the in-core ceiling of --workload sort (thrust::sort on the GPU)";
#if !defined(OA_BENCH_HAS_TBB)
    if (mode == "par") r.failure = "this oa-bench was built without oneTBB (the parallel standard algorithms)";
#endif
    if (r.oa_mode()) {
      configure_oa_mode(opt, mode == "sequential");
      (void)oa::current_device();  // made here: no run times its creation
    }
    for (int rep = first_run(opt); rep <= opt.repeat && !r.failure; ++rep) {
      announce_run(opt.workload, mode, rep, opt.repeat);
      try {
        oa::clear_reports();
        const timed_run t = w.run(mode);
        if (t.error) r.error = std::max(r.error.value_or(0.0), *t.error);
        if (rep < 1) continue;  // a warm-up: checked, not timed
        if (r.oa_mode() && t.seconds < r.seconds) {
          r.total = oa::total(oa::reports());
          if (!r.total.device.empty()) r.device = r.total.device;
        }
        r.seconds = std::min(r.seconds, t.seconds);
      } catch (const std::exception& e) {
        r.failure = e.what();
      }
    }
    results.push_back(std::move(r));
  }

  const std::optional<double> cpu_seconds = seconds_of(results, "cpu"), par_seconds = seconds_of(results, "par");
  const double data_bytes = w.data_bytes();
  std::cout << "\n" << opt.workload << ": " << w.describe() << " " << n << " " << opt.type << " ("
            << format_bytes(data_bytes) << "), " << threads << " hardware threads\n";
  if (emulated_run(opt)) std::cout << "EMULATED DEVICE: host memory posing as device memory; these are not GPU timings\n";
  text_table table({"mode", "device", "seconds", "chunks", "moved", "peak device", "vs cpu", "vs par", "rel_error"});
  const auto ratio = [](std::optional<double> base, double s) {
    return base ? format("%.2fx", *base / s) : std::string();
  };
  for (const auto& r : results) {
    if (r.failure) {
      table.add_row({r.mode, r.device, "failed", "", "", "", "", "", "error (below)"});
      continue;
    }
    const auto& t = r.total;
    table.add_row({r.mode, r.device, format("%.4f", r.seconds), r.oa_mode() ? std::to_string(t.chunks) : "",
                   r.oa_mode() ? format_bytes(static_cast<double>(t.h2d_bytes + t.d2h_bytes)) : "",
                   r.oa_mode() ? format_bytes(static_cast<double>(t.peak_device_bytes)) : "",
                   ratio(cpu_seconds, r.seconds), ratio(par_seconds, r.seconds),
                   r.error ? format("%.2e", *r.error) : "-"});
  }
  table.print(std::cout);
  std::cout << std::flush;

  const double tolerance = std::is_integral_v<T> ? 0.0 : std::is_same_v<T, float> ? 1e-4 : 1e-9;
  bool ok = true;
  for (const auto& r : results) {
    const auto& t = r.total;
    const auto or_null = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    const bool timed = !r.failure;
    if (sink) {
      nlohmann::json record = {{"workload", opt.workload},
                   {"mode", r.mode},
                   {"device", r.device},
                   {"requested_device", r.oa_mode() ? opt.device : r.device},
                   {"elements", n},
                   {"type", opt.type},
                   {"data_bytes", data_bytes},
                   {"device_memory_budget", r.oa_mode() ? opt.device_memory : 0},
                   {"peak_device_bytes", t.peak_device_bytes},
                   {"chunks", t.chunks},
                   {"streams", t.streams},
                   {"h2d_bytes", t.h2d_bytes},
                   {"d2h_bytes", t.d2h_bytes},
                   {"seconds", timed ? nlohmann::json(r.seconds) : nlohmann::json(nullptr)},
                   {"error", r.failure ? nlohmann::json(*r.failure) : nlohmann::json(nullptr)},
                   {"max_rel_error", or_null(r.error)},
                   {"speedup_vs_cpu", or_null(cpu_seconds && timed ? std::optional(*cpu_seconds / r.seconds)
                                                                    : std::nullopt)},
                   {"speedup_vs_par", or_null(par_seconds && timed ? std::optional(*par_seconds / r.seconds)
                                                                    : std::nullopt)},
                   {"threads", threads},
                   {"link_gbps", opt.link_gbps},
                   {"seed", opt.seed},
                   {"repeat", opt.repeat},
                   {"emulated", r.oa_mode() && emulated_run(opt)},
                   {"hostname", hostname()},
                   {"timestamp", utc_timestamp()},
                   {"oa_version", OA_VERSION}};
      add_device_fields(record, opt, t, r.oa_mode());
      sink->write(record);
    }
    if (r.failure) {
      std::cerr << "oa-bench: " << opt.workload << ", mode " << r.mode << " failed: " << *r.failure << '\n';
      if (!opt.modes.empty()) ok = false;
      continue;
    }
    if (r.error && !(*r.error <= tolerance)) {
      std::cerr << "oa-bench: " << opt.workload << ", mode " << r.mode << ": rel_error " << format("%.3e", *r.error)
                << " exceeds " << format("%.0e", tolerance) << " against the sequential standard algorithms\n";
      ok = false;
    }
  }
  return ok;
}

}  // namespace

const std::vector<std::string>& stl_modes() {
  static const std::vector<std::string> modes{"cpu", "par", "sequential", "oa", "thrust"};
  return modes;
}

namespace {
template <class T>
bool run_for_type(const stl_options& opt, json_sink* sink) {
  if (opt.workload == "scan") return run_typed<T, scan_workload<T>>(opt, sink);
  if (opt.workload == "sort") return run_typed<T, sort_workload<T>>(opt, sink);
  return run_typed<T, chain_workload<T>>(opt, sink);
}
}  // namespace

bool run_stl(const stl_options& opt, json_sink* sink) {
  if (opt.type == "double") return run_for_type<double>(opt, sink);
  if (opt.type == "float") return run_for_type<float>(opt, sink);
  if (opt.type == "int32") return run_for_type<std::int32_t>(opt, sink);
  if (opt.type == "int64") return run_for_type<std::int64_t>(opt, sink);
  throw std::invalid_argument("--type: '" + opt.type + "' is not int32, int64, float or double");
}

}  // namespace oa_bench
