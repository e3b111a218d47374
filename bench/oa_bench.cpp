// oa-bench: runs the paging workloads of WORKLOADS.md as plain Eigen (mode
// cpu) and through oa (modes oa, sequential and whole) side by side, on the
// same inputs, and reports time, chunks, bytes moved, overlap and errors.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <oa/annotations/eigen_array.hpp>
#include <oa/oa.hpp>
#include <oa/dist.hpp>
#if defined(OA_HAS_CUDA)
#include <oa/cuda/device.hpp>
#endif
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench_cli.hpp"
#include "bench_data.hpp"
#include "bench_json.hpp"
#include "dag_bench.hpp"
#include "dist_bench.hpp"
#include "gemm_bench.hpp"
#include "stl_bench.hpp"
#include "bench_table.hpp"
#include "workloads.hpp"

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

namespace {

using oa_bench::format;
using oa_bench::format_bytes;
using oa_bench::hostname;
using oa_bench::json_sink;
using oa_bench::workload_spec;
using array = Eigen::ArrayXd;
using lazy_array = oa::lazy<array>;
using oa_bench::clock_type;
using oa_bench::seconds_since;

constexpr double tolerance = 1e-9;

struct options : oa_bench::common_options {
  options() { modes = {"cpu", "sequential", "oa"}; }
  std::string workload;
  std::size_t elements = 0;
  std::string json;
  bool demo = false;
};

struct mode_result {
  std::string mode;
  std::string device;
  double seconds = std::numeric_limits<double>::infinity();
  oa::stage_report total;  // oa modes: the runtime's totals for the fastest repeat
  std::optional<double> error;
  std::size_t budget = 0;               // oa modes: the device budget the mode ran under
  std::size_t staged_bytes = 0;         // oa modes: bytes through the device's staging engine in that run
  std::optional<std::string> failure;   // whole: why the all-at-once run could not be made
};

/// Every mode in the order they run: cpu first, its result is the reference of --verify.
const std::vector<std::string>& all_modes() {
  static const std::vector<std::string> modes{"cpu", "sequential", "whole", "oa"};
  return modes;
}

bool is_oa_mode(const std::string& mode) { return mode != "cpu"; }

/// Calls workload `w` over arrays of type A (Eigen arrays or lazy handles).
/// Array outputs land in `out`; the scalar output (crime's sum) is returned.
template <class A>
auto call_workload(const workload_spec& w, const std::vector<A>& in, std::vector<A>& out) {
  decltype(oa_workloads::crime_index(in[0], in[0], in[0])) scalar{};
  out.assign(w.array_outputs, A{});
  if (w.name == "blackscholes")
    oa_workloads::blackscholes(in[0], in[1], in[2], in[3], in[4], out[0], out[1]);
  else if (w.name == "haversine")
    oa_workloads::haversine(in[0], in[1], out[0]);
  else
    scalar = oa_workloads::crime_index(in[0], in[1], in[2]);
  return scalar;
}

/// Worst error over all outputs; a scalar output is compared as a 1-element array.
double worst_error(const std::vector<const array*>& got, const std::vector<array>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, oa_bench::max_rel_error(*got.at(i), ref[i]));
  return worst;
}

/// One plain-Eigen run; its outputs go to `keep` when given (the reference of --verify).
double run_cpu_once(const workload_spec& w, const std::vector<array>& in, std::vector<array>* keep) {
  const auto t0 = clock_type::now();
  std::vector<array> out;
  const double scalar = call_workload<array>(w, in, out);
  const double seconds = seconds_since(t0);
  if (keep) {
    if (w.scalar_outputs) out.push_back(array::Constant(1, scalar));
    *keep = std::move(out);
  }
  return seconds;
}

