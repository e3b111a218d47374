#pragma once
// The GEMM workload's NVBLAS baseline (builds with the CUDA toolkit only):
// Eigen's own product compiled with EIGEN_USE_BLAS, whose BLAS is NVBLAS,
// loaded when the mode runs. NVBLAS needs a CPU BLAS for what it keeps on
// the host: OA_BENCH_CPU_BLAS names one, else the usual Debian paths are
// tried; without one the mode fails saying so.

#include <cstddef>

namespace oa_bench {

/// Seconds of C = A B (n x n, column-major) through Eigen and NVBLAS on GPU 0.
double nvblas_product(const double* a, const double* b, double* c, std::size_t n);
double nvblas_product(const float* a, const float* b, float* c, std::size_t n);

}  // namespace oa_bench
