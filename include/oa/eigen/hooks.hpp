#pragma once
// What the Eigen hooks (oa/eigen/offload.hpp) hand to the engine: plain
// descriptions of Eigen's work, no templates, so that the header that every
// translation unit of an offloaded program includes stays small and builds
// as C++14. The engine side is src/eigen/.

#include <cstddef>

namespace oa {
namespace eigen_hooks {

enum class scalar_type { f32, f64, boolean };

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

/// y += alpha a x, Eigen's matrix-vector kernel, as a gemm_call with b = x
/// (k x 1) and c = y (m x 1); a strided vector is a row-major k x 1 (m x 1)
/// matrix whose outer stride is the vector's increment. The engine splits it
/// over the host's cores: each coefficient of a is read once, so through a
/// link to a GPU it cannot beat them. Returns false, y untouched, below
/// OA_OFFLOAD_GEMV_MIN and in the cases gemm() leaves to Eigen.
bool gemv(const gemm_call& call);

/// Coefficient-wise operations of an expression tree, by their oa::ops names.
enum class cwise_op : unsigned char {
  leaf,      // an array of the program (data)
  constant,  // a scalar every coefficient sees (value)
  add, sub, mul, div, min, max, pow,
  less, less_equal, greater, greater_equal, equal_to, not_equal_to,
  select,    // a ? b : c
  exp, log, log2, sqrt, sin, cos, tan, asin, acos, atan, tanh, erf, abs, square, negate,
  cast,      // a converted to the node's type
};

/// One node of a flattened tree: operands (a, b, c) are earlier nodes.
struct cwise_node {
  cwise_op op;
  scalar_type type;  // of the node's coefficients
  int a, b, c;       // -1: none
  const void* data;  // leaf: its coefficients, contiguous, in the destination's order
  double value;      // constant
};

/// How the tree's value is stored: dst = tree, dst += tree, ...
enum class assign_kind : unsigned char { assign, add, sub, mul, div };

/// dst (size coefficients of dst_type, contiguous) op= the tree whose root
/// is nodes[count - 1].
struct cwise_call {
  const cwise_node* nodes;
  int count;
  void* dst;
  scalar_type dst_type;
  std::ptrdiff_t size;
  assign_kind assign;
};

/// Whether an assignment of `size` coefficients is large enough for the
/// engine (OA_OFFLOAD_ELEMENTS_MIN); one below it is counted for the report.
bool cwise_wanted(std::ptrdiff_t size);

/// An assignment the hook leaves to Eigen, and why, for the report.
void cwise_declined(const char* reason, std::ptrdiff_t size);

enum class reduce_kind : unsigned char { sum, prod, min, max };

/// The reduction (sum, ...) of the tree whose root is nodes[count - 1],
/// over its `size` coefficients.
struct reduce_call {
  const cwise_node* nodes;
  int count;
  std::ptrdiff_t size;
  reduce_kind kind;
};

/// Whether a reduction over `size` coefficients is large enough for the
/// engine (OA_OFFLOAD_ELEMENTS_MIN); one below it is counted for the report.
bool reduce_wanted(std::ptrdiff_t size);

/// A reduction the hook leaves to Eigen, and why, for the report.
void reduce_declined(const char* reason, std::ptrdiff_t size);

/// Reduces through the engine (partials per chunk, merged in order) into
/// *result and returns true; or returns false when Eigen should.
bool reduce(const reduce_call& call, double* result);

/// Runs `call` through the engine as one stage (one fused kernel per chunk
/// on a GPU) and returns true; or returns false, dst untouched, when Eigen
/// should compute it (the reason goes to the report).
bool cwise(const cwise_call& call);

}  // namespace eigen_hooks
}  // namespace oa
