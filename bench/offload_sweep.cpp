// oa-offload-sweep: from which size oa_offload() pays. For square products
// C.noalias() = A * B of growing n, times Eigen and oa's engine on the same
// inputs, best of --repeat runs with the two interleaved (both see the same
// machine state, turbo and caches included), and suggests OA_OFFLOAD_GEMM_MIN:
// the multiply-adds (m n k) of the smallest n from which the engine is at least
// as fast at every larger size measured.
//
// Built with oa_offload(), as the programs it tunes are: both timings go
// through the same Eigen hook, one runtime keeping every product with Eigen,
// the other sending every product to the engine. The engine's device is the
// configuration's (OA_DEVICE, OA_DEVICE_MEMORY, ...).

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_table.hpp"
#include "oa/oa.hpp"

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

#if !defined(OA_OFFLOAD)
#error "oa-offload-sweep is built with oa_offload()"
#endif

namespace {

using oa_bench::format;

struct options {
  std::vector<int> sizes{32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024};
  std::string type = "double";
  int repeat = 5;
  std::string json;
};

struct measurement {
  int n = 0;
  std::uint64_t multiply_adds = 0;
  double eigen_seconds = std::numeric_limits<double>::infinity();
  double oa_seconds = std::numeric_limits<double>::infinity();
  double speedup() const { return eigen_seconds / oa_seconds; }
};

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

template <class T>
matrix<T> random_matrix(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  matrix<T> m(n, n);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(uniform(rng));
  return m;
}

/// Times C.noalias() = A * B under the default runtime (Eigen computes it)
/// or under `engine` (the engine does), and checks that each ran where
/// it was meant to: a product the engine declines would time Eigen twice.
template <class T>
class product_timer {
 public:
  product_timer(oa::runtime& engine, int n, std::mt19937_64& rng)
      : engine_(engine), a_(random_matrix<T>(n, rng)), b_(random_matrix<T>(n, rng)), c_(n, n) {}

  double eigen() {
    oa::clear_reports();
    const double s = timed();
    for (const auto& r : oa::reports())
      if (r.op == "gemm") throw std::logic_error("a product meant for Eigen ran through the engine");
    return s;
  }

  double engine() {
    engine_.clear_reports();
    double s;
    {
      oa::runtime::use on(engine_);
      s = timed();
    }
    for (const auto& d : engine_.not_offloaded())
      if (d.op == "gemm")
        throw std::runtime_error(format("the engine did not run the %ld x %ld product: %s",
                                        static_cast<long>(c_.rows()), static_cast<long>(c_.cols()), d.reason.c_str()));
    return s;
  }

  const matrix<T>& result() const { return c_; }

 private:
  double timed() {
    const auto t0 = oa_bench::clock_type::now();
    c_.noalias() = a_ * b_;
    return oa_bench::seconds_since(t0);
  }

  oa::runtime& engine_;
  const matrix<T> a_, b_;
  matrix<T> c_;
};

template <class T>
measurement measure(oa::runtime& engine, int n, int repeat) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(n));
  product_timer<T> timer(engine, n, rng);
  measurement m;
  m.n = n;
  m.multiply_adds = std::uint64_t(n) * std::uint64_t(n) * std::uint64_t(n);
  // Warm-up: first touches of the result, the engine's first use of its
  // device at this size; and a check that both compute the same product.
  timer.eigen();
  const matrix<T> reference = timer.result();
  timer.engine();
  const double scale = std::max<double>(1, reference.cwiseAbs().maxCoeff());
  const double error = static_cast<double>((timer.result() - reference).cwiseAbs().maxCoeff()) / scale;
  const double tolerance = sizeof(T) == 8 ? 1e-9 : 1e-4;
  if (!(error <= tolerance))
    throw std::runtime_error(format("n = %d: the engine's product differs from Eigen's by %.3e (relative)", n, error));
  for (int r = 0; r < repeat; ++r) {
    m.eigen_seconds = std::min(m.eigen_seconds, timer.eigen());
    m.oa_seconds = std::min(m.oa_seconds, timer.engine());
  }
  return m;
}

