#pragma once
// oa-bench's GEMM workload: C = A B for n x n matrices, as Eigen's own
// product (one thread, and OpenMP on every core), through oa (pipelined and
// sequential), and on a GPU as in-core cuBLAS, cuBLASXt and NVBLAS, side by side.

#include <cstddef>
#include <cstdint>
#include <oa/core/config.hpp>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_options.hpp"

namespace oa_bench {

struct gemm_options : common_options {
  std::size_t n = 0;
  std::string type = "double";  // or "float"
  // modes empty: cpu, cpu-openmp, sequential, oa (+ cublas, cublasxt, nvblas on a GPU)
};

/// Every GEMM mode, in the order they run.
const std::vector<std::string>& gemm_modes();

/// Runs the modes, prints the table, appends records to `sink`. Returns
/// false when a verified error exceeds the tolerance (1e-12 for double,
/// 1e-5 for float, relative to the largest entry of the result).
bool run_gemm(const gemm_options& opt, json_sink* sink);

}  // namespace oa_bench
