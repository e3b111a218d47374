// Eigen's product for the GEMM baselines, built for the generic ISA (this
// unit's compile options).
#define Eigen oa_bench_eigen_generic  // built with OpenMP: apart from the library's Eigen
#define OA_BASELINE_ISA generic
#include "gemm_baseline_body.hpp"

namespace oa_bench {
const eigen_products& eigen_products_generic() {
#if defined(_OPENMP)
  constexpr bool openmp = true;
#else
  constexpr bool openmp = false;
#endif
  static const eigen_products p{"generic", openmp, &generic::product<double>, &generic::product<float>};
  return p;
}
}  // namespace oa_bench

namespace oa_bench {
const eigen_products& eigen_products_for(std::string_view isa) {
#if defined(OA_BENCH_ISA_BUILDS)
  if (isa == "avx512") return eigen_products_avx512();
  if (isa == "avx2") return eigen_products_avx2();
#endif
  (void)isa;
  return eigen_products_generic();
}
}  // namespace oa_bench