/// The reference outputs of --verify when mode cpu is not run: the same
/// plain-Eigen code as mode cpu, on blocks of elements spread over every core
/// (element-wise workloads compute each element alone, so blocks give the
/// values of one whole run). A workload with a scalar output, a reduction
/// over all elements, runs whole on one thread.
std::vector<array> compute_reference(const workload_spec& w, const std::vector<array>& in) {
  std::vector<array> ref;
  const auto n = in.empty() ? Eigen::Index{0} : in.front().size();
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (w.scalar_outputs || threads == 1) {
    run_cpu_once(w, in, &ref);
    return ref;
  }
  constexpr Eigen::Index block = Eigen::Index{1} << 16;  // a multiple of every SIMD width
  ref.assign(w.array_outputs, array(n));
  std::atomic<Eigen::Index> next{0};
  std::vector<std::exception_ptr> errors(threads);
  auto work = [&](unsigned t) {
    try {
      std::vector<array> part_in(in.size()), part_out;
      for (Eigen::Index start; (start = next.fetch_add(block)) < n;) {
        const Eigen::Index len = std::min(block, n - start);
        for (std::size_t i = 0; i < in.size(); ++i) part_in[i] = in[i].segment(start, len);
        call_workload<array>(w, part_in, part_out);
        for (std::size_t k = 0; k < ref.size(); ++k) ref[k].segment(start, len) = part_out.at(k);
      }
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return ref;
}

/// One run through oa under the current configuration. The inputs are bound
/// with oa::ref (no copy); the clock stops once every output is on the host.
double run_oa_once(const workload_spec& w, std::vector<array>& in, const std::vector<array>* ref,
                   std::optional<double>& error) {
  std::vector<lazy_array> handles;
  for (auto& x : in) handles.push_back(oa::ref(x));
  const auto t0 = clock_type::now();
  std::vector<lazy_array> out;
  auto scalar = call_workload<lazy_array>(w, handles, out);
  std::vector<const array*> got;
  for (const auto& o : out) got.push_back(&o.get());
  const double sum = w.scalar_outputs ? scalar.get() : 0.0;
  const double seconds = seconds_since(t0);
  if (ref) {
    const array sum_array = array::Constant(1, sum);
    if (w.scalar_outputs) got.push_back(&sum_array);
    error = std::max(error.value_or(0.0), worst_error(got, *ref));
  }
  return seconds;
}

/// Inputs are generated once per process and shared by every mode and run.
std::vector<array>& inputs_for(const workload_spec& w, std::size_t n, std::uint64_t seed) {
  static std::map<std::tuple<std::string, std::size_t, std::uint64_t>, std::vector<array>> cache;
  auto key = std::make_tuple(std::string(w.name), n, seed);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::cerr << "generating " << w.inputs.size() << " random inputs of " << n << " elements (seed " << seed
              << ")\n";
    it = cache.emplace(key, oa_bench::make_inputs(w, n, seed)).first;
  }
  return it->second;
}

/// Configures the runtime for an oa mode. `whole_budget` is the raised budget of mode whole.
void configure(const options& opt, const std::string& mode, std::size_t whole_budget = 0) {
  oa::config c = oa::current_config();
  c.device = opt.device;
  c.devices = mode == "whole" ? std::string() : opt.devices;  // whole: all at once on one device
  c.spread = opt.spread;
  c.placement = opt.placement;
  c.device_memory = opt.device_memory;
  c.streams = opt.streams;
  c.link_gbps = opt.link_gbps;
  c.sequential = mode == "sequential" || mode == "whole";
  c.chunk_bytes = 0;
  oa::config_origin origin = opt.origin;
  if (mode == "whole") {
    c.device_memory = whole_budget;
    origin.set("device_memory", "mode whole's budget");
    // The planner sizes chunks for every stream of the pipeline even when
    // sequential; one stream lets a single chunk take the whole budget.
    c.streams = 1;
    // Each run copies all in and all out: no copy kept on the device for the
    // next repeat (nor its bytes taken from the budget the run was sized for).
    c.keep_copies = false;
  }
  oa::set_config(c, origin);
}

/// Device bytes per element the workload's stages need on the configured
/// device, from a run on a few thousand elements: the device's buffers
/// (temporaries included) exceed the data itself, so the data size alone
/// would not make mode whole a single chunk.
std::size_t device_bytes_per_element(const options& opt, const workload_spec& w) {
  constexpr std::size_t probe_elements = 4096;
  const oa::config saved = oa::current_config();
  oa::config c = saved;
  c.device = opt.device;
  c.device_memory = opt.device_memory;
  c.link_gbps = opt.link_gbps;
  c.streams = 1;
  c.sequential = true;
  c.chunk_bytes = 0;
  c.host_threshold = 0;  // the probe is small: keep it on the device anyway
  // Whole copies of the values take their bytes out of the budget apart
  // from the slots' buffers, which are all a report's bytes_per_unit counts:
  // without them every value is in the buffers.
  c.keep_copies = false;
  std::size_t per_element = 0;
  try {
    oa::set_config(c, opt.origin);
    std::vector<array> in = oa_bench::make_inputs(w, probe_elements, opt.seed);
    std::optional<double> unused;
    oa::clear_reports();
    run_oa_once(w, in, nullptr, unused);
    const std::string device = oa::current_device().name();
    for (const auto& s : oa::reports())
      if (s.device == device && s.units)
        per_element = std::max(per_element, (s.bytes_per_unit * s.units + probe_elements - 1) / probe_elements);
  } catch (...) {
    oa::clear_reports();
    oa::set_config(saved, opt.origin);
    throw;
  }
  oa::clear_reports();
  oa::set_config(saved, opt.origin);
  return per_element;
}

/// The budget a device takes when none is given: for a GPU, the memory it
/// reports usable.
std::size_t default_budget(const options& opt) {
  oa::config c = oa::current_config();
  c.device = opt.device;
  c.device_memory = 0;
  oa::set_config(c, opt.origin);
  return oa::current_device().memory_budget();
}

struct whole_plan {
  std::size_t budget = 0;
  bool capped = false;  // the budget is what the GPU reports usable, less than the data wants
};

/// Mode whole's budget: the requested one, raised to hold every stage's
/// device buffers for all `n` elements at once, plus 10% for allocation
/// granularity and the fixed bytes of reductions; on a GPU no more than it
/// reports usable. (The emulated device's memory is host memory: no cap.)
whole_plan plan_whole(const options& opt, const workload_spec& w, std::size_t n, std::size_t budget,
                      oa::device_kind kind) {
  const std::size_t per_element = std::max(device_bytes_per_element(opt, w), w.data_bytes(1));
  const std::size_t need = per_element * n;
  whole_plan p{std::max(budget, need + need / 10 + (std::size_t{1} << 20)), false};
  if (kind == oa::device_kind::cuda) {
    const std::size_t usable = std::max(budget, default_budget(opt));
    if (p.budget > usable) p = {usable, true};
  }
  return p;
}

/// Mode whole must have run each stage as one chunk; otherwise it is no baseline.
std::optional<std::string> whole_chunking_failure(const std::vector<oa::stage_report>& stages, const whole_plan& p) {
  for (const auto& s : stages)
    if (s.chunks > 1)
      return "the device did not hold all of it at once: " + std::to_string(s.chunks) + " chunks under a budget of " +
             std::to_string(p.budget) + " bytes on " + s.device +
             (p.capped ? " (all the device reports usable)" : "");
  return std::nullopt;
}


std::optional<double> overlap_efficiency(const mode_result& r) {
  if (!is_oa_mode(r.mode) || r.failure || r.seconds <= 0) return std::nullopt;
  return oa_bench::overlap_of(r.total, r.seconds);
}

nlohmann::json to_record(const options& opt, const workload_spec& w, const mode_result& r, std::size_t budget,
                         std::optional<double> cpu_seconds) {
  const auto& t = r.total;
  const auto overlap = overlap_efficiency(r);
  auto or_null = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  if (r.failure) cpu_seconds.reset();
  nlohmann::json record = {{"workload", w.name},
          {"mode", r.mode},
          {"device", r.device},
          {"requested_device", is_oa_mode(r.mode) ? opt.device : std::string("cpu")},
          {"elements", opt.elements},
          {"data_bytes", w.data_bytes(opt.elements)},
          {"device_memory_budget", r.budget ? r.budget : budget},
          {"peak_device_bytes", t.peak_device_bytes},
          {"chunks", t.chunks},
          {"streams", t.streams},
          {"h2d_bytes", t.h2d_bytes},
          {"d2h_bytes", t.d2h_bytes},
          {"h2d_seconds", t.h2d_seconds},
          {"compute_seconds", t.compute_seconds},
          {"d2h_seconds", t.d2h_seconds},
          {"fill_seconds", t.fill_seconds},
          {"drain_seconds", t.drain_seconds},
          {"prefault_seconds", t.prefault_seconds},
          {"host_reruns", t.host_reruns},
          {"seconds", r.failure ? nlohmann::json(nullptr) : nlohmann::json(r.seconds)},
          {"error", r.failure ? nlohmann::json(*r.failure) : nlohmann::json(nullptr)},
          {"max_rel_error", or_null(r.error)},
          {"overlap_efficiency", or_null(overlap)},
          {"speedup_vs_cpu",
           or_null(cpu_seconds ? std::optional<double>(*cpu_seconds / r.seconds) : std::nullopt)},
          {"link_gbps", opt.link_gbps},
          {"host_memory", opt.host_memory},
          {"staged_bytes", r.staged_bytes},
          {"seed", opt.seed},
          {"repeat", opt.repeat},
          {"emulated", is_oa_mode(r.mode) && oa_bench::emulated_run(opt)},
          {"hostname", hostname()},
          {"timestamp", oa_bench::utc_timestamp()},
          {"oa_version", OA_VERSION}};
  oa_bench::add_device_fields(record, opt, t, is_oa_mode(r.mode));
  return record;
}

void print_table(const std::vector<mode_result>& results, std::optional<double> cpu_seconds, bool verify) {
  oa_bench::text_table table({"mode", "device", "seconds", "chunks", "streams", "moved", "peak device",
                              "overlap", "vs cpu", "max_rel_error"});
  for (const auto& r : results) {
    if (r.failure) {
      table.add_row({r.mode, r.device, "failed", "", "", "", "", "", "", "error (below)"});
      continue;
    }
    const bool oa_mode = is_oa_mode(r.mode);
    const auto& t = r.total;
    const auto overlap = overlap_efficiency(r);
    std::string error = !verify ? "-" : oa_mode ? format("%.2e", r.error.value_or(0.0)) : "reference";
    table.add_row({r.mode, r.device, format(r.seconds >= 0.01 ? "%.3f" : "%.3g", r.seconds),
                   oa_mode ? std::to_string(t.chunks) : "", oa_mode ? std::to_string(t.streams) : "",
                   oa_mode ? format_bytes(static_cast<double>(t.h2d_bytes + t.d2h_bytes)) : "",
                   oa_mode ? format_bytes(static_cast<double>(t.peak_device_bytes)) : "",
                   overlap ? format("%.2f", *overlap) : "",
                   cpu_seconds
                       ? format(*cpu_seconds >= 0.1 * r.seconds ? "%.2fx" : "%.2gx", *cpu_seconds / r.seconds)
                       : "",
                   error});
  }
  table.print(std::cout);
  for (const auto& r : results)
    if (r.failure) std::cout << r.mode << ": failed: " << *r.failure << '\n';
}

/// Runs mode whole's repeats into `r`. Its failures (a device that cannot
/// hold the data, or will not take the budget) are the result, not an abort.
void run_whole(const options& opt, const workload_spec& w, std::vector<array>& in, const std::vector<array>* ref,
               std::size_t budget, oa::device_kind kind, mode_result& r) {
  if (!opt.devices.empty()) {
    r.failure = "mode whole runs on one device (--device), not on --devices: compare oa with it in a run of its own";
    return;
  }
  if (kind == oa::device_kind::host) {
    r.failure = "mode whole needs a device with its own memory (emulated or cuda): the host device plans "
                "cache-sized chunks whatever the budget";
    return;
  }
  try {
    const whole_plan plan = plan_whole(opt, w, opt.elements, budget, kind);
    r.budget = plan.budget;
    configure(opt, "whole", r.budget);
    (void)oa::current_device();
    (void)oa::host_device();
    for (int rep = oa_bench::first_run(opt); rep <= opt.repeat; ++rep) {
      oa_bench::announce_run(std::string(w.name) + ", " + std::to_string(opt.elements) + " elements",
                             "whole, device " + opt.device + ", budget " + std::to_string(r.budget) + " bytes", rep,
                             opt.repeat);
      oa::clear_reports();
      const double s = run_oa_once(w, in, ref, r.error);
      const auto stages = oa::reports();
      r.failure = whole_chunking_failure(stages, plan);
      if (r.failure) return;
      if (rep >= 1 && s < r.seconds) {  // (a warm-up: checked, not timed)
        r.seconds = s;
        r.total = oa::total(stages);
        if (!r.total.device.empty()) r.device = r.total.device;
      }
    }
  } catch (const std::exception& e) {
    r.failure = e.what();
  }
}

/// Runs every mode of `opt` on one workload and prints its table. Returns
/// false when a verified error exceeds the tolerance or mode whole failed.
bool run_benchmark(const options& opt, json_sink* sink) {
  const workload_spec& w = oa_bench::find_workload(opt.workload);
  const std::size_t n = opt.elements;

  std::vector<std::string> modes;
  for (const auto& m : all_modes())
    if (std::find(opt.modes.begin(), opt.modes.end(), m) != opt.modes.end()) modes.push_back(m);
  const bool any_oa = std::any_of(modes.begin(), modes.end(), is_oa_mode);

  // Creating the device first makes a device that cannot run fail before any timing.
  std::size_t budget = 0;
  std::string device_name;
  oa::device_kind kind = oa::device_kind::host;
  bool host_device = false;
  if (any_oa) {
    configure(opt, "oa");
    budget = oa::current_device().memory_budget();
    device_name = oa::current_device().name();
    if (device_name != opt.device) device_name += " (" + opt.device + ")";
    kind = oa::current_device().kind();
    host_device = kind == oa::device_kind::host;
    if (opt.device_memory && host_device)
      std::cerr << "note: the host device plans chunks for its caches and ignores --device-memory\n";
    if (opt.link_gbps > 0 && opt.device != "emulated")
      std::cerr << "note: --link-gbps applies to the emulated device only\n";
  }

  std::vector<array>& in = inputs_for(w, n, opt.seed);
  std::vector<array> ref;
  const bool cpu_listed = modes.front() == "cpu";
  if (opt.verify && !cpu_listed) {
    // Mode cpu's first run is the reference when it is listed; otherwise
    // the reference is computed once here, on every core.
    std::cerr << "computing the cpu reference for --verify (not listed)" << std::endl;
    const auto t0 = clock_type::now();
    ref = compute_reference(w, in);
    std::cerr << format("cpu reference computed in %.2f s\n", seconds_since(t0));
  }

  std::vector<mode_result> results;
  for (const auto& mode : modes) {
    mode_result r;
    r.mode = mode;
    r.device = is_oa_mode(mode) ? opt.device : "cpu";
    if (mode == "whole") {
      run_whole(opt, w, in, opt.verify ? &ref : nullptr, budget, kind, r);
      results.push_back(std::move(r));
      continue;
    }
    if (is_oa_mode(mode)) {
      r.budget = budget;
      configure(opt, mode);
      // Devices (and their threads) are made here, so that no run times their creation.
      (void)oa::current_device();
      (void)oa::host_device();
    }
    for (int rep = oa_bench::first_run(opt); rep <= opt.repeat; ++rep) {
      oa_bench::announce_run(std::string(w.name) + ", " + std::to_string(n) + " elements", mode + ", " +
                             (is_oa_mode(mode) ? oa_bench::devices_text(opt) : std::string("device cpu")),
                             rep, opt.repeat);
      const bool timed = rep >= 1;  // else a warm-up: checked, not timed
      if (!is_oa_mode(mode)) {
        // The first run's outputs are the reference; later ones are dropped at once.
        const bool keep = opt.verify && ref.empty();
        const double s = run_cpu_once(w, in, keep ? &ref : nullptr);
        if (timed) r.seconds = std::min(r.seconds, s);
        if (opt.verify) r.error = 0.0;
        continue;
      }
      oa::clear_reports();
      const std::size_t staged_before = oa::current_device().staged_bytes();
      const double s = run_oa_once(w, in, opt.verify ? &ref : nullptr, r.error);
      if (timed && s < r.seconds) {
        r.seconds = s;
        r.staged_bytes = oa::current_device().staged_bytes() - staged_before;
        r.total = oa::total(oa::reports());
        if (!r.total.device.empty()) r.device = r.total.device;
      }
    }
    results.push_back(std::move(r));
  }

  std::optional<double> cpu_seconds;
  if (cpu_listed) cpu_seconds = results.front().seconds;

  const std::size_t data = w.data_bytes(n);
  std::cout << '\n'
            << w.name << ": " << n << " elements, data " << format_bytes(static_cast<double>(data)) << " ("
            << data << " bytes, inputs + outputs)";
  if (any_oa) {
    if (opt.devices.empty())
      std::cout << ", device " << device_name << ", budget " << format_bytes(static_cast<double>(budget));
    else
      std::cout << ", devices " << opt.devices << ", the first's budget " << format_bytes(static_cast<double>(budget));
    if (host_device) std::cout << " (a cache-sized planning target, not a limit)";
    const double ratio = static_cast<double>(data) / static_cast<double>(std::max<std::size_t>(budget, 1));
    std::cout << format(ratio >= 0.1 ? ": data = %.1fx budget" : ": data = %.2gx budget", ratio);
    if (opt.device == "emulated")
      std::cout << (opt.link_gbps > 0 ? format(", link %g GB/s per direction", opt.link_gbps)
                                      : std::string(", link unthrottled"));
  }
  std::cout << '\n';
  if (any_oa && oa_bench::emulated_run(opt))
    std::cout << "EMULATED DEVICE: host memory posing as device memory; these are not GPU timings\n";
  print_table(results, cpu_seconds, opt.verify);
  std::cout << std::flush;

  bool ok = true;
  for (const auto& r : results) {
    if (sink) sink->write(to_record(opt, w, r, budget, cpu_seconds));
    if (r.failure) {
      std::cerr << "oa-bench: " << w.name << ", mode " << r.mode << " failed: " << *r.failure << '\n';
      ok = false;
      continue;
    }
    if (r.error && !(*r.error <= tolerance)) {
      std::cerr << "oa-bench: " << w.name << ", mode " << r.mode << ": max_rel_error "
                << format("%.3e", *r.error) << " exceeds " << format("%.0e", tolerance)
                << " against the cpu result\n";
      ok = false;
    }
  }
  return ok;
}

/// The README's walk-through: the host device, then paging on the emulated device.
/// Whether a GPU can run oa here, and why not.
bool gpu_usable(std::string& why) {
#if defined(OA_HAS_CUDA)
  return oa::cuda::usable_devices(&why) > 0;
#else
  why = "oa was built without the CUDA toolkit";
  return false;
#endif
}

/// One section of the demo: both workloads on one device, side by side.
bool demo_section(options& opt, const char* device, std::size_t budget, double link_gbps,
                  std::vector<std::string> modes, json_sink* sink) {
  opt.device = device;
  opt.device_memory = budget;
  opt.link_gbps = link_gbps;
  for (const char* key : {"device", "device_memory", "link_gbps"}) opt.origin.set(key, "--demo");
  opt.modes = std::move(modes);
  bool ok = true;
  for (const char* w : {"blackscholes", "haversine"}) {
    opt.workload = w;
    ok = run_benchmark(opt, sink) && ok;
  }
  return ok;
}

bool run_demo(options opt, json_sink* sink) {
  const auto t0 = clock_type::now();
  opt.elements = std::size_t{1} << 24;
  opt.verify = true;
  bool ok = true;
  const char* pipeline_text =
      "sequential copies each chunk in, computes it and copies it out before the next; oa\n"
      "overlaps the three on several streams. overlap = busiest phase / wall time.\n";

  std::string why;
  if (gpu_usable(why)) {
    // Black-Scholes at 2^26 elements is 3.5 GiB of data: 7x a 512 MiB budget.
    std::cout << "oa-bench demo (oa " << OA_VERSION << "): paging on the GPU\n"
              << "\n== paging on the GPU ==\n"
                 "The device budget is capped at 512 MiB and the data is several times larger, so oa pages\n"
                 "it through in chunks.\n"
              << pipeline_text;
    opt.elements = std::size_t{1} << 26;
    ok = demo_section(opt, "cuda", std::size_t{512} << 20, 0, {"cpu", "sequential", "oa"}, sink);
  } else {
    std::cout << "oa-bench demo (oa " << OA_VERSION << "): no usable GPU (" << why
              << "), so the demo runs on the host device, then pages through the emulated device.\n"
              << "\n== 1. host device (the CPU path) ==\n"
                 "cpu is the plain Eigen program, one statement per op. oa runs the same source: it records the\n"
                 "calls, fuses them into one stage and runs it chunk by chunk, cache-sized, on every core.\n";
    ok = demo_section(opt, "host", 0, 0, {"cpu", "oa"}, sink);
    std::cout << "\n== 2. paging on the EMULATED device (an emulation, not a GPU) ==\n"
                 "The emulated device is host memory capped at 64 MiB behind a link throttled to 4 GB/s per\n"
                 "direction. The data is several times the budget, so oa pages it through in chunks.\n"
              << pipeline_text;
    ok = demo_section(opt, "emulated", std::size_t{64} << 20, 4, {"cpu", "sequential", "oa"}, sink) && ok;
  }
  std::cout << format("\ndemo finished in %.1f s%s\n", seconds_since(t0),
                      ok ? "; every oa result matches the cpu result within 1e-9" : "; VERIFICATION FAILED");
  return ok;
}

/// CLI11 transform: accepts an element count in any form parse_count knows.
CLI::Validator count_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const auto v = oa_bench::parse_count(s);
        if (!v) return "'" + s + "' is not an element count from 1 to 2^64 - 1 (16777216, 2^24, 16Mi or 16M)";
        s = std::to_string(*v);
        return {};
      },
      "N|2^K|16Mi", "COUNT");
}

