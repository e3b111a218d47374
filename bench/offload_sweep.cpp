// oa-offload-sweep: from which size oa_offload() pays. For one Eigen
// statement at growing sizes, times Eigen and oa's engine on the same inputs,
// best of --repeat runs with the two interleaved (both see the same machine
// state, turbo and caches included), and suggests the threshold from which
// the hook should send such statements to the engine: the smallest size
// measured from which the engine is at least as fast at every larger one.
//
//   --op gemm   square products C.noalias() = A * B of n x n matrices, and
//               OA_OFFLOAD_GEMM_MIN (multiply-adds, m n k);
//   --op gemv   matrix-vector products y.noalias() = A * x, A n x n, and
//               OA_OFFLOAD_GEMV_MIN (coefficients of A, m k);
//   --op cwise  a coefficient-wise assignment of n coefficients,
//               r = (a * b + c).exp() * 0.5 + a.sqrt(), and
//               OA_OFFLOAD_ELEMENTS_MIN (coefficients). The crossover depends
//               on the work per coefficient: a statement of one cheap
//               operation pays later than this one, one of many sooner.
//
// Built with oa_offload(), as the programs it tunes are: both timings go
// through the same Eigen hook, one runtime keeping every statement with
// Eigen, the other sending every one to the engine. The engine's device is
// the configuration's (OA_DEVICE, OA_DEVICE_MEMORY, ...).

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "bench_json.hpp"
#include "bench_sweep.hpp"
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

constexpr int max_matrix_size = 1 << 16;
constexpr int max_elements = 1 << 28;

struct options {
  std::string op = "gemm";
  std::vector<int> sizes;  // empty: the op's defaults
  std::string type = "double";
  int repeat = 5;
  std::string json;
};

const std::vector<int> gemm_sizes{32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024};
const std::vector<int> gemv_sizes{64, 128, 256, 384, 512, 768, 1024, 2048, 4096};
const std::vector<int> cwise_sizes{1024, 4096, 16384, 65536, 262144, 1048576, 4194304};

struct measurement {
  int size = 0;            // n (gemm, gemv) or coefficients (cwise)
  std::uint64_t work = 0;  // in the threshold's unit: multiply-adds m n k, coefficients of A, or coefficients
  double eigen_seconds = std::numeric_limits<double>::infinity();
  double oa_seconds = std::numeric_limits<double>::infinity();
  double speedup() const { return eigen_seconds / oa_seconds; }
};

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using array = Eigen::Array<T, Eigen::Dynamic, 1>;

/// Coefficients uniform in [lo, hi], from `rng`.
template <class Plain>
Plain uniform(Eigen::Index rows, Eigen::Index cols, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Plain m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<typename Plain::Scalar>(dist(rng));
  return m;
}

// The statements timed: each runs one Eigen statement over its own inputs
// and result, says which report op the hook files it under, and measures how
// far a result is from a reference.

/// C.noalias() = A * B, n x n. Error: the largest difference relative to the
/// largest |C| (at least 1), as oa-bench measures products.
template <class T>
struct product {
  static constexpr const char* op = "gemm";
  static constexpr double tolerance = sizeof(T) == 8 ? 1e-9 : 1e-4;

  product(int n, std::mt19937_64& rng)
      : a(uniform<matrix<T>>(n, n, -1, 1, rng)), b(uniform<matrix<T>>(n, n, -1, 1, rng)), c(n, n) {}
  void run() { c.noalias() = a * b; }
  const matrix<T>& result() const { return c; }
  std::string name() const {
    return format("the %ld x %ld product", static_cast<long>(c.rows()), static_cast<long>(c.cols()));
  }
  double error(const matrix<T>& reference) const {
    const double scale = std::max<double>(1, reference.cwiseAbs().maxCoeff());
    return static_cast<double>((c - reference).cwiseAbs().maxCoeff()) / scale;
  }

  const matrix<T> a, b;
  matrix<T> c;
};

/// y.noalias() = A * x, A n x n. Error as for products.
template <class T>
struct matrix_vector {
  static constexpr const char* op = "gemv";
  static constexpr double tolerance = sizeof(T) == 8 ? 1e-9 : 1e-4;

