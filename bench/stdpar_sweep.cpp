// oa-stdpar-sweep: from which size oa_offload(<target> STDPAR) pays. For
// one standard parallel algorithm call of each kind (OA_STDPAR_MIN's
// families) at growing sizes, times the standard library's parallel
// algorithm and oa's engine on the same inputs, best of --repeat runs with
// the two interleaved (both see the same machine state, turbo and caches
// included), and suggests each family's threshold: the smallest size
// measured from which the engine is at least as fast at every larger one.
//
//   sort         std::sort(par, v, v + n) of random values (reset before
//                each run);
//   elementwise  std::transform(par, a, a + n, b, out, std::plus<>{});
//   reduction    std::transform_reduce(par, a, a + n, b, T{}): a dot product;
//   scan         std::inclusive_scan(par, a, a + n, out).
//
// Built with oa_offload(... STDPAR), as the programs it tunes are: both
// timings are the same unmodified call through the same overloads, one
// runtime's OA_STDPAR_MIN keeping every call with the standard library, the
// other's sending every one to the engine. The engine's device is the
// configuration's (OA_DEVICE, OA_DEVICE_MEMORY, ...).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <execution>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "bench_cli.hpp"
#include "bench_json.hpp"
#include "bench_sweep.hpp"
#include "bench_table.hpp"
#include "oa/oa.hpp"

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

#if !defined(OA_OFFLOAD_STDPAR)
#error "oa-stdpar-sweep is built with oa_offload(... STDPAR)"
#endif

