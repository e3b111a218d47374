#pragma once
// The GEMM workload's GPU baselines (builds with the CUDA toolkit only):
// cuBLAS in core (operands resident on the GPU, the product alone timed: the
// ceiling), and cuBLASXt (host operands, tiled and paged by cuBLAS itself).
// Matrices are n x n, column-major, packed.

#include <cstddef>

namespace oa_bench {

/// Seconds of the product alone; throws std::runtime_error when the
/// operands do not fit the GPU.
double cublas_in_core(const double* a, const double* b, double* c, std::size_t n);
double cublas_in_core(const float* a, const float* b, float* c, std::size_t n);

/// Seconds of the whole call, host to host, on GPU 0.
double cublasxt(const double* a, const double* b, double* c, std::size_t n);
double cublasxt(const float* a, const float* b, float* c, std::size_t n);

}  // namespace oa_bench
