#include "gemm_bench.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <oa/oa.hpp>
#include <optional>
#include <random>
#include <thread>
#if defined(OA_HAS_CUDA)
#include <oa/cuda/device.hpp>

#include "gemm_cuda_baselines.hpp"
#include "gemm_nvblas.hpp"
#endif

#include "bench_table.hpp"
#include "gemm_baseline.hpp"

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

namespace oa_bench {

namespace {

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

template <class T>
matrix<T> random_matrix(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  matrix<T> m(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(d(g));
  return m;
}

/// max |x - ref| over max |ref|: relative to the result's scale, since
/// entries near zero come from cancellation in any summation order.
template <class T>
double rel_error(const matrix<T>& got, const matrix<T>& ref) {
  if (ref.size() == 0) return 0;
  const double scale = std::max(static_cast<double>(ref.cwiseAbs().maxCoeff()), std::numeric_limits<double>::min());
  return static_cast<double>((got - ref).cwiseAbs().maxCoeff()) / scale;
}

/// sizeof(T) (2 n^3 / sqrt(M / sizeof(T)) + n^2): no schedule moves fewer
/// bytes through a fast memory of M bytes.
double io_lower_bound(std::size_t n, std::size_t elem_bytes, std::size_t budget) {
  const double nd = static_cast<double>(n), eb = static_cast<double>(elem_bytes);
  return eb * (2.0 * nd * nd * nd / std::sqrt(static_cast<double>(budget) / eb) + nd * nd);
}

std::optional<std::string> gpu_unavailable() {
#if defined(OA_HAS_CUDA)
  std::string why;
  if (oa::cuda::usable_devices(&why) > 0) return std::nullopt;
  return "no usable GPU: " + why;
#else
  return std::string("this oa-bench was built without the CUDA toolkit");
#endif
}

template <class T>
bool run_typed(const gemm_options& opt, json_sink* sink) {
  const std::size_t n = opt.n, eb = sizeof(T);
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  const double tolerance = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const eigen_products& eigen = eigen_products_for(oa::linalg::host_gemm_isa());

  std::vector<std::string> modes;
  for (const auto& m : gemm_modes())
    if (opt.modes.empty() ? (m != "cublas" && m != "cublasxt" && m != "nvblas") || !gpu_unavailable()
                          : std::find(opt.modes.begin(), opt.modes.end(), m) != opt.modes.end())
      modes.push_back(m);

  // The device first: one that cannot be made fails before any timing.
  std::size_t budget = 0;
  std::string device_name;
  oa::device_kind kind = oa::device_kind::host;
  const bool any_oa = std::any_of(modes.begin(), modes.end(), [](const std::string& m) {
    return m == "oa" || m == "sequential";
  });
  if (any_oa) {
    configure_oa_mode(opt, false);
    budget = oa::current_device().memory_budget();
    device_name = oa::current_device().name();
    kind = oa::current_device().kind();
    if (opt.device_memory && kind == oa::device_kind::host)
      std::cerr << "note: the host device computes in place in host memory and ignores --device-memory\n";
  }

  std::cerr << "generating two random " << n << "x" << n << " " << opt.type << " matrices (seed " << opt.seed
            << ")\n";
  const matrix<T> A = random_matrix<T>(n, opt.seed), B = random_matrix<T>(n, opt.seed + 1);
  matrix<T> ref;
  if (opt.verify) {
    std::cerr << "computing the reference (Eigen, " << (eigen.openmp ? threads : 1) << " threads)" << std::endl;
    ref.resize(A.rows(), B.cols());
  }
  const auto eigen_product = [&](matrix<T>& C, int t) {
    if constexpr (std::is_same_v<T, double>)
      eigen.d(A.data(), B.data(), C.data(), n, n, n, t);
    else
      eigen.s(A.data(), B.data(), C.data(), n, n, n, t);
  };
  if (opt.verify) eigen_product(ref, threads);

  std::vector<mode_outcome> results;
  for (const auto& mode : modes) {
    mode_outcome r;
    r.mode = mode;
    r.device = mode == "cpu" || mode == "cpu-openmp"    ? "cpu"
               : mode == "oa" || mode == "sequential" ? opt.device
                                                      : "cuda";
    if (mode == "cpu-openmp" && !eigen.openmp) r.failure = "this oa-bench was built without OpenMP";
    if (mode == "cublas" || mode == "cublasxt" || mode == "nvblas") r.failure = gpu_unavailable();
    if (r.oa_mode()) {
      configure_oa_mode(opt, mode == "sequential");
      (void)oa::current_device();  // made here: no run times its creation
      (void)oa::host_device();
    }
    for (int rep = first_run(opt); rep <= opt.repeat && !r.failure; ++rep) {
      announce_run("gemm " + std::to_string(n) + "x" + std::to_string(n) + " " + opt.type, mode, rep, opt.repeat);
      const bool timed = rep >= 1;  // else a warm-up: checked, not timed
      try {
        matrix<T> C;
        double s = 0;
        if (mode == "cpu" || mode == "cpu-openmp") {
          C.resize(A.rows(), B.cols());
          const auto t0 = clock_type::now();
          eigen_product(C, mode == "cpu" ? 1 : threads);
          s = seconds_since(t0);
        } else if (r.oa_mode()) {
          oa::clear_reports();
          const std::size_t staged_before = oa::current_device().staged_bytes();
          const auto t0 = clock_type::now();
          oa::lazy<matrix<T>> P = oa::linalg::product(A, B);
          const matrix<T>& got = P.get();
          s = seconds_since(t0);
          if (opt.verify) r.error = std::max(r.error.value_or(0.0), rel_error(got, ref));
          if (timed && s < r.seconds) {
            r.staged_bytes = oa::current_device().staged_bytes() - staged_before;
            r.total = oa::total(oa::reports());
            if (!r.total.device.empty()) r.device = r.total.device;
          }
        } else {
#if defined(OA_HAS_CUDA)
          C.resize(A.rows(), B.cols());
          s = mode == "cublas"     ? cublas_in_core(A.data(), B.data(), C.data(), n)
              : mode == "cublasxt" ? cublasxt(A.data(), B.data(), C.data(), n)
                                   : nvblas_product(A.data(), B.data(), C.data(), n);
#endif
        }
        if (!r.oa_mode() && opt.verify) r.error = std::max(r.error.value_or(0.0), rel_error(C, ref));
        if (timed) r.seconds = std::min(r.seconds, s);
      } catch (const std::exception& e) {
        r.failure = e.what();
      }
    }
    results.push_back(std::move(r));
  }

  const std::optional<double> cpu_seconds = seconds_of(results, "cpu"), omp_seconds = seconds_of(results, "cpu-openmp");
  const std::size_t operand_bytes = 3 * n * n * eb;
  const bool paged = any_oa && kind != oa::device_kind::host;
  const double lower = paged ? io_lower_bound(n, eb, budget) : 0;

  std::cout << "\ngemm: C = A B, " << n << "x" << n << " " << opt.type << ", operands "
            << format_bytes(static_cast<double>(operand_bytes)) << " (A, B and C)";
  if (any_oa) {
    std::cout << ", device " << device_name;
    if (kind == oa::device_kind::host) std::cout << " (computes in host memory, every core)";
    else std::cout << ", budget " << format_bytes(static_cast<double>(budget));
    if (paged)
      std::cout << format(": operands = %.1fx budget; I/O lower bound %s", static_cast<double>(operand_bytes) / budget,
                          format_bytes(lower).c_str());
  }
  std::cout << "\nEigen " << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "." << EIGEN_MINOR_VERSION
            << " built for " << eigen.isa << " (oa's host kernels: " << oa::linalg::host_gemm_isa() << "), "
            << threads << " hardware threads\n";
  if (any_oa && emulated_run(opt))
    std::cout << "EMULATED DEVICE: host memory posing as device memory; these are not GPU timings\n";
  text_table table({"mode", "device", "seconds", "GFLOP/s", "tiles", "moved", "moved/LB", "peak device", "overlap",
                    "vs cpu", "vs cpu-openmp", "max_rel_error"});
  const auto ratio = [](std::optional<double> base, double s) {
    return base ? format("%.2fx", *base / s) : std::string();
  };
  for (const auto& r : results) {
    if (r.failure) {
      table.add_row({r.mode, r.device, "failed", "", "", "", "", "", "", "", "", "error (below)"});
      continue;
    }
    const auto& t = r.total;
    const double moved = static_cast<double>(t.h2d_bytes + t.d2h_bytes);
    table.add_row({r.mode, r.device, format("%.3f", r.seconds), format("%.1f", flops / r.seconds / 1e9),
                   r.oa_mode() ? std::to_string(t.chunks) : "", r.oa_mode() ? format_bytes(moved) : "",
                   r.oa_mode() && paged ? format("%.2f", moved / lower) : "",
                   r.oa_mode() ? format_bytes(static_cast<double>(t.peak_device_bytes)) : "",
                   r.oa_mode() && paged ? format("%.2f", overlap_of(t, r.seconds)) : "", ratio(cpu_seconds, r.seconds),
                   ratio(omp_seconds, r.seconds), !opt.verify ? "-" : format("%.2e", r.error.value_or(0.0))});
  }
  table.print(std::cout);
  for (const auto& r : results) {
    if (r.failure) std::cout << r.mode << ": failed: " << *r.failure << '\n';
    if (r.oa_mode() && !r.failure && !r.total.tiling.empty()) std::cout << r.mode << ": " << r.total.tiling << '\n';
  }
  std::cout << std::flush;

  bool ok = true;
  for (const auto& r : results) {
    const auto& t = r.total;
    const auto or_null = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    const bool timed = !r.failure;
    const double moved = static_cast<double>(t.h2d_bytes + t.d2h_bytes);
    if (sink) {
      nlohmann::json record = {{"workload", "gemm"},
                   {"mode", r.mode},
                   {"device", r.device},
                   {"requested_device", r.oa_mode() ? opt.device : r.device},
                   {"n", n},
                   {"type", opt.type},
                   {"elements", n * n},
                   {"data_bytes", operand_bytes},
                   {"device_memory_budget", r.oa_mode() ? budget : 0},
                   {"peak_device_bytes", t.peak_device_bytes},
                   {"chunks", t.chunks},
                   {"streams", t.streams},
                   {"h2d_bytes", t.h2d_bytes},
                   {"d2h_bytes", t.d2h_bytes},
                   {"io_lower_bound_bytes", r.oa_mode() && paged ? nlohmann::json(lower) : nlohmann::json(nullptr)},
                   {"bytes_over_lower_bound",
                    r.oa_mode() && paged ? nlohmann::json(moved / lower) : nlohmann::json(nullptr)},
                   {"h2d_seconds", t.h2d_seconds},
                   {"compute_seconds", t.compute_seconds},
                   {"d2h_seconds", t.d2h_seconds},
                   {"fill_seconds", t.fill_seconds},
                   {"drain_seconds", t.drain_seconds},
                   {"prefault_seconds", t.prefault_seconds},
                   {"host_reruns", t.host_reruns},
                   {"host_memory", opt.host_memory},
                   {"staged_bytes", r.oa_mode() ? nlohmann::json(r.staged_bytes) : nlohmann::json(nullptr)},
                   {"tiling", t.tiling.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.tiling)},
                   {"seconds", timed ? nlohmann::json(r.seconds) : nlohmann::json(nullptr)},
                   {"gflops", timed ? nlohmann::json(flops / r.seconds / 1e9) : nlohmann::json(nullptr)},
                   {"error", r.failure ? nlohmann::json(*r.failure) : nlohmann::json(nullptr)},
                   {"max_rel_error", or_null(r.error)},
                   {"overlap_efficiency",
                    r.oa_mode() && paged && timed
                        ? nlohmann::json(overlap_of(t, r.seconds))
                        : nlohmann::json(nullptr)},
                   {"speedup_vs_cpu", or_null(cpu_seconds && timed ? std::optional(*cpu_seconds / r.seconds)
                                                                    : std::nullopt)},
                   {"speedup_vs_cpu_openmp", or_null(omp_seconds && timed ? std::optional(*omp_seconds / r.seconds)
                                                                          : std::nullopt)},
                   {"isa", eigen.isa},
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
      const bool requested = !opt.modes.empty();
      std::cerr << "oa-bench: gemm, mode " << r.mode << " failed: " << *r.failure << '\n';
      if (requested) ok = false;
      continue;
    }
    if (r.error && !(*r.error <= tolerance)) {
      std::cerr << "oa-bench: gemm, mode " << r.mode << ": max_rel_error " << format("%.3e", *r.error)
                << " exceeds " << format("%.0e", tolerance) << " against Eigen\n";
      ok = false;
    }
  }
  return ok;
}

}  // namespace

const std::vector<std::string>& gemm_modes() {
  static const std::vector<std::string> modes{"cpu",    "cpu-openmp", "sequential", "oa",
                                              "cublas", "cublasxt",   "nvblas"};
  return modes;
}

bool run_gemm(const gemm_options& opt, json_sink* sink) {
  if (opt.type == "double") return run_typed<double>(opt, sink);
  if (opt.type == "float") return run_typed<float>(opt, sink);
  throw std::invalid_argument("--type: '" + opt.type + "' is not double or float");
}

}  // namespace oa_bench