namespace {

using oa_bench::format;

constexpr std::uint64_t max_elements = std::uint64_t{1} << 28;
constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();

struct options {
  std::string family = "all";
  std::vector<std::uint64_t> sizes;  // empty: 2^12 to 2^26
  std::string type = "double";
  int repeat = 5;
  std::string json;
};

std::vector<std::uint64_t> default_sizes() {
  std::vector<std::uint64_t> sizes;
  for (int k = 12; k <= 26; ++k) sizes.push_back(std::uint64_t{1} << k);
  return sizes;
}

/// Values for the sorts: spread over the type's range (floating point:
/// [-1, 1]), few repeated.
template <class T>
std::vector<T> spread(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<T> d(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    for (auto& x : v) x = d(rng);
  } else {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

/// Whole values from -2 to 2 for the arithmetic: every sum and product of
/// up to 2^28 of them fits an int32, and floating-point sums stay exact in
/// any order while their partial sums stay below 2^24 (random signs keep
/// them far below), so both ways must agree.
template <class T>
std::vector<T> small(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

/// The largest difference of two results relative to the reference's
/// largest magnitude (at least 1).
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<T>& want) {
  double worst = 0, scale = 1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

template <class T>
double tolerance() {
  return std::is_integral_v<T> ? 0.0 : sizeof(T) == 8 ? 1e-12 : 1e-5;
}

/// A call's arrays: its inputs and the output it writes (a sort: its input,
/// and the range it sorts; a reduction: one element).
template <class T>
struct operands {
  std::vector<T> a, b, out;
};

/// Each family's representative call, as a program writes it.
template <class T>
struct family_call {
  const char* family;
  const char* algorithm;  // as the report names it
  const char* shown;      // as the table's title shows it
  std::size_t arrays;     // of n elements, read or written (the table's data)
  operands<T> (*make)(std::size_t n, std::mt19937_64& rng);
  void (*reset)(operands<T>&);  // before each run, not timed; may be null
  void (*run)(operands<T>&);
};

template <class T>
const family_call<T> family_calls[] = {
    {"sort", "std::sort", "std::sort(par, v, v + n) of random values", 1,
     [](std::size_t n, std::mt19937_64& rng) {
       return operands<T>{spread<T>(n, rng), {}, std::vector<T>(n)};
     },
     [](operands<T>& o) { std::copy(o.a.begin(), o.a.end(), o.out.begin()); },
     [](operands<T>& o) { std::sort(std::execution::par, o.out.data(), o.out.data() + o.out.size()); }},
    {"elementwise", "std::transform (binary)", "std::transform(par, a, a + n, b, out, std::plus<>{})", 3,
     [](std::size_t n, std::mt19937_64& rng) {
       return operands<T>{small<T>(n, rng), small<T>(n, rng), std::vector<T>(n)};
     },
     nullptr,
     [](operands<T>& o) {
       std::transform(std::execution::par, o.a.data(), o.a.data() + o.a.size(), o.b.data(), o.out.data(),
                      std::plus<>{});
     }},
    {"reduction", "std::transform_reduce", "std::transform_reduce(par, a, a + n, b, T{}): a dot product", 2,
     [](std::size_t n, std::mt19937_64& rng) {
       return operands<T>{small<T>(n, rng), small<T>(n, rng), std::vector<T>(1)};
     },
     nullptr,
     [](operands<T>& o) {
       o.out[0] =
           std::transform_reduce(std::execution::par, o.a.data(), o.a.data() + o.a.size(), o.b.data(), T{});
     }},
    {"scan", "std::inclusive_scan", "std::inclusive_scan(par, a, a + n, out)", 2,
     [](std::size_t n, std::mt19937_64& rng) {
       return operands<T>{small<T>(n, rng), {}, std::vector<T>(n)};
     },
     nullptr,
     [](operands<T>& o) {
       std::inclusive_scan(std::execution::par, o.a.data(), o.a.data() + o.a.size(), o.out.data());
     }},
};

struct measurement {
  std::uint64_t n = 0;
  double par_seconds = std::numeric_limits<double>::infinity();
  double oa_seconds = std::numeric_limits<double>::infinity();
  double speedup() const { return par_seconds / oa_seconds; }
};

/// Times a call under the default runtime (its OA_STDPAR_MIN keeps every
/// call with the standard library) or under `engine` (every call to the
/// engine), and checks that each ran where it was meant to: a call the
/// engine declined or failed would time the library twice.
template <class T>
class call_timer {
 public:
  call_timer(const family_call<T>& call, oa::runtime& engine, std::size_t n, std::mt19937_64& rng)
      : call_(call),
        engine_(engine),
        what_(format("%s of %zu elements", call.algorithm, n)),
        data_(call.make(n, rng)) {}

  double library() {
    reset();
    oa::clear_reports();
    const auto t0 = oa_bench::clock_type::now();
    call_.run(data_);
    const double s = oa_bench::seconds_since(t0);
    if (!oa::reports().empty())
      throw std::logic_error(what_ + ", meant for the standard library, ran through the engine");
    return s;
  }

  double engine() {
    reset();
    const double s =
        oa_bench::time_through_engine(engine_, call_.algorithm, what_, [&] { call_.run(data_); });
    if (engine_.reports().empty()) throw std::runtime_error(what_ + " ran no stage through the engine");
    return s;
  }

  const std::vector<T>& result() const { return data_.out; }
  const std::string& what() const { return what_; }

 private:
  void reset() {
    if (call_.reset != nullptr) call_.reset(data_);
  }

  const family_call<T>& call_;
  oa::runtime& engine_;
  std::string what_;
  operands<T> data_;
};

template <class T>
measurement measure(const family_call<T>& call, oa::runtime& engine, std::uint64_t n, int repeat) {
  std::mt19937_64 rng(n);
  call_timer<T> timer(call, engine, static_cast<std::size_t>(n), rng);
  measurement m;
  m.n = n;
  // Warm-up: first touches of the output, the thread pools' and the
  // engine's first use at this size; and a check that both compute the
  // same result.
  timer.library();
  const std::vector<T> reference = timer.result();
  timer.engine();
  const double error = relative_error(timer.result(), reference);
  if (!(error <= tolerance<T>()))
    throw std::runtime_error(
        format("%s: the engine's result differs from the standard library's by %.3e (relative; "
               "at most %.0e)",
               timer.what().c_str(), error, tolerance<T>()));
  oa_bench::best_interleaved(
      repeat, m.par_seconds, m.oa_seconds, [&] { return timer.library(); }, [&] { return timer.engine(); });
  return m;
}

/// The smallest power of 2 above n.
std::uint64_t power_of_2_above(std::uint64_t n) {
  std::uint64_t p = 1;
  while (p <= n && p < (std::uint64_t{1} << 63)) p <<= 1;
  return p;
}

/// Sweeps one family; prints its table and suggestion, and returns the
/// threshold suggested.
template <class T>
std::uint64_t sweep_family(const family_call<T>& call, const options& opt, oa::runtime& engine,
                           const std::string& device, oa_bench::json_sink* sink) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::cout << "\n" << call.family << ": " << call.shown << ", " << opt.type << "\n";
  std::vector<measurement> results;
  for (const std::uint64_t n : opt.sizes) {
    const measurement m = measure(call, engine, n, opt.repeat);
    results.push_back(m);
    if (sink) {
      nlohmann::json record = oa_bench::sweep_record("oa-stdpar-sweep", OA_VERSION, device, opt.repeat, "par",
                                                     m.par_seconds, m.oa_seconds);
      record.update({{"family", call.family},
                     {"call", call.shown},
                     {"elements", m.n},
                     {"type", opt.type},
                     {"hardware_threads", threads}});
      sink->write(record);
    }
  }

  oa_bench::text_table table({"n", "data", "par s", "oa s", "oa/par"});
  for (const auto& m : results)
    table.add_row({std::to_string(m.n), oa_bench::format_bytes(double(call.arrays * m.n * sizeof(T))),
                   format("%.3e", m.par_seconds), format("%.3e", m.oa_seconds),
                   format("%.3gx", m.speedup())});
  table.print(std::cout);

  const std::size_t from = oa_bench::crossover(results);
  if (from == results.size()) {
    const auto largest = static_cast<unsigned long long>(results.back().n);
    const auto above = static_cast<unsigned long long>(power_of_2_above(results.back().n));
    std::cout << format(
        "the standard library is faster at the largest size measured (%llu elements): no threshold "
        "from these sizes; keep %s's above %llu (suggested %llu).\n",
        largest, call.family, largest, above);
    return above;
  }
  const std::uint64_t n = results[from].n;
  std::cout << format(
      "oa is at least as fast as the standard library from %llu elements up: suggested %s=%llu.\n",
      static_cast<unsigned long long>(n), call.family, static_cast<unsigned long long>(n));
  return n;
}

template <class T>
void sweep(const options& opt, oa_bench::json_sink* sink) {
  // The default runtime keeps every call with the standard library;
  // `engine` sends every one to the engine, its devices kept from run to
  // run. (The origin names OA_DEVICE and the others in errors; OA_STDPAR_MIN
  // is not read at all.)
  oa::config_origin origin;
  oa::config c = oa::config::read_environment(&origin, {"stdpar_min"});
  c.stdpar_min = {never, never, never, never};
  oa::set_config(c, origin);  // validates
  c.stdpar_min = {0, 0, 0, 0};
  oa::runtime engine(c, origin);
  const std::string device = engine.main_device().name();
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());

  std::cout << "oa-stdpar-sweep (oa " << OA_VERSION << "): standard parallel algorithm calls of n "
            << opt.type << " elements, best of " << opt.repeat
            << "\npar: libstdc++'s parallel algorithms (oneTBB, " << threads
            << " hardware threads); oa: the engine on " << device << "\n";

  std::string line;
  for (const auto& call : family_calls<T>) {
    if (opt.family != "all" && opt.family != call.family) continue;
    const std::uint64_t suggested = sweep_family(call, opt, engine, device, sink);
    line += (line.empty() ? "" : ",") + std::string(call.family) + "=" + std::to_string(suggested);
  }
  std::cout << "\nSuggested for this machine, device and type"
            << (opt.family != "all" ? " (the families not swept keep theirs)" : "")
            << ":\n  OA_STDPAR_MIN=" << line << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{
      "oa-stdpar-sweep: times standard parallel algorithm calls with the standard library and through oa's "
      "engine (the overloads oa_offload(... STDPAR) compiles in) over a range of sizes, and suggests each "
      "family's OA_STDPAR_MIN: sort (std::sort of random values), elementwise (std::transform with "
      "std::plus), "
      "reduction (std::transform_reduce: a dot product), scan (std::inclusive_scan).",
      "oa-stdpar-sweep"};
  app.add_option("--family", opt.family, "the family swept, or all")
      ->check(CLI::IsMember({"sort", "elementwise", "reduction", "scan", "all"}))
      ->capture_default_str();
  CLI::Option* sizes =
      app.add_option("--sizes", opt.sizes,
                     "comma-separated element counts, each from 1 to 2^28 (268435456); default the "
                     "powers of 2 from 2^12 to 2^26")
          ->delimiter(',')
          ->check(oa_bench::whole_number(1, max_elements));
  app.add_option("--type", opt.type, "the element type")
      ->check(CLI::IsMember({"double", "float", "int32", "int64"}))
      ->capture_default_str();
  oa_bench::add_sweep_options(app, opt.repeat, opt.json, "family and size");
  app.footer(
      "The engine's device and budget come from the configuration (OA_DEVICE, OA_DEVICE_MEMORY, ... or\n"
      "OA_CONFIG's file); OA_STDPAR_MIN is not read: the sweep sets it for each side.\n"
      "Exit status: 0 ok, 1 a call the engine declined or computed differently, 2 a configuration error\n"
      "(a bad OA_* value, a device that cannot be used, a --json file that cannot be opened, sizes whose\n"
      "data exceeds this machine's memory), CLI11's codes for options it cannot read.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return oa_bench::usage_exit(app, e);
  }
  if (sizes->count() == 0) opt.sizes = default_sizes();
  oa_bench::sort_sizes(opt.sizes);

  return oa_bench::run_sweep("oa-stdpar-sweep", opt.json, [&](oa_bench::json_sink* sink) {
    // The elementwise call's arrays and the reference: the most a family holds at once.
    const std::size_t element_bytes = opt.type == "double" || opt.type == "int64" ? 8 : 4;
    oa_bench::check_data_size("--sizes", static_cast<std::size_t>(opt.sizes.back()) * 4, element_bytes,
                              "elements");
    if (opt.type == "float")
      sweep<float>(opt, sink);
    else if (opt.type == "int32")
      sweep<std::int32_t>(opt, sink);
    else if (opt.type == "int64")
      sweep<std::int64_t>(opt, sink);
    else
      sweep<double>(opt, sink);
  });
}
