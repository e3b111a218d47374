// host_gemm compiled for AVX512 (this file's compile options).
#include "host/gemm_kernels.hpp"

namespace oa::linalg::detail {
const gemm_table& gemm_avx512() {
  static const gemm_table t{"avx512", &eigen_gemm<double>, &eigen_gemm<float>};
  return t;
}
}  // namespace oa::linalg::detail
