// host_gemm: the widest build of Eigen's product the CPU runs. The library
// is built without -march flags; the AVX2 and AVX-512 builds are their own
// units, compiled with those ISAs and chosen here at run time
// (OA_HOST_GEMM=generic|avx2|avx512 asks for one, where the CPU has it).

#include "host/gemm_table.hpp"
#include "oa/linalg/kernels.hpp"

#include <cstdlib>
#include <string_view>

namespace oa::linalg {

namespace detail {
namespace {

const gemm_table& generic() { return gemm_generic(); }

const gemm_table& pick() {
#if defined(OA_GEMM_ISA_DISPATCH)
  const char* env = std::getenv("OA_HOST_GEMM");
  const std::string_view want = env && *env ? env : "auto";
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (want == "generic") return generic();
  if ((want == "auto" || want == "avx512") && avx512) return gemm_avx512();
  if (avx2) return gemm_avx2();
#endif
  return generic();
}

const gemm_table& chosen() {
  static const gemm_table& t = pick();
  return t;
}

}  // namespace
}  // namespace detail

void host_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
               std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
  detail::chosen().d(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void host_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
               std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  detail::chosen().s(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* host_gemm_isa() noexcept { return detail::chosen().isa; }

}  // namespace oa::linalg
