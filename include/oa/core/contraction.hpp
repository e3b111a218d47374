#pragma once
// Contractions: calls whose result is a matrix computed tile by tile over a
// third loop, C = alpha op(A) op(B) + beta C. The engine cuts C into output
// tiles and k into steps, keeps each C tile on the device while it
// accumulates over k, and pages the tiles of A and B it needs (a row panel of
// A may be held for a whole row of C tiles); see src/core/contraction.cpp.
// A frontend describes the operands' storage and gives the step functions
// (oa/linalg/gemm.hpp: Eigen on the host, cuBLAS on a GPU).

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <string>

#include "oa/core/device.hpp"

namespace oa {

/// A dense matrix block as stored: `rows` x `cols` elements of `elem_bytes`,
/// column-major (or row-major), `ld` elements between the starts of
/// consecutive columns (rows).
struct matrix_block {
  std::byte* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t ld = 0;
  bool row_major = false;
  std::size_t elem_bytes = 0;

  std::size_t outer() const noexcept { return row_major ? rows : cols; }
  std::size_t inner() const noexcept { return row_major ? cols : rows; }
  std::size_t bytes() const noexcept { return rows * cols * elem_bytes; }
  /// The block's storage as a region: one region row per outer vector.
  region as_region() const noexcept {
    return {data, inner() * elem_bytes, outer(), ld * elem_bytes};
  }
  /// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of this block.
  matrix_block sub(std::size_t r0, std::size_t c0, std::size_t nr, std::size_t nc) const noexcept {
    const std::size_t off = row_major ? r0 * ld + c0 : c0 * ld + r0;
    return {data ? data + off * elem_bytes : nullptr, nr, nc, ld, row_major, elem_bytes};
  }
  /// The same shape and order packed at `p` (ld = the inner extent).
  matrix_block packed_at(std::byte* p) const noexcept {
    return {p, rows, cols, std::max<std::size_t>(inner(), 1), row_major, elem_bytes};
  }
};

namespace detail {

/// One contraction call: C (m x n) = alpha op(A) op(B) + beta C, op(A) m x k.
struct contraction_desc {
  std::size_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;  // op(X) = X^T
  bool reads_c = false;                   // beta != 0: C's tiles are read before their first step
  // A matrix-vector product (n == 1): each coefficient of A is read once, so
  // copying A over a link costs more than the host's cores take to use it.
  // It runs on the host unless the device reads its operands in place.
  bool reads_once = false;
  std::size_t elem_bytes = 0;
  /// The storage of the A, B and C objects (read when the stage runs).
  std::array<matrix_block (*)(const void* object), 3> storage{};
  /// One step on one C tile: c = alpha op(a) op(b) + (first ? beta c : c),
  /// blocks as stored (a is op(A)'s tile before op).
  using step_fn = std::function<void(const matrix_block& a, const matrix_block& b, const matrix_block& c, bool first,
                                     const stream_view& s)>;
  step_fn cpu;     // on memory the host reads: the host device, and the emulated device's twin
  step_fn device;  // enqueued on a GPU's stream (cuBLAS); empty: no GPU entry
  std::string type_name;  // "double", "float": for reports

  double flops() const noexcept { return 2.0 * double(m) * double(n) * double(k); }
  /// The block of stored A holding op(A)'s rows [i0, i0+mi) and columns [k0, k0+kk).
  matrix_block a_tile(const matrix_block& a, std::size_t i0, std::size_t mi, std::size_t k0, std::size_t kk) const {
    return trans_a ? a.sub(k0, i0, kk, mi) : a.sub(i0, k0, mi, kk);
  }
  matrix_block b_tile(const matrix_block& b, std::size_t k0, std::size_t kk, std::size_t j0, std::size_t nj) const {
    return trans_b ? b.sub(j0, k0, nj, kk) : b.sub(k0, j0, kk, nj);
  }
};

}  // namespace detail
}  // namespace oa
