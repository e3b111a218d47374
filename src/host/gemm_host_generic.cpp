// host_gemm built for the baseline ISA, with its own copy of Eigen's
// templates like the wider builds (see gemm_kernels.hpp): a program built
// with oa_offload instantiates the same Eigen templates with its hooks, and
// the linker must not swap one for the other.
#define Eigen oa_eigen_generic
#define OA_GEMM_ISA generic
#include "host/gemm_kernels.hpp"
#include "host/gemm_table.hpp"

namespace oa::linalg::detail {
const gemm_table& gemm_generic() {
  static const gemm_table t{"generic", &generic::eigen_gemm<double>, &generic::eigen_gemm<float>};
  return t;
}
}  // namespace oa::linalg::detail
