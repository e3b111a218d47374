// Eigen's product for the GEMM baselines, built for the avx512 ISA (this
// unit's compile options).
#define Eigen oa_bench_eigen_avx512
#define OA_BASELINE_ISA avx512
#include "gemm_baseline_body.hpp"

namespace oa_bench {
const eigen_products& eigen_products_avx512() {
#if defined(_OPENMP)
  constexpr bool openmp = true;
#else
  constexpr bool openmp = false;
#endif
  static const eigen_products p{"avx512", openmp, &avx512::product<double>, &avx512::product<float>};
  return p;
}
}  // namespace oa_bench
