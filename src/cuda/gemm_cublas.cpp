// cuda_gemm: cuBLAS on the stream's own handle (a handle per stream, so
// products on different streams run concurrently).

#include <algorithm>
#include <cstdint>
#include <string>

#include "oa/cuda/device.hpp"
#include "oa/cuda/error.hpp"
#include "oa/linalg/kernels.hpp"

namespace oa::linalg {

namespace {

int dim(std::size_t x, const char* what) {
  if (x > static_cast<std::size_t>(INT32_MAX))
    throw invalid_argument("oa::linalg::cuda_gemm", what, std::to_string(x) + " is more than cuBLAS's 32-bit sizes take");
  return static_cast<int>(x);
}

cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

template <class T, class F>
void blas_gemm(F gemm, bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
               std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, const stream_view& s) {
  const auto ld = [](std::size_t x, const char* what) { return dim(std::max<std::size_t>(x, 1), what); };
  OA_CUBLAS_TRY(gemm(cuda::blas_handle(s), op(ta), op(tb), dim(m, "m"), dim(n, "n"), dim(k, "k"), &alpha, a,
                     ld(lda, "lda"), b, ld(ldb, "ldb"), &beta, c, ld(ldc, "ldc")));
}

}  // namespace

void cuda_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
               std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc,
               const stream_view& s) {
  blas_gemm(&cublasDgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, s);
}

void cuda_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
               std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
               const stream_view& s) {
  blas_gemm(&cublasSgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, s);
}

}  // namespace oa::linalg
