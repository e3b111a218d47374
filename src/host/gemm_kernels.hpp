#pragma once
// host_gemm's body, compiled once per vector ISA (gemm_host*.cpp).

#include <Eigen/Core>
#include <cstddef>

namespace oa::linalg::detail {

template <class T>
void eigen_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
                const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
  using map = Eigen::Map<mat, 0, Eigen::OuterStride<>>;
  const auto I = [](std::size_t x) { return static_cast<Eigen::Index>(x); };
  map C(c, I(m), I(n), Eigen::OuterStride<>(I(ldc)));
  if (m == 0 || n == 0) return;
  if (beta == T(0))
    C.setZero();
  else if (beta != T(1))
    C *= beta;
  if (k == 0 || alpha == T(0)) return;
  const cmap A(a, I(ta ? k : m), I(ta ? m : k), Eigen::OuterStride<>(I(lda)));
  const cmap B(b, I(tb ? n : k), I(tb ? k : n), Eigen::OuterStride<>(I(ldb)));
  // Eigen folds alpha into its kernel; the product accumulates into C.
  if (!ta && !tb) C.noalias() += alpha * A * B;
  else if (ta && !tb) C.noalias() += alpha * A.transpose() * B;
  else if (!ta && tb) C.noalias() += alpha * A * B.transpose();
  else C.noalias() += alpha * A.transpose() * B.transpose();
}

using dgemm_fn = void (*)(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                          const double*, std::size_t, double, double*, std::size_t);
using sgemm_fn = void (*)(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
struct gemm_table {
  const char* isa;
  dgemm_fn d;
  sgemm_fn s;
};
const gemm_table& gemm_avx2();
const gemm_table& gemm_avx512();

}  // namespace oa::linalg::detail
