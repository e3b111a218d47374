// host_gemm built for AVX2 (this unit's compile options), with its own
// copy of Eigen's templates (see gemm_kernels.hpp).
#define Eigen oa_eigen_avx2
#define OA_GEMM_ISA avx2
#include "host/gemm_kernels.hpp"
#include "host/gemm_table.hpp"

namespace oa::linalg::detail {
const gemm_table& gemm_avx2() {
  static const gemm_table t{"avx2", &avx2::eigen_gemm<double>, &avx2::eigen_gemm<float>};
  return t;
}
}  // namespace oa::linalg::detail
