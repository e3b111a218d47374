#pragma once
// host_gemm's body, compiled once per vector ISA. Each unit first renames
// Eigen's namespace (#define Eigen oa_eigen_<isa>) and sets OA_GEMM_ISA: its
// instantiations of Eigen's templates then have names of their own, and the
// linker cannot merge them with another ISA's, or with a program's own
// (built with the Eigen hooks of oa_offload).

#include <Eigen/Core>
#include <cstddef>

#ifndef OA_GEMM_ISA
#define OA_GEMM_ISA generic
#endif

namespace oa::linalg::detail::OA_GEMM_ISA {

template <class T>
void eigen_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
                const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
  using map = Eigen::Map<mat, 0, Eigen::OuterStride<>>;
  const auto I = [](std::size_t x) { return static_cast<Eigen::Index>(x); };
  if (m == 0 || n == 0) return;
  map C(c, I(m), I(n), Eigen::OuterStride<>(I(ldc)));
  if (beta == T(0))
    C.setZero();
  else if (beta != T(1))
    C *= beta;
  if (k == 0 || alpha == T(0)) return;
  const cmap A(a, I(ta ? k : m), I(ta ? m : k), Eigen::OuterStride<>(I(lda)));
  const cmap B(b, I(tb ? n : k), I(tb ? k : n), Eigen::OuterStride<>(I(ldb)));
  // Eigen folds alpha into its kernel; the product accumulates into C.
  if (!ta && !tb)
    C.noalias() += alpha * A * B;
  else if (ta && !tb)
    C.noalias() += alpha * A.transpose() * B;
  else if (!ta && tb)
    C.noalias() += alpha * A * B.transpose();
  else
    C.noalias() += alpha * A.transpose() * B.transpose();
}

}  // namespace oa::linalg::detail::OA_GEMM_ISA
