#pragma once
// The GEMM workload's baselines: Eigen's own product, C = A B on
// column-major storage, built for the same vector ISA as oa's host kernels
// (chosen by the same name at run time) and with OpenMP, so that oa and
// Eigen differ only in how the work is spread and paged, not in the
// instructions they run.

#include <cstddef>
#include <string_view>

namespace oa_bench {

struct eigen_products {
  const char* isa;
  bool openmp;  // the build runs on several threads when asked
  // C (m x n) = A (m x k) B (k x n), column-major, packed.
  void (*d)(const double* a, const double* b, double* c, std::size_t m, std::size_t k, std::size_t n, int threads);
  void (*s)(const float* a, const float* b, float* c, std::size_t m, std::size_t k, std::size_t n, int threads);
};

/// The build for "avx512", "avx2" or anything else (the baseline ISA).
const eigen_products& eigen_products_for(std::string_view isa);

const eigen_products& eigen_products_generic();
const eigen_products& eigen_products_avx2();
const eigen_products& eigen_products_avx512();

}  // namespace oa_bench
