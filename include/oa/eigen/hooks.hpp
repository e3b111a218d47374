#pragma once
// What the Eigen hooks (oa/eigen/offload.hpp) hand to the engine: plain
// descriptions of Eigen's work, no templates, so that the header that every
// translation unit of an offloaded program includes stays small and builds
// as C++14. The engine side is src/eigen/.

#include <cstddef>

namespace oa {
namespace eigen_hooks {

enum class scalar_type { f32, f64 };

/// A dense matrix as Eigen's kernels see it: `rows` x `cols`, `outer_stride`
/// elements between consecutive columns (rows, when row-major), inner stride 1.
struct matrix_arg {
  const void* data;
  std::ptrdiff_t rows;
  std::ptrdiff_t cols;
  std::ptrdiff_t outer_stride;
  bool row_major;
};

/// c += alpha a b, a m x k, b k x n: what Eigen's GEMM computes (its callers
/// scale or clear c first).
struct gemm_call {
  scalar_type scalar;
  matrix_arg a, b, c;
  double alpha;
};

/// Runs `call` through the engine and returns true; or returns false, c
/// untouched, when Eigen should compute it (below OA_OFFLOAD_GEMM_MIN, called
/// from inside the engine, or the engine failed: the reason goes to the
/// report). Errors of oa's configuration are thrown (oa::config_error).
bool gemm(const gemm_call& call);

}  // namespace eigen_hooks
}  // namespace oa
