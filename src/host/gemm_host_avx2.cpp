// host_gemm compiled for AVX2 (this file's compile options).
#include "host/gemm_kernels.hpp"

namespace oa::linalg::detail {
const gemm_table& gemm_avx2() {
  static const gemm_table t{"avx2", &eigen_gemm<double>, &eigen_gemm<float>};
  return t;
}
}  // namespace oa::linalg::detail