/// Refuses sizes whose data this machine cannot hold (exit status 2), before
/// anything is allocated.
void check_data_sizes(const options& opt, const oa_bench::gemm_options& gemm, const std::string& type, bool is_gemm,
                      bool is_stl) {
  if (opt.demo) return;
  const std::size_t element = type == "float" || type == "int32" ? 4 : 8;
  if (is_gemm) {
    std::size_t squared = 0;
    if (__builtin_mul_overflow(gemm.n, gemm.n, &squared))
      throw std::length_error("--n: " + std::to_string(gemm.n) + " x " + std::to_string(gemm.n) +
                             " matrices do not fit in a size_t: too large");
    oa_bench::check_data_size("--n", squared, 3 * element, "coefficients (A, B and C)");
  } else if (is_stl) {
    oa_bench::check_data_size("--elements", opt.elements, 2 * element, "elements (input and output)");
  } else if (opt.workload.rfind("dag-", 0) == 0) {
    // At most (dag-ensemble) two inputs, a sorted copy and a prefix sum of n.
    oa_bench::check_data_size("--elements", opt.elements, 4 * element, "elements (inputs and results)");
  } else {
    const workload_spec& w = oa_bench::find_workload(opt.workload);
    oa_bench::check_data_size("--elements", opt.elements, w.data_bytes(1), "elements (every input and output)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  std::string device_memory_text;  // read by oa::parse_bytes with the other settings: one line, status 2
  CLI::App app{
      "oa-bench: the paging workloads as plain Eigen (cpu) and through oa (oa, sequential, whole), side by "
      "side.",
      "oa-bench"};
  app.add_option("--workload", opt.workload, "workload to run")
      ->check(CLI::IsMember({"blackscholes", "haversine", "crime", "gemm", "transform_reduce", "scan", "sort",
                             "dag-image", "dag-ensemble", "dag-union"}));
  oa_bench::gemm_options gemm;
  app.add_option("--n", gemm.n, "gemm: the matrices are n x n (A, B and C)")->check(oa_bench::whole_number(1));
  std::string type = "double";
  app.add_option("--type", type, "gemm, transform_reduce, scan and sort: the element type (gemm: double or float)")
      ->check(CLI::IsMember({"double", "float", "int32", "int64"}))
      ->capture_default_str();
  app.add_option("--elements", opt.elements,
                 "elements per array: 16777216, 2^24, 16Mi (binary) or 16M (decimal)")
      ->transform(count_validator());
  app.add_option("--device", opt.device,
                 "device of modes oa, sequential and whole: auto (the best this build has), host, emulated or "
                 "cuda; overrides OA_DEVICE (default: OA_DEVICE, else auto)");
  app.add_option("--devices", opt.devices,
                 "several devices for modes oa and sequential, comma-separated specs kind[:key=value]... "
                 "(emulated:memory=32MiB:link_gbps=2,emulated:link_gbps=8 or cuda:0,cuda:1); a stage's chunks are "
                 "shared by them; overrides OA_DEVICES (default: OA_DEVICES, else one device: --device)");
  app.add_option("--spread", opt.spread,
                 "how several devices share a stage's chunks: balanced (by the rate each shows) or even (chunk i "
                 "to device i mod n); overrides OA_SPREAD")
      ->check(CLI::IsMember({"balanced", "even"}));
  app.add_option("--placement", opt.placement,
                 "threshold (OA_HOST_THRESHOLD decides host or device) or cost (each stage where its models "
                 "predict it finishes first); overrides OA_PLACEMENT")
      ->check(CLI::IsMember({"threshold", "cost"}));
  app.add_option(
         "--device-memory", device_memory_text,
         "device memory budget in bytes, suffixes allowed (64MiB, 1.5GiB, 2GB); 0 = the device's default; "
         "overrides OA_DEVICE_MEMORY (default: OA_DEVICE_MEMORY, else 0)");
  app.add_option(
         "--mode", opt.modes,
         "comma-separated modes, run side by side in the order cpu, sequential, whole, oa: cpu (plain Eigen), "
         "oa (pipelined), sequential (same chunks, one stream, no overlap), whole (all at once: the budget "
         "raised to hold all the data, one chunk copied in, computed, copied out). gemm: cpu (Eigen, one "
         "thread), cpu-openmp (Eigen, every core), sequential, oa, and on a GPU cublas (in core, the product "
         "alone: the ceiling), cublasxt and nvblas (Eigen with EIGEN_USE_BLAS over NVBLAS; its CPU BLAS from "
         "OA_BENCH_CPU_BLAS). transform_reduce, scan, sort: cpu (the standard algorithm), par (std::execution::par "
         "on oneTBB), sequential, oa, and for sort thrust (thrust::sort of the data in GPU memory, copies "
         "included: the in-core ceiling; only when asked for). dag-image, dag-ensemble, dag-union: serial (one "
         "stage at a time, OA_SERIAL_STAGES) and oa (independent stages together on the device's streams) "
         "(default: every one this machine runs)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          {"oa", "cpu", "sequential", "whole", "cpu-openmp", "cublas", "cublasxt", "nvblas", "par", "thrust",
           "serial"}))
      ->capture_default_str();
  app.add_option("--streams", opt.streams,
                 "streams of mode oa, 1-64; 0 = the device's default (whole uses 1); overrides OA_STREAMS "
                 "(default: OA_STREAMS, else 0)");
  app.add_option("--link-gbps", opt.link_gbps,
                 "emulated link bandwidth in GB/s (1e9 bytes/s) per direction; 0 = unthrottled (emulated "
                 "device only); overrides OA_LINK_GBPS (default: OA_LINK_GBPS, else 0)");
  app.add_option("--host-memory", opt.host_memory,
                 "where the workload's arrays (inputs and results) live: pageable (plain memory: copies go "
                 "through the device's pinned staging) or pinned (oa's pinned pool: copied directly)")
      ->check(CLI::IsMember({"pageable", "pinned"}))
      ->capture_default_str();
  app.add_option("--seed", opt.seed, "seed of the random inputs (std::mt19937_64), 0 to 2^64-1")
      ->check(oa_bench::whole_number())
      ->capture_default_str();
  bool per_rank = false;
  app.add_flag("--per-rank", per_rank,
               "under an MPI launcher: --elements is each rank's block, not the total cut over the ranks");
  app.add_flag("--verify", opt.verify,
               "compare every oa/sequential/whole output with the cpu result; exit 1 past 1e-9");
  app.add_option("--json", opt.json, "append one JSON object per (run, mode) to FILE (JSON Lines)");
  app.add_option("--repeat", opt.repeat, "runs per mode; the fastest is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--warmup", opt.warmup,
                 "untimed runs of each mode before its timed ones (default: 1 with --repeat 1, else 0), so that "
                 "the process's one-off costs are not the first mode's")
      ->check(CLI::Range(0, 100));
  app.add_flag("--demo", opt.demo,
               "the walk-through: host device, then paging on the emulated device (honours --seed, --repeat, "
               "--streams, --json; sets the rest)");
  app.footer(
      "Table columns: seconds = wall time of the workload call up to every output on the host (best of "
      "--repeat);\n"
      "moved = bytes copied host to device plus device to host; overlap = max(copy-in, compute, copy-out "
      "busy\n"
      "seconds) / seconds; vs cpu = cpu seconds / seconds; max_rel_error = max |x - ref| / max(|ref|, "
      "1)\n"
      "against the cpu result (crime: of the sum). A whole run the device cannot hold at once is listed as "
      "failed\n"
      "with oa's message. --device, --device-memory, --streams and --link-gbps default to the configuration\n"
      "(OA_DEVICE, OA_DEVICE_MEMORY, OA_STREAMS, OA_LINK_GBPS, or OA_CONFIG's file) and win over it.\n"
      "Exit status: 0 ok, 1 a verified error above 1e-9 or a failed whole run, 2 a configuration error (a bad\n"
      "OA_* value or option, --device cuda without a usable GPU) or another run that cannot be made, CLI11's\n"
      "codes for options it cannot read.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return oa_bench::usage_exit(app, e);
  }

  const bool is_gemm = opt.workload == "gemm", is_stl = opt.workload == "transform_reduce" || opt.workload == "scan" || opt.workload == "sort";
  const bool is_dag = opt.workload.rfind("dag-", 0) == 0;
  if (is_gemm && gemm.n == 0) return oa_bench::usage_exit(app, CLI::RequiredError("--n (the gemm workload's matrix size)"));
  if (!opt.demo && !is_gemm && (opt.workload.empty() || opt.elements == 0))
    return oa_bench::usage_exit(app, CLI::RequiredError("--workload and --elements (or --demo)"));
  if (is_gemm && type != "double" && type != "float")
    return oa_bench::usage_exit(app, CLI::ValidationError("--type", "gemm takes double or float, not '" + type + "'"));
  if (app.count("--type") > 0 && !is_gemm && !is_stl)
    return oa_bench::usage_exit(app, CLI::ValidationError("--type", "workload " + opt.workload + " is double only"));
  gemm.type = type;
  const std::vector<std::string>& valid = is_gemm  ? oa_bench::gemm_modes()
                                          : is_stl ? oa_bench::stl_modes()
                                          : is_dag ? oa_bench::dag_modes()
                                                   : all_modes();
  if (app.count("--mode") > 0)
    for (const auto& m : opt.modes)
      if (std::find(valid.begin(), valid.end(), m) == valid.end())
        return oa_bench::usage_exit(app, CLI::ValidationError("--mode", "'" + m + "' is not a mode of workload " +
                                                           (opt.workload.empty() ? "--demo" : opt.workload)));

  // Pinned: every Eigen array of 1 MiB or more from here on (inputs, and the
  // results the engine makes) comes from oa's pinned pool.
  if (opt.host_memory == "pinned") oa::eigen_hooks::enable_pinned_storage(std::size_t{1} << 20);

  try {
    // The configuration's values are the defaults; options given win, and
    // are checked as every other source is; a variable an option replaces is
    // not read at all.
    std::vector<std::string_view> replaced;
    for (const auto& [option, key] : {std::pair<const char*, std::string_view>{"--device", "device"},
                                      {"--devices", "devices"},
                                      {"--spread", "spread"},
                                      {"--placement", "placement"},
                                      {"--device-memory", "device_memory"},
                                      {"--streams", "streams"},
                                      {"--link-gbps", "link_gbps"}})
      if (app.count(option) > 0) replaced.push_back(key);
    oa::config c = oa::config::read_environment(&opt.origin, replaced);
    const auto take = [&](const char* option, const char* key, auto& option_value, auto& config_value) {
      if (app.count(option) > 0) {
        config_value = option_value;
        opt.origin.set(key, option);
      } else {
        option_value = config_value;
      }
    };
    take("--device", "device", opt.device, c.device);
    take("--devices", "devices", opt.devices, c.devices);
    take("--spread", "spread", opt.spread, c.spread);
    take("--placement", "placement", opt.placement, c.placement);
    if (app.count("--device-memory") > 0) opt.device_memory = oa::parse_bytes(device_memory_text, "--device-memory");
    take("--device-memory", "device_memory", opt.device_memory, c.device_memory);
    take("--streams", "streams", opt.streams, c.streams);
    take("--link-gbps", "link_gbps", opt.link_gbps, c.link_gbps);
    oa::set_config(c, opt.origin);  // validates; the runtime then never reads the environment itself
    check_data_sizes(opt, gemm, type, is_gemm, is_stl);

    // Under mpirun (or srun): the workload on distributed values, over every
    // rank; rank 0 prints and writes the records.
    if (oa_bench::under_mpi_launcher()) {
      oa_bench::dist_options dist;
      static_cast<oa_bench::common_options&>(dist) = opt;
      dist.modes.clear();
      if (app.count("--mode") > 0) dist.modes = opt.modes;
      dist.workload = opt.workload;
      dist.elements = is_gemm ? gemm.n : opt.elements;
      dist.per_rank = per_rank;
      dist.type = type;
      std::optional<json_sink> rank0_sink;
      if (!opt.json.empty() && oa::dist::world().rank() == 0) rank0_sink.emplace(opt.json);
      return oa_bench::run_dist(dist, rank0_sink ? &*rank0_sink : nullptr) ? 0 : 1;
    }
    if (per_rank) throw std::invalid_argument("--per-rank: only under an MPI launcher (mpirun -np N oa-bench ...)");
    std::optional<json_sink> sink;
    if (!opt.json.empty()) sink.emplace(opt.json);
    // A workload family's options: the common ones, its modes only when given.
    const auto with_common = [&](auto& o) {
      static_cast<oa_bench::common_options&>(o) = opt;
      o.modes.clear();
      if (app.count("--mode") > 0) o.modes = opt.modes;
    };
    if (is_gemm) {
      with_common(gemm);
      return oa_bench::run_gemm(gemm, sink ? &*sink : nullptr) ? 0 : 1;
    }
    if (is_dag) {
      oa_bench::dag_options dag;
      with_common(dag);
      dag.workload = opt.workload;
      dag.elements = opt.elements;
      return oa_bench::run_dag(dag, sink ? &*sink : nullptr) ? 0 : 1;
    }
    if (is_stl) {
      oa_bench::stl_options stl;
      with_common(stl);
      stl.workload = opt.workload;
      stl.elements = opt.elements;
      stl.type = type;
      return oa_bench::run_stl(stl, sink ? &*sink : nullptr) ? 0 : 1;
    }
    const bool ok =
        opt.demo ? run_demo(opt, sink ? &*sink : nullptr) : run_benchmark(opt, sink ? &*sink : nullptr);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << "oa-bench: " << e.what() << '\n';
    return 2;
  }
}
