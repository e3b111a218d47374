#pragma once
// The Eigen hooks: force-included first in every translation unit of a target
// by oa_offload() (cmake/oa_offload.cmake), so that an unmodified Eigen
// program sends its large dense products to oa's engine. It specialises
// Eigen 3.4's internal templates for float and double, before any user code
// can instantiate them:
//
// - gemm_functor: every dense matrix-matrix product Eigen sends to its GEMM
//   kernel (plain, transposed, blocks, scaled, row-major, +=, noalias, the
//   temporary of an aliased A = A * B) reaches the engine whole, once; under
//   OpenMP, in initParallelSession, before Eigen's threads start, so it is
//   offloaded once rather than once per thread.
//
// Products below OA_OFFLOAD_GEMM_MIN multiply-adds, and products Eigen runs
// inside the engine's own threads, stay with Eigen, computed as Eigen would.
// -DOA_OFFLOAD_PRODUCTS=0 leaves products out (oa_offload's NO_PRODUCTS).
//
// Limits: every translation unit that uses Eigen must see this header (a unit
// without it instantiates the same Eigen templates differently, and the
// linker keeps one of the two); Eigen's configuration macros must be -D flags,
// since Eigen is included here before the program's own #defines.

#ifdef __cplusplus

#include <Eigen/Core>

#if !(EIGEN_WORLD_VERSION == 3 && EIGEN_MAJOR_VERSION == 4)
#error "oa_offload: the Eigen hooks are written for Eigen 3.4 (internal templates differ between versions)"
#endif

#include "oa/eigen/hooks.hpp"

namespace oa {
namespace eigen_hooks {
namespace detail {

template <class S>
struct scalar_of;
template <>
struct scalar_of<float> {
  static constexpr scalar_type value = scalar_type::f32;
};
template <>
struct scalar_of<double> {
  static constexpr scalar_type value = scalar_type::f64;
};

/// The storage orders Eigen chose for a product's kernel.
template <class Gemm>
struct gemm_layout;
template <class Index, class LS, int LO, bool CL, class RS, int RO, bool CR, int ResO, int ResInner>
struct gemm_layout<Eigen::internal::general_matrix_matrix_product<Index, LS, LO, CL, RS, RO, CR, ResO, ResInner>> {
  static constexpr bool lhs_row_major = LO == Eigen::RowMajor;
  static constexpr bool rhs_row_major = RO == Eigen::RowMajor;
  static constexpr bool res_row_major = ResO == Eigen::RowMajor;
  // Conjugation never applies to real scalars; a strided destination has
  // no outer-stride description: both stay with Eigen.
  static constexpr bool offloadable = !CL && !CR && ResInner == 1;
};

/// Eigen's gemm_functor, offloading the whole product when it may. Eigen
/// calls operator() once for the whole destination (no OpenMP, or one
/// thread), or initParallelSession once and then operator() once per thread.
template <class Scalar, class Index, class Gemm, class Lhs, class Rhs, class Dest, class BlockingType>
class offloading_gemm {
 public:
  typedef typename Gemm::Traits Traits;

  offloading_gemm(const Lhs& lhs, const Rhs& rhs, Dest& dest, const Scalar& actualAlpha, BlockingType& blocking)
      : m_lhs(lhs), m_rhs(rhs), m_dest(dest), m_actualAlpha(actualAlpha), m_blocking(blocking) {}

  void initParallelSession(Index num_threads) const {
    // Decided once for all threads: Eigen's threads wait for each other.
    m_offloaded = offload();
    if (m_offloaded) return;
    m_blocking.initParallel(m_lhs.rows(), m_rhs.cols(), m_lhs.cols(), num_threads);
    m_blocking.allocateA();
  }

  void operator()(Index row, Index rows, Index col = 0, Index cols = -1,
                  Eigen::internal::GemmParallelInfo<Index>* info = 0) const {
    if (cols == -1) cols = m_rhs.cols();
    if (info) {
      if (m_offloaded) return;
    } else if (row == 0 && col == 0 && rows == m_lhs.rows() && cols == m_rhs.cols() && offload()) {
      return;
    }
    Gemm::run(rows, cols, m_lhs.cols(), &m_lhs.coeffRef(row, 0), m_lhs.outerStride(), &m_rhs.coeffRef(0, col),
              m_rhs.outerStride(), (Scalar*)&(m_dest.coeffRef(row, col)), m_dest.innerStride(), m_dest.outerStride(),
              m_actualAlpha, m_blocking, info);
  }

 private:
  typedef gemm_layout<Gemm> layout;

  bool offload() const {
    if (!layout::offloadable || m_lhs.rows() == 0 || m_rhs.cols() == 0 || m_lhs.cols() == 0) return false;
    gemm_call call;
    call.scalar = scalar_of<Scalar>::value;
    call.a = {&m_lhs.coeffRef(0, 0), m_lhs.rows(), m_lhs.cols(), m_lhs.outerStride(), layout::lhs_row_major};
    call.b = {&m_rhs.coeffRef(0, 0), m_rhs.rows(), m_rhs.cols(), m_rhs.outerStride(), layout::rhs_row_major};
    call.c = {&m_dest.coeffRef(0, 0), m_dest.rows(), m_dest.cols(), m_dest.outerStride(), layout::res_row_major};
    call.alpha = static_cast<double>(m_actualAlpha);
    return oa::eigen_hooks::gemm(call);
  }

  const Lhs& m_lhs;
  const Rhs& m_rhs;
  Dest& m_dest;
  Scalar m_actualAlpha;
  BlockingType& m_blocking;
  mutable bool m_offloaded = false;
};

}  // namespace detail
}  // namespace eigen_hooks
}  // namespace oa

#if !defined(OA_OFFLOAD_PRODUCTS) || OA_OFFLOAD_PRODUCTS
namespace Eigen {
namespace internal {

template <class Index, class Gemm, class Lhs, class Rhs, class Dest, class BlockingType>
struct gemm_functor<double, Index, Gemm, Lhs, Rhs, Dest, BlockingType>
    : oa::eigen_hooks::detail::offloading_gemm<double, Index, Gemm, Lhs, Rhs, Dest, BlockingType> {
  typedef oa::eigen_hooks::detail::offloading_gemm<double, Index, Gemm, Lhs, Rhs, Dest, BlockingType> base;
  using base::base;
};

template <class Index, class Gemm, class Lhs, class Rhs, class Dest, class BlockingType>
struct gemm_functor<float, Index, Gemm, Lhs, Rhs, Dest, BlockingType>
    : oa::eigen_hooks::detail::offloading_gemm<float, Index, Gemm, Lhs, Rhs, Dest, BlockingType> {
  typedef oa::eigen_hooks::detail::offloading_gemm<float, Index, Gemm, Lhs, Rhs, Dest, BlockingType> base;
  using base::base;
};

}  // namespace internal
}  // namespace Eigen
#endif  // OA_OFFLOAD_PRODUCTS

#endif  // __cplusplus
