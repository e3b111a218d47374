// host_gemm built for AVX512 (this unit's compile options), with its own
// copy of Eigen's templates (see gemm_kernels.hpp).
#define Eigen oa_eigen_avx512
#define OA_GEMM_ISA avx512
#include "host/gemm_kernels.hpp"
#include "host/gemm_table.hpp"

namespace oa::linalg::detail {
const gemm_table& gemm_avx512() {
  static const gemm_table t{"avx512", &avx512::eigen_gemm<double>, &avx512::eigen_gemm<float>};
  return t;
}
}  // namespace oa::linalg::detail