template <class T>
void sweep(const options& opt, oa_bench::json_sink* sink) {
  // The default runtime keeps every product with Eigen; `engine` offloads
  // every one, its devices kept from run to run. (The origin names OA_DEVICE
  // and the others in errors.)
  oa::config_origin origin;
  oa::config c = oa::config::from_environment(&origin);
  c.offload_gemm_min = std::numeric_limits<std::uint64_t>::max();
  oa::set_config(c, origin);
  c.offload_gemm_min = 0;
  oa::runtime engine(c, origin);
  const std::string device = engine.main_device().name();
  const int threads = Eigen::nbThreads();

  std::cout << "oa-offload-sweep (oa " << OA_VERSION << "): C.noalias() = A * B, " << opt.type << ", n x n, best of "
            << opt.repeat << "\nEigen on " << threads << (threads == 1 ? " thread" : " threads") << "; oa on "
            << device << "\n\n";

  std::vector<measurement> results;
  for (int n : opt.sizes) {
    const measurement m = measure<T>(engine, n, opt.repeat);
    results.push_back(m);
    if (sink)
      sink->write({{"tool", "oa-offload-sweep"},
                   {"n", m.n},
                   {"type", opt.type},
                   {"multiply_adds", m.multiply_adds},
                   {"eigen_seconds", m.eigen_seconds},
                   {"oa_seconds", m.oa_seconds},
                   {"speedup", m.speedup()},
                   {"device", device},
                   {"eigen_threads", threads},
                   {"repeat", opt.repeat},
                   {"hostname", oa_bench::hostname()},
                   {"timestamp", oa_bench::utc_timestamp()},
                   {"oa_version", OA_VERSION}});
  }

  oa_bench::text_table table({"n", "multiply-adds", "Eigen s", "oa s", "oa/Eigen"});
  for (const auto& m : results)
    table.add_row({std::to_string(m.n), std::to_string(m.multiply_adds), format("%.3e", m.eigen_seconds),
                   format("%.3e", m.oa_seconds), format("%.3gx", m.speedup())});
  table.print(std::cout);

  // The crossover: the first size of the run of sizes, up to the largest,
  // where oa is at least as fast. The true one lies between that size and the
  // one below it, so the suggestion errs towards Eigen.
  std::size_t from = results.size();
  while (from > 0 && results[from - 1].speedup() >= 1) --from;
  if (from == results.size()) {
    std::cout << format("\nEigen is faster at the largest size measured (n = %d): no threshold to suggest from these "
                        "sizes; keep OA_OFFLOAD_GEMM_MIN above %llu.\n",
                        results.back().n, static_cast<unsigned long long>(results.back().multiply_adds));
  } else {
    const measurement& m = results[from];
    std::cout << format("\noa is at least as fast as Eigen from n = %d up: suggested OA_OFFLOAD_GEMM_MIN=%llu "
                        "(%d^3 multiply-adds) for this machine, device and type.\n",
                        m.n, static_cast<unsigned long long>(m.multiply_adds), m.n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{
      "oa-offload-sweep: times Eigen's dense product C.noalias() = A * B with Eigen and through oa's engine "
      "(the hook oa_offload() compiles in) over a range of sizes, and suggests OA_OFFLOAD_GEMM_MIN.",
      "oa-offload-sweep"};
  app.add_option("--sizes", opt.sizes, "comma-separated matrix sizes n (the products are n x n by n x n)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--type", opt.type, "the element type")->check(CLI::IsMember({"double", "float"}))->capture_default_str();
  app.add_option("--repeat", opt.repeat, "timed runs of each, after a warm-up; the fastest counts")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--json", opt.json, "append one JSON object per size to FILE (JSON Lines)");
  app.footer(
      "The engine's device and budget come from the configuration (OA_DEVICE, OA_DEVICE_MEMORY, ... or\n"
      "OA_CONFIG's file); OA_OFFLOAD_GEMM_MIN is ignored: the sweep sets it for each side.\n"
      "Exit status: 0 ok, 1 a product the engine declined or computed differently, 2 a configuration error\n"
      "(a bad OA_* value, a device that cannot be used, a --json file that cannot be opened),\n"
      "CLI11's codes for options it cannot read.");
  CLI11_PARSE(app, argc, argv);
  std::sort(opt.sizes.begin(), opt.sizes.end());
  opt.sizes.erase(std::unique(opt.sizes.begin(), opt.sizes.end()), opt.sizes.end());

  std::optional<oa_bench::json_sink> sink;
  try {
    if (!opt.json.empty()) sink.emplace(opt.json);
  } catch (const std::exception& e) {
    std::cerr << "oa-offload-sweep: " << e.what() << '\n';
    return 2;
  }
  try {
    if (opt.type == "float")
      sweep<float>(opt, sink ? &*sink : nullptr);
    else
      sweep<double>(opt, sink ? &*sink : nullptr);
    return 0;
  } catch (const oa::config_error& e) {
    std::cout << std::flush;
    std::cerr << "oa-offload-sweep: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << "oa-offload-sweep: " << e.what() << '\n';
    return 1;
  }
}