  matrix_vector(int n, std::mt19937_64& rng)
      : a(uniform<matrix<T>>(n, n, -1, 1, rng)), x(uniform<vector<T>>(n, 1, -1, 1, rng)), y(n) {}
  void run() { y.noalias() = a * x; }
  const vector<T>& result() const { return y; }
  std::string name() const {
    return format("the %ld x %ld matrix-vector product", static_cast<long>(a.rows()), static_cast<long>(a.cols()));
  }
  double error(const vector<T>& reference) const {
    const double scale = std::max<double>(1, reference.cwiseAbs().maxCoeff());
    return static_cast<double>((y - reference).cwiseAbs().maxCoeff()) / scale;
  }

  const matrix<T> a;
  const vector<T> x;
  vector<T> y;
};

/// r = (a * b + c).exp() * 0.5 + a.sqrt(): a few of the arithmetic and
/// transcendental operations a workload statement has. Error: the largest
/// difference of a coefficient relative to the reference's (at least 1).
template <class T>
struct cwise_statement {
  static constexpr const char* op = "cwise";
  static constexpr double tolerance = sizeof(T) == 8 ? 1e-12 : 1e-5;

  cwise_statement(int n, std::mt19937_64& rng)
      : a(uniform<array<T>>(n, 1, 0, 1, rng)),  // sqrt's domain
        b(uniform<array<T>>(n, 1, -1, 1, rng)),
        c(uniform<array<T>>(n, 1, -1, 1, rng)),
        r(n) {}
  void run() { r = (a * b + c).exp() * T(0.5) + a.sqrt(); }
  const array<T>& result() const { return r; }
  std::string name() const { return format("the assignment of %ld coefficients", static_cast<long>(r.size())); }
  double error(const array<T>& reference) const {
    return static_cast<double>(((r - reference).abs() / reference.abs().max(T(1))).maxCoeff());
  }

  const array<T> a, b, c;
  array<T> r;
};

/// Times a statement under the default runtime (Eigen computes it) or under
/// `engine` (the engine does), and checks that each ran where it was meant
/// to: a statement the engine declines would time Eigen twice.
template <class Statement>
class statement_timer {
 public:
  statement_timer(oa::runtime& engine, int size, std::mt19937_64& rng) : engine_(engine), statement_(size, rng) {}

  double eigen() {
    oa::clear_reports();
    const double s = timed();
    for (const auto& r : oa::reports())
      if (r.op == Statement::op) throw std::logic_error(statement_.name() + ", meant for Eigen, ran through the engine");
    return s;
  }

  double engine() {
    return oa_bench::time_through_engine(engine_, Statement::op, statement_.name(), [&] { statement_.run(); });
  }

  const Statement& statement() const { return statement_; }

 private:
  double timed() {
    const auto t0 = oa_bench::clock_type::now();
    statement_.run();
    return oa_bench::seconds_since(t0);
  }

  oa::runtime& engine_;
  Statement statement_;
};

template <class Statement>
measurement measure(oa::runtime& engine, int size, std::uint64_t work, int repeat) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(size));
  statement_timer<Statement> timer(engine, size, rng);
  measurement m;
  m.size = size;
  m.work = work;
  // Warm-up: first touches of the result, the engine's first use of its
  // device at this size; and a check that both compute the same result.
  timer.eigen();
  const auto reference = timer.statement().result();
  timer.engine();
  const double error = timer.statement().error(reference);
  if (!(error <= Statement::tolerance))
    throw std::runtime_error(format("%s: the engine's result differs from Eigen's by %.3e (relative; at most %.0e)",
                                    timer.statement().name().c_str(), error, Statement::tolerance));
  oa_bench::best_interleaved(repeat, m.eigen_seconds, m.oa_seconds, [&] { return timer.eigen(); },
                             [&] { return timer.engine(); });
  return m;
}

