#pragma once
// The product kernels behind oa::linalg: BLAS's gemm on column-major
// storage, on the host (Eigen's own product, compiled for the widest vector
// ISA the CPU has, chosen at run time) and on a CUDA stream (cuBLAS), and
// the step the engine runs on one tile of a contraction (any storage order).

#include <cstddef>

#include "oa/core/contraction.hpp"

namespace oa::linalg {

/// C (m x n) = alpha op(A) op(B) + beta C, column-major, op(X) = X^T when tX.
/// beta == 0 ignores what C held (NaNs included), as BLAS does. One thread.
void host_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
               std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc);
void host_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
               std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);

/// The vector ISA host_gemm runs with: "avx512", "avx2" or "generic".
const char* host_gemm_isa() noexcept;

#if defined(OA_HAS_CUDA)
/// The same, enqueued on the stream with the stream's cuBLAS handle.
void cuda_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
               std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc,
               const stream_view& s);
void cuda_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
               std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
               const stream_view& s);
#endif

/// One step of a product on blocks as stored (either order):
/// c = alpha op(a) op(b) + beta c. A row-major block is the transpose of a
/// column-major one, so every case is one column-major gemm.
template <class T, class Gemm>
void gemm_blocks(const matrix_block& a, bool ta, const matrix_block& b, bool tb, const matrix_block& c, T alpha, T beta,
                 Gemm&& gemm) {
  const bool ta_c = ta != a.row_major, tb_c = tb != b.row_major;  // op on the column-major storage
  const std::size_t k = ta ? a.rows : a.cols;
  const auto* pa = reinterpret_cast<const T*>(a.data);
  const auto* pb = reinterpret_cast<const T*>(b.data);
  auto* pc = reinterpret_cast<T*>(c.data);
  if (!c.row_major)
    gemm(ta_c, tb_c, c.rows, c.cols, k, alpha, pa, a.ld, pb, b.ld, beta, pc, c.ld);
  else  // C^T = op(B)^T op(A)^T
    gemm(!tb_c, !ta_c, c.cols, c.rows, k, alpha, pb, b.ld, pa, a.ld, beta, pc, c.ld);
}

}  // namespace oa::linalg
