// The hand-fused baselines of WORKLOADS.md: Black-Scholes and Haversine as one
// loop each over the elements, temporaries in registers, parallelised with
// OpenMP and calling libm (std::) one element at a time, as a C++ programmer
// would write them without a library. Inputs are those of oa-bench (same
// generator, same seed), so the results can be set beside oa's; --verify
// compares with the plain Eigen program of bench/workloads.hpp.
//
//   oa-fused-baseline --workload blackscholes|haversine --elements N
//                     [--repeat R] [--seed S] [--verify] [--json FILE]
// prints one line per run and, with --json, appends one JSON record each.

#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "bench_cli.hpp"
#include "bench_data.hpp"
#include "workloads.hpp"

namespace {

void blackscholes_fused(const double* price, const double* strike, const double* t, const double* rate,
                        const double* vol, double* call, double* put, std::ptrdiff_t n) {
  const double c05 = 3.0, c10 = 1.5, invsqrt2 = 1.0 / std::sqrt(2.0);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const double rsig = vol[i] * vol[i] * c05 + rate[i];
    const double vol_sqrt = std::sqrt(t[i]) * vol[i];
    double d1 = (std::log2(price[i] / strike[i]) + rsig * t[i]) / vol_sqrt;
    double d2 = d1 - vol_sqrt;
    d1 = std::erf(d1 * invsqrt2) * c05 + c05;
    d2 = std::erf(d2 * invsqrt2) * c05 + c05;
    const double e_rt = std::exp(-rate[i] * t[i]);
    call[i] = price[i] * d1 - e_rt * strike[i] * d2;
    put[i] = e_rt * strike[i] * (c10 - d2) - price[i] * (c10 - d1);
  }
}

void haversine_fused(const double* lat2, const double* lon2, double* a, std::ptrdiff_t n) {
  const double lat1 = 0.70984286, lon1 = 1.23892197, miles = 3959.0;
  const double cos_lat1 = std::cos(lat1);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const double dlat = std::sin((lat2[i] - lat1) / 2.0);
    const double dlon = std::sin((lon2[i] - lon1) / 2.0);
    const double h = dlat * dlat + std::cos(lat2[i]) * cos_lat1 * (dlon * dlon);
    a[i] = std::asin(std::sqrt(h)) * 2.0 * miles;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload, json;
  std::size_t elements = 0;
  int repeat = 1;
  std::uint64_t seed = 42;
  bool verify = false;
  CLI::App app{"oa-fused-baseline: the workloads as one hand-fused OpenMP loop each"};
  app.add_option("--workload", workload, "blackscholes or haversine")->required()->check(CLI::IsMember({"blackscholes", "haversine"}));
  app.add_option("--elements", elements, "elements per array")->required()->check(oa_bench::whole_number(1));
  app.add_option("--repeat", repeat, "timed runs (each is printed)")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "input seed (oa-bench's default: 42)")->check(oa_bench::whole_number());
  app.add_flag("--verify", verify, "compare with the plain Eigen program (oa-bench's max_rel_error, exit 1 past 1e-9)");
  app.add_option("--json", json, "append one JSON record per run to FILE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return oa_bench::usage_exit(app, e);
  }

  const auto& w = oa_bench::find_workload(workload);
  try {
    oa_bench::check_data_size("--elements", elements, w.data_bytes(1), "elements (every input and output)");
  } catch (const std::exception& e) {
    std::cerr << "oa-fused-baseline: " << e.what() << '\n';
    return 2;
  }
  const std::vector<Eigen::ArrayXd> in = oa_bench::make_inputs(w, elements, seed);
  const auto n = static_cast<std::ptrdiff_t>(elements);
  std::vector<Eigen::ArrayXd> out;
  auto run = [&] {
    out.clear();
    if (workload == "blackscholes") {
      out.assign(2, Eigen::ArrayXd(n));  // uninitialised, as the other programs' results
      blackscholes_fused(in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(), out[0].data(),
                         out[1].data(), n);
    } else {
      out.assign(1, Eigen::ArrayXd(n));
      haversine_fused(in[0].data(), in[1].data(), out[0].data(), n);
    }
  };

  std::optional<double> error;
  if (verify) {
    run();
    std::vector<Eigen::ArrayXd> ref(out.size());
    if (workload == "blackscholes")
      oa_workloads::blackscholes(in[0], in[1], in[2], in[3], in[4], ref[0], ref[1]);
    else
      oa_workloads::haversine(in[0], in[1], ref[0]);
    double worst = 0;
    for (std::size_t k = 0; k < out.size(); ++k) worst = std::max(worst, oa_bench::max_rel_error(out[k], ref[k]));
    error = worst;
  }
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "fused " << workload << " elements " << elements << " threads " << omp_get_max_threads()
              << " seconds " << s;
    if (error) std::cout << " max_error " << *error;
    std::cout << '\n';
    if (!json.empty()) {
      nlohmann::json j{{"program", "oa-fused-baseline"}, {"mode", "fused"},  {"workload", workload},
                       {"elements", elements},          {"seconds", s},      {"threads", omp_get_max_threads()},
                       {"repeat", r + 1}};
      if (error) j["max_error"] = *error;
      std::ofstream(json, std::ios::app) << j.dump() << '\n';
    }
  }
  return error && !(*error <= 1e-9) ? 1 : 0;
}