template <class T>
void sweep(const options& opt, oa_bench::json_sink* sink) {
  const bool gemm = opt.op == "gemm", gemv = opt.op == "gemv", matrices = gemm || gemv;
  // The default runtime keeps every statement with Eigen; `engine` offloads
  // every one of the swept kind (and none of the other), its devices kept
  // from run to run. (The origin names OA_DEVICE and the others in errors.)
  constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();
  oa::config_origin origin;
  oa::config c = oa::config::from_environment(&origin);
  c.offload_gemm_min = never;
  c.offload_elements_min = never;
  c.offload_gemv_min = never;
  oa::set_config(c, origin);
  if (gemm)
    c.offload_gemm_min = 0;
  else if (gemv)
    c.offload_gemv_min = 0;
  else
    c.offload_elements_min = 0;
  oa::runtime engine(c, origin);
  const std::string device = engine.main_device().name();
  // Eigen's products use its threads; its coefficient-wise loops one.
  const int threads = gemm ? Eigen::nbThreads() : 1;

  if (gemm)
    std::cout << "oa-offload-sweep (oa " << OA_VERSION << "): C.noalias() = A * B, " << opt.type
              << ", n x n, best of " << opt.repeat << "\nEigen on " << threads
              << (threads == 1 ? " thread" : " threads") << "; oa on " << device << "\n\n";
  else if (gemv)
    std::cout << "oa-offload-sweep (oa " << OA_VERSION << "): y.noalias() = A * x, " << opt.type
              << ", A n x n, best of " << opt.repeat
              << "\nEigen on 1 thread (its matrix-vector kernel is serial); oa on " << device
              << " (on a GPU device, the host's cores: see OA_OFFLOAD_GEMV_MIN)\n\n";
  else
    std::cout << "oa-offload-sweep (oa " << OA_VERSION << "): r = (a * b + c).exp() * 0.5 + a.sqrt(), " << opt.type
              << " arrays of n coefficients, best of " << opt.repeat
              << "\nEigen on 1 thread (its coefficient-wise loops are serial); oa on " << device << "\n\n";

  std::vector<measurement> results;
  for (int size : opt.sizes) {
    const auto n = static_cast<std::uint64_t>(size);
    const measurement m = gemm   ? measure<product<T>>(engine, size, n * n * n, opt.repeat)
                          : gemv ? measure<matrix_vector<T>>(engine, size, n * n, opt.repeat)
                                 : measure<cwise_statement<T>>(engine, size, n, opt.repeat);
    results.push_back(m);
    if (sink) {
      nlohmann::json record = oa_bench::sweep_record("oa-offload-sweep", OA_VERSION, device, opt.repeat, "eigen",
                                                      m.eigen_seconds, m.oa_seconds);
      record.update({{"op", opt.op}, {"n", m.size}, {"type", opt.type}, {"eigen_threads", threads}});
      record[gemm ? "multiply_adds" : gemv ? "matrix_coefficients" : "elements"] = m.work;
      sink->write(record);
    }
  }

  const std::size_t arrays = 4;  // a, b, c and r
  oa_bench::text_table table(
      gemm   ? std::vector<std::string>{"n", "multiply-adds", "Eigen s", "oa s", "oa/Eigen"}
      : gemv ? std::vector<std::string>{"n", "matrix coefficients", "Eigen s", "oa s", "oa/Eigen"}
             : std::vector<std::string>{"n", "data", "Eigen s", "oa s", "oa/Eigen"});
  for (const auto& m : results)
    table.add_row({std::to_string(m.size),
                   matrices ? std::to_string(m.work) : oa_bench::format_bytes(double(arrays * m.work * sizeof(T))),
                   format("%.3e", m.eigen_seconds), format("%.3e", m.oa_seconds), format("%.3gx", m.speedup())});
  table.print(std::cout);

  const char* variable = gemm ? "OA_OFFLOAD_GEMM_MIN" : gemv ? "OA_OFFLOAD_GEMV_MIN" : "OA_OFFLOAD_ELEMENTS_MIN";
  const std::size_t from = oa_bench::crossover(results);
  if (from == results.size()) {
    std::cout << format("\nEigen is faster at the largest size measured (n = %d): no threshold to suggest from these "
                        "sizes; keep %s above %llu.\n",
                        results.back().size, variable, static_cast<unsigned long long>(results.back().work));
  } else {
    const measurement& m = results[from];
    if (gemm)
      std::cout << format("\noa is at least as fast as Eigen from n = %d up: suggested %s=%llu (%d^3 multiply-adds) "
                          "for this machine, device and type.\n",
                          m.size, variable, static_cast<unsigned long long>(m.work), m.size);
    else if (gemv)
      std::cout << format("\noa is at least as fast as Eigen from n = %d up: suggested %s=%llu (%d^2 coefficients of "
                          "A) for this machine, device and type.\n",
                          m.size, variable, static_cast<unsigned long long>(m.work), m.size);
    else
      std::cout << format("\noa is at least as fast as Eigen from n = %d coefficients up: suggested %s=%llu for this "
                          "machine, device and type.\n",
                          m.size, variable, static_cast<unsigned long long>(m.work));
  }
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{
      "oa-offload-sweep: times an Eigen statement with Eigen and through oa's engine (the hooks oa_offload() "
      "compiles in) over a range of sizes, and suggests the threshold from which the engine should take it: "
      "dense products C.noalias() = A * B and OA_OFFLOAD_GEMM_MIN (--op gemm), matrix-vector products "
      "y.noalias() = A * x and OA_OFFLOAD_GEMV_MIN (--op gemv), or a coefficient-wise assignment r = (a * b + c).exp() * 0.5 + a.sqrt() and OA_OFFLOAD_ELEMENTS_MIN (--op cwise).",
      "oa-offload-sweep"};
  app.add_option("--op", opt.op, "the statement timed")->check(CLI::IsMember({"gemm", "gemv", "cwise"}))->capture_default_str();
  CLI::Option* sizes =
      app.add_option("--sizes", opt.sizes,
                     "comma-separated sizes: matrix sizes n for gemm (n x n by n x n products, at most 65536; "
                     "default 32,48,64,96,128,192,256,384,512,768,1024) and gemv (n x n matrices, at most 65536; "
                     "default 64,128,256,384,512,768,1024,2048,4096), coefficients for cwise (at most 2^28; "
                     "default 1024,4096,16384,65536,262144,1048576,4194304)")
          ->delimiter(',')
          ->check(CLI::Range(1, max_elements));
  app.add_option("--type", opt.type, "the element type")->check(CLI::IsMember({"double", "float"}))->capture_default_str();
  oa_bench::add_sweep_options(app, opt.repeat, opt.json, "size");
  app.footer(
      "The engine's device and budget come from the configuration (OA_DEVICE, OA_DEVICE_MEMORY, ... or\n"
      "OA_CONFIG's file); OA_OFFLOAD_GEMM_MIN, OA_OFFLOAD_GEMV_MIN and OA_OFFLOAD_ELEMENTS_MIN are ignored:\n"
      "the sweep sets them for each side.\n"
      "Exit status: 0 ok, 1 a statement the engine declined or computed differently, 2 a configuration error\n"
      "(a bad OA_* value, a device that cannot be used, a --json file that cannot be opened),\n"
      "CLI11's codes for options it cannot read.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return oa_bench::usage_exit(app, e);
  }
  if (sizes->count() == 0) opt.sizes = opt.op == "gemm" ? gemm_sizes : opt.op == "gemv" ? gemv_sizes : cwise_sizes;
  if (opt.op != "cwise")
    for (int n : opt.sizes)
      if (n > max_matrix_size)
        return oa_bench::usage_exit(app, CLI::ValidationError(
            "--sizes", format("%d is not a matrix size from 1 to %d (--op %s; --op cwise takes coefficients)", n,
                              max_matrix_size, opt.op.c_str())));
  oa_bench::sort_sizes(opt.sizes);

  return oa_bench::run_sweep("oa-offload-sweep", opt.json, [&](oa_bench::json_sink* sink) {
    if (opt.type == "float")
      sweep<float>(opt, sink);
    else
      sweep<double>(opt, sink);
  });
}
