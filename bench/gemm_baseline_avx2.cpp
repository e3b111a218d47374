// Eigen's product for the GEMM baselines, built for the avx2 ISA (this
// unit's compile options).
#define Eigen oa_bench_eigen_avx2
#define OA_BASELINE_ISA avx2
#include "gemm_baseline_body.hpp"

namespace oa_bench {
const eigen_products& eigen_products_avx2() {
#if defined(_OPENMP)
  constexpr bool openmp = true;
#else
  constexpr bool openmp = false;
#endif
  static const eigen_products p{"avx2", openmp, &avx2::product<double>, &avx2::product<float>};
  return p;
}
}  // namespace oa_bench
