#pragma once
// The Eigen hooks: included right after Eigen wherever a translation unit of
// a target built with oa_offload() includes it (the wrappers of Eigen's
// module headers first on its include path: cmake/oa_eigen_first.cmake), so
// that an unmodified Eigen program sends its large dense products to oa's
// engine. It specialises Eigen 3.4's internal templates for float and
// double, before any user code can instantiate them:
//
// - gemm_functor: every dense matrix-matrix product Eigen sends to its GEMM
//   kernel (plain, transposed, blocks, scaled, row-major, +=, noalias, the
//   temporary of an aliased A = A * B) reaches the engine whole, once; under
//   OpenMP, in initParallelSession, before Eigen's threads start, so it is
//   offloaded once rather than once per thread.
//
// - general_matrix_vector_product: matrix-vector products (y = A x, x^T A,
//   transposed, blocks, +=) of matrices of OA_OFFLOAD_GEMV_MIN coefficients
//   or more run through the engine over the host's cores (Eigen runs them on
//   one thread; through a link to a GPU they would be slower: each
//   coefficient of A is read once).
//
// - Assignment: an assignment (=, +=, -=, *=, /=) of a coefficient-wise
//   expression tree (arithmetic, comparisons, select, the common unary
//   functions, pow with a scalar, casts, scalar constants) over contiguous
//   float, double or bool operands to a contiguous dense destination becomes
//   one engine stage: chunked, paged, one fused kernel per chunk on a GPU.
//   Trees of other kinds are not touched: Eigen assigns them as always.
//
// - redux_impl: sum, prod, mean, minCoeff, maxCoeff, squaredNorm, norm and
//   dot of such a tree (or of one contiguous array or matrix) reduce through
//   the engine: a partial per chunk, merged in chunk order. The index-
//   returning minCoeff(&i) and maxCoeff(&i) (Eigen's visitors), all() and
//   any() (loops inside Eigen's member functions), and colwise()/rowwise()
//   reductions (one small reduction per column) stay with Eigen.
//
// Products below OA_OFFLOAD_GEMM_MIN multiply-adds, assignments below
// OA_OFFLOAD_ELEMENTS_MIN coefficients, and work Eigen runs inside the
// engine's own threads stay with Eigen, computed as Eigen would.
// -DOA_OFFLOAD_PRODUCTS=0 leaves products out (oa_offload's NO_PRODUCTS),
// -DOA_OFFLOAD_CWISE=0 assignments (NO_CWISE), -DOA_OFFLOAD_REDUCTIONS=0
// reductions (NO_REDUCTIONS).
//
// - DenseStorage's allocation (oa/eigen/pinned_storage.hpp): with
//   -DOA_OFFLOAD_PINNED_ALLOCATIONS=<bytes> (oa_offload's PINNED_ALLOCATIONS),
//   float and double matrices and arrays of that many bytes or more live in
//   oa's pinned pool, so that they cross the link to a GPU with no staging.
//
// Limits: every translation unit that uses Eigen must see this header (a unit
// without it instantiates the same Eigen templates differently, and the
// linker keeps one of the two). Eigen comes in as the program configured it:
// its own #defines before its #include of Eigen stand (eigen_assert, the
// index type, plugins, ...).

#ifdef __cplusplus

#include <Eigen/Core>

#define OA_EIGEN_HOOKS 1  // what a unit can test to know the hooks are in

#if !(EIGEN_WORLD_VERSION == 3 && EIGEN_MAJOR_VERSION == 4)
#error "oa_offload: the Eigen hooks are written for Eigen 3.4 (internal templates differ between versions)"
#endif

#include "oa/eigen/hooks.hpp"
#include "oa/eigen/pinned_storage.hpp"

namespace Eigen {
namespace internal {
template <typename Scalar>
struct scalar_erf_op;  // unsupported/Eigen/SpecialFunctions: hooked when a program includes it
}  // namespace internal
}  // namespace Eigen

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

/// Eigen's matrix-vector kernel, y += alpha A x, offloaded whole when it may;
/// otherwise Eigen's own (its BuiltIn version: the generic code, as Eigen's
/// BLAS backend calls it).
template <class Index, class S, int Order>
struct offloading_gemv {
  typedef Eigen::internal::const_blas_data_mapper<S, Index, Order> LhsMapper;
  typedef Eigen::internal::const_blas_data_mapper<S, Index, Order == Eigen::ColMajor ? Eigen::RowMajor : Eigen::ColMajor>
      RhsMapper;
  typedef Eigen::internal::general_matrix_vector_product<Index, S, LhsMapper, Order, false, S, RhsMapper, false,
                                                         Eigen::BuiltIn>
      eigen;

  static void run(Index rows, Index cols, const LhsMapper& lhs, const RhsMapper& rhs, S* res, Index resIncr, S alpha) {
    if (rows > 0 && cols > 0) {
      // x (rhs) and y (res) as k x 1 and m x 1 matrices: contiguous, or
      // row-major with the vector's increment as outer stride.
      const Index x_incr = Order == Eigen::ColMajor ? rhs.stride() : 1;
      gemm_call call;
      call.scalar = scalar_of<S>::value;
      call.a = {lhs.data(), rows, cols, lhs.stride(), Order == Eigen::RowMajor};
      call.b = {rhs.data(), cols, 1, x_incr == 1 ? cols : x_incr, x_incr != 1};
      call.c = {res, rows, 1, resIncr == 1 ? rows : resIncr, resIncr != 1};
      call.alpha = static_cast<double>(alpha);
      if (oa::eigen_hooks::gemv(call)) return;
    }
    eigen::run(rows, cols, lhs, rhs, res, resIncr, alpha);
  }
};

// ---- coefficient-wise assignments ---------------------------------------------

template <class S>
struct element_of {
  enum { known = 0 };
};
template <>
struct element_of<float> {
  enum { known = 1 };
  static scalar_type type() { return scalar_type::f32; }
};
template <>
struct element_of<double> {
  enum { known = 1 };
  static scalar_type type() { return scalar_type::f64; }
};
template <>
struct element_of<bool> {
  enum { known = 1 };
  static scalar_type type() { return scalar_type::boolean; }
};

template <class F>
struct unary_of {
  enum { known = 0 };
};
#define OA_EIGEN_UNARY(FUNCTOR, OP)                       \
  template <class S>                                      \
  struct unary_of<Eigen::internal::FUNCTOR<S>> {          \
    enum { known = 1 };                                   \
    static cwise_op op() { return cwise_op::OP; }         \
  };
OA_EIGEN_UNARY(scalar_exp_op, exp)
OA_EIGEN_UNARY(scalar_log_op, log)
OA_EIGEN_UNARY(scalar_log2_op, log2)
OA_EIGEN_UNARY(scalar_sqrt_op, sqrt)
OA_EIGEN_UNARY(scalar_sin_op, sin)
OA_EIGEN_UNARY(scalar_cos_op, cos)
OA_EIGEN_UNARY(scalar_tan_op, tan)
OA_EIGEN_UNARY(scalar_asin_op, asin)
OA_EIGEN_UNARY(scalar_acos_op, acos)
OA_EIGEN_UNARY(scalar_atan_op, atan)
OA_EIGEN_UNARY(scalar_tanh_op, tanh)
OA_EIGEN_UNARY(scalar_erf_op, erf)
OA_EIGEN_UNARY(scalar_abs_op, abs)
OA_EIGEN_UNARY(scalar_square_op, square)
OA_EIGEN_UNARY(scalar_abs2_op, square)
OA_EIGEN_UNARY(scalar_opposite_op, negate)
#undef OA_EIGEN_UNARY
template <class S, class N>
struct unary_of<Eigen::internal::scalar_cast_op<S, N>> {
  enum { known = 1 };
  static cwise_op op() { return cwise_op::cast; }
};

/// Binary functors; `swap`: oa's operator takes the operands the other way
/// round (none does: Eigen's min and max are std::min and std::max, as
/// oa::ops::min and max are).
template <class F>
struct binary_of {
  enum { known = 0 };
};
#define OA_EIGEN_BINARY(FUNCTOR, OP, SWAP)                \
  template <class L, class R>                             \
  struct binary_of<Eigen::internal::FUNCTOR<L, R>> {      \
    enum { known = 1, swap = SWAP };                      \
    static cwise_op op() { return cwise_op::OP; }         \
  };
OA_EIGEN_BINARY(scalar_sum_op, add, 0)
OA_EIGEN_BINARY(scalar_difference_op, sub, 0)
OA_EIGEN_BINARY(scalar_product_op, mul, 0)
OA_EIGEN_BINARY(scalar_quotient_op, div, 0)
OA_EIGEN_BINARY(scalar_pow_op, pow, 0)
OA_EIGEN_BINARY(scalar_conj_product_op, mul, 0)  // dot(): real scalars only (element_of)
#undef OA_EIGEN_BINARY
template <class L, class R>
struct binary_of<Eigen::internal::scalar_min_op<L, R, Eigen::PropagateFast>> {
  enum { known = 1, swap = 0 };
  static cwise_op op() { return cwise_op::min; }
};
template <class L, class R>
struct binary_of<Eigen::internal::scalar_max_op<L, R, Eigen::PropagateFast>> {
  enum { known = 1, swap = 0 };
  static cwise_op op() { return cwise_op::max; }
};
#define OA_EIGEN_COMPARE(CMP, OP)                                          \
  template <class L, class R>                                              \
  struct binary_of<Eigen::internal::scalar_cmp_op<L, R, Eigen::internal::CMP>> { \
    enum { known = 1, swap = 0 };                                          \
    static cwise_op op() { return cwise_op::OP; }                          \
  };
OA_EIGEN_COMPARE(cmp_LT, less)
OA_EIGEN_COMPARE(cmp_LE, less_equal)
OA_EIGEN_COMPARE(cmp_GT, greater)
OA_EIGEN_COMPARE(cmp_GE, greater_equal)
OA_EIGEN_COMPARE(cmp_EQ, equal_to)
OA_EIGEN_COMPARE(cmp_NEQ, not_equal_to)
#undef OA_EIGEN_COMPARE

/// The flattened tree being built, and the destination's shape every
/// operand must share coefficient for coefficient.
struct tree_builder {
  enum { capacity = 48 };
  cwise_node nodes[capacity];
  int count = 0;
  Eigen::Index rows = 0, cols = 0;
  bool row_major = false;
  const char* refused = 0;  // why not, when a node is refused

  int push(cwise_op op, scalar_type type, int a = -1, int b = -1, int c = -1, const void* data = 0,
           double value = 0) {
    if (count == capacity) return refuse("more than 48 operations and operands in one expression");
    cwise_node& n = nodes[count];
    n.op = op, n.type = type, n.a = a, n.b = b, n.c = c, n.data = data, n.value = value;
    return count++;
  }
  int refuse(const char* why) {
    if (!refused) refused = why;
    return -1;
  }
};

template <class T>
struct bare {
  typedef typename Eigen::internal::remove_all<T>::type type;
};

/// A tree of coefficient-wise nodes over leaves with direct access: what
/// the hook takes (`shape`), and its flattening (`add`, -1 when refused at
/// run time: a strided leaf, a functor oa lacks).
template <class E, class Enable = void>
struct tree {
  enum { shape = 0, ops = 0 };
};

template <class E>
struct is_leaf {
  enum {
    value = (Eigen::internal::traits<E>::Flags & Eigen::DirectAccessBit) != 0 &&
            element_of<typename E::Scalar>::known
  };
};

template <class E>
struct tree<E, typename Eigen::internal::enable_if<is_leaf<E>::value>::type> {
  enum { shape = 1, ops = 0 };
  static int add(const E& e, tree_builder& b) {
    const bool vector = e.rows() == 1 || e.cols() == 1;
    if (e.rows() != b.rows || e.cols() != b.cols) return b.refuse("operands of different shapes");
    if (e.innerStride() != 1 || (e.outerStride() != e.innerSize() && e.outerSize() > 1))
      return b.refuse("an operand that is not contiguous in memory (a strided map or block)");
    if (!vector && bool(E::IsRowMajor) != b.row_major)
      return b.refuse("operands in different storage orders");
    return b.push(cwise_op::leaf, element_of<typename E::Scalar>::type(), -1, -1, -1, e.data());
  }
};

template <class S, class P>
struct tree<Eigen::CwiseNullaryOp<Eigen::internal::scalar_constant_op<S>, P>,
            typename Eigen::internal::enable_if<element_of<S>::known>::type> {
  enum { shape = 1, ops = 0 };
  static int add(const Eigen::CwiseNullaryOp<Eigen::internal::scalar_constant_op<S>, P>& e, tree_builder& b) {
    return b.push(cwise_op::constant, element_of<S>::type(), -1, -1, -1, 0, static_cast<double>(e.functor()()));
  }
};

template <class F, class X>
struct tree<Eigen::CwiseUnaryOp<F, X>, typename Eigen::internal::enable_if<element_of<
                                           typename Eigen::CwiseUnaryOp<F, X>::Scalar>::known>::type> {
  typedef typename bare<X>::type inner;
  enum { shape = tree<inner>::shape, ops = 1 };
  static int add(const Eigen::CwiseUnaryOp<F, X>& e, tree_builder& b) {
    const int a = tree<inner>::add(e.nestedExpression(), b);
    if (a < 0) return -1;
    if (!unary_of<F>::known) return b.refuse("a coefficient-wise function oa does not have");
    return b.push(op<F>(), element_of<typename Eigen::CwiseUnaryOp<F, X>::Scalar>::type(), a);
  }
  template <class G>
  static cwise_op op(typename Eigen::internal::enable_if<unary_of<G>::known>::type* = 0) {
    return unary_of<G>::op();
  }
  template <class G>
  static cwise_op op(typename Eigen::internal::enable_if<!unary_of<G>::known>::type* = 0) {
    return cwise_op::leaf;
  }
};

template <class F, class L, class R>
struct tree<Eigen::CwiseBinaryOp<F, L, R>, typename Eigen::internal::enable_if<element_of<
                                               typename Eigen::CwiseBinaryOp<F, L, R>::Scalar>::known>::type> {
  typedef typename bare<L>::type lhs;
  typedef typename bare<R>::type rhs;
  enum { shape = tree<lhs>::shape && tree<rhs>::shape, ops = 1 };
  static int add(const Eigen::CwiseBinaryOp<F, L, R>& e, tree_builder& b) {
    const int x = tree<lhs>::add(e.lhs(), b);
    if (x < 0) return -1;
    const int y = tree<rhs>::add(e.rhs(), b);
    if (y < 0) return -1;
    return push<F>(b, x, y);
  }
  template <class G>
  static int push(tree_builder& b, int x, int y, typename Eigen::internal::enable_if<binary_of<G>::known>::type* = 0) {
    const scalar_type t = element_of<typename Eigen::CwiseBinaryOp<F, L, R>::Scalar>::type();
    return binary_of<G>::swap ? b.push(binary_of<G>::op(), t, y, x) : b.push(binary_of<G>::op(), t, x, y);
  }
  template <class G>
  static int push(tree_builder& b, int, int, typename Eigen::internal::enable_if<!binary_of<G>::known>::type* = 0) {
    return b.refuse("a coefficient-wise operator oa does not have");
  }
};

template <class C, class T, class E>
struct tree<Eigen::Select<C, T, E>,
            typename Eigen::internal::enable_if<element_of<typename Eigen::Select<C, T, E>::Scalar>::known>::type> {
  enum { shape = tree<C>::shape && tree<T>::shape && tree<E>::shape, ops = 1 };
  static int add(const Eigen::Select<C, T, E>& e, tree_builder& b) {
    const int c = tree<C>::add(e.conditionMatrix(), b);
    if (c < 0) return -1;
    const int t = tree<T>::add(e.thenMatrix(), b);
    if (t < 0) return -1;
    const int f = tree<E>::add(e.elseMatrix(), b);
    if (f < 0) return -1;
    return b.push(cwise_op::select, element_of<typename Eigen::Select<C, T, E>::Scalar>::type(), c, t, f);
  }
};

// .array() and .matrix() change nothing coefficient-wise.
template <class X>
struct tree<Eigen::ArrayWrapper<X>, typename Eigen::internal::enable_if<!is_leaf<Eigen::ArrayWrapper<X> >::value>::type> {
  typedef typename bare<X>::type inner;
  enum { shape = tree<inner>::shape, ops = tree<inner>::ops };
  static int add(const Eigen::ArrayWrapper<X>& e, tree_builder& b) { return tree<inner>::add(e.nestedExpression(), b); }
};
template <class X>
struct tree<Eigen::MatrixWrapper<X>, typename Eigen::internal::enable_if<!is_leaf<Eigen::MatrixWrapper<X> >::value>::type> {
  typedef typename bare<X>::type inner;
  enum { shape = tree<inner>::shape, ops = tree<inner>::ops };
  static int add(const Eigen::MatrixWrapper<X>& e, tree_builder& b) { return tree<inner>::add(e.nestedExpression(), b); }
};

template <class F>
struct assign_of {
  enum { known = 0 };
};
#define OA_EIGEN_ASSIGN(FUNCTOR, KIND)                   \
  template <class D, class S>                            \
  struct assign_of<Eigen::internal::FUNCTOR<D, S>> {     \
    enum { known = 1 };                                  \
    static assign_kind kind() { return assign_kind::KIND; } \
  };
OA_EIGEN_ASSIGN(assign_op, assign)
OA_EIGEN_ASSIGN(add_assign_op, add)
OA_EIGEN_ASSIGN(sub_assign_op, sub)
OA_EIGEN_ASSIGN(mul_assign_op, mul)
OA_EIGEN_ASSIGN(div_assign_op, div)
#undef OA_EIGEN_ASSIGN

/// The assignments the hook takes: a tree with at least one operation (a
/// plain copy or fill gains nothing) into a float or double destination
/// with direct access.
template <class Dst, class Src, class Func>
struct hooked_assignment {
  typedef typename Dst::Scalar scalar;
  enum {
    value = tree<Src>::shape && tree<Src>::ops && assign_of<Func>::known &&
            (Eigen::internal::traits<Dst>::Flags & Eigen::DirectAccessBit) != 0 &&
            element_of<scalar>::known && !Eigen::internal::is_same<scalar, bool>::value
  };
};

template <class Dst, class Src, class Func>
bool offload_assignment(Dst& dst, const Src& src, const Func&) {
  const std::ptrdiff_t size = static_cast<std::ptrdiff_t>(dst.size());
  if (!cwise_wanted(size)) return false;
  if (dst.innerStride() != 1 || (dst.outerStride() != dst.innerSize() && dst.outerSize() > 1)) {
    cwise_declined("a destination that is not contiguous in memory (a strided map or block)", size);
    return false;
  }
  tree_builder b;
  b.rows = dst.rows();
  b.cols = dst.cols();
  b.row_major = bool(Dst::IsRowMajor);
  if (tree<Src>::add(src, b) < 0) {
    cwise_declined(b.refused, size);
    return false;
  }
  cwise_call call;
  call.nodes = b.nodes;
  call.count = b.count;
  call.dst = dst.data();
  call.dst_type = element_of<typename Dst::Scalar>::type();
  call.size = size;
  call.assign = assign_of<Func>::kind();
  return cwise(call);
}

// ---- reductions --------------------------------------------------------------------

template <class F>
struct reduction_of {
  enum { known = 0 };
};
template <class S>
struct reduction_of<Eigen::internal::scalar_sum_op<S, S>> {
  enum { known = 1 };
  static reduce_kind kind() { return reduce_kind::sum; }
};
template <class S>
struct reduction_of<Eigen::internal::scalar_product_op<S, S>> {
  enum { known = 1 };
  static reduce_kind kind() { return reduce_kind::prod; }
};
template <class S>
struct reduction_of<Eigen::internal::scalar_min_op<S, S, Eigen::PropagateFast>> {
  enum { known = 1 };
  static reduce_kind kind() { return reduce_kind::min; }
};
template <class S>
struct reduction_of<Eigen::internal::scalar_max_op<S, S, Eigen::PropagateFast>> {
  enum { known = 1 };
  static reduce_kind kind() { return reduce_kind::max; }
};

/// The reductions the hook takes: float or double coefficients of a tree
/// (a single leaf included), by a reduction the engine has.
template <class Func, class Xpr>
struct hooked_reduction {
  typedef typename Xpr::Scalar scalar;
  enum {
    value = tree<Xpr>::shape && reduction_of<Func>::known && element_of<scalar>::known &&
            !Eigen::internal::is_same<scalar, bool>::value
  };
};

template <class Func, class Xpr>
bool offload_reduction(const Xpr& xpr, double* result) {
  const std::ptrdiff_t size = static_cast<std::ptrdiff_t>(xpr.size());
  if (!reduce_wanted(size)) return false;
  tree_builder b;
  b.rows = xpr.rows();
  b.cols = xpr.cols();
  b.row_major = bool(Xpr::IsRowMajor);
  if (tree<Xpr>::add(xpr, b) < 0) {
    reduce_declined(b.refused, size);
    return false;
  }
  reduce_call call;
  call.nodes = b.nodes;
  call.count = b.count;
  call.size = size;
  call.kind = reduction_of<Func>::kind();
  return reduce(call, result);
}

/// The caller's evaluator under a type the hook does not match, so that
/// Eigen's own redux_impl reduces with it (evaluators cannot be copied, and a
/// new one would evaluate a product inside the expression again).
template <class Xpr>
class eigen_redux_evaluator {
  typedef Eigen::internal::redux_evaluator<Xpr> base;

 public:
  typedef typename base::XprType XprType;
  typedef typename base::Scalar Scalar;
  typedef typename base::CoeffReturnType CoeffReturnType;
  typedef typename base::PacketScalar PacketScalar;
  enum {
    MaxRowsAtCompileTime = base::MaxRowsAtCompileTime,
    MaxColsAtCompileTime = base::MaxColsAtCompileTime,
    Flags = base::Flags,
    IsRowMajor = base::IsRowMajor,
    SizeAtCompileTime = base::SizeAtCompileTime,
    InnerSizeAtCompileTime = base::InnerSizeAtCompileTime,
    Alignment = base::Alignment,
    CoeffReadCost = base::CoeffReadCost
  };

  explicit eigen_redux_evaluator(const base& e) : e_(e) {}
  CoeffReturnType coeff(Eigen::Index i) const { return e_.coeff(i); }
  CoeffReturnType coeff(Eigen::Index r, Eigen::Index c) const { return e_.coeff(r, c); }
  CoeffReturnType coeffByOuterInner(Eigen::Index o, Eigen::Index i) const { return e_.coeffByOuterInner(o, i); }
  template <int LoadMode, class P>
  P packet(Eigen::Index i) const {
    return e_.template packet<LoadMode, P>(i);
  }
  template <int LoadMode, class P>
  P packet(Eigen::Index r, Eigen::Index c) const {
    return e_.template packet<LoadMode, P>(r, c);
  }
  template <int LoadMode, class P>
  P packetByOuterInner(Eigen::Index o, Eigen::Index i) const {
    return e_.template packetByOuterInner<LoadMode, P>(o, i);
  }

 private:
  const base& e_;
};

template <class Func, class Xpr, int Traversal>
struct offloading_redux {
  typedef typename Eigen::internal::redux_evaluator<Xpr>::Scalar Scalar;

  template <class XprType>
  static Scalar run(const Eigen::internal::redux_evaluator<Xpr>& eval, const Func& func, const XprType& xpr) {
    double r = 0;
    if (offload<Func>(xpr, &r)) return static_cast<Scalar>(r);
    const eigen_redux_evaluator<Xpr> own(eval);
    return Eigen::internal::redux_impl<Func, eigen_redux_evaluator<Xpr>, Traversal, Eigen::NoUnrolling>::run(
        own, func, xpr);
  }

 private:
  template <class F, class X>
  static bool offload(const X& xpr, double* r,
                      typename Eigen::internal::enable_if<hooked_reduction<F, X>::value>::type* = 0) {
    return offload_reduction<F>(xpr, r);
  }
  template <class F, class X>
  static bool offload(const X&, double*,
                      typename Eigen::internal::enable_if<!hooked_reduction<F, X>::value>::type* = 0) {
    return false;
  }
};

}  // namespace detail
}  // namespace eigen_hooks
}  // namespace oa

#if !defined(OA_OFFLOAD_REDUCTIONS) || OA_OFFLOAD_REDUCTIONS
namespace Eigen {
namespace internal {

// One per traversal Eigen picks for a dynamic-size reduction (fixed-size
// ones unroll completely and stay with Eigen).
template <class Func, class Xpr>
struct redux_impl<Func, redux_evaluator<Xpr>, DefaultTraversal, NoUnrolling>
    : oa::eigen_hooks::detail::offloading_redux<Func, Xpr, DefaultTraversal> {};
template <class Func, class Xpr>
struct redux_impl<Func, redux_evaluator<Xpr>, LinearVectorizedTraversal, NoUnrolling>
    : oa::eigen_hooks::detail::offloading_redux<Func, Xpr, LinearVectorizedTraversal> {};
template <class Func, class Xpr>
struct redux_impl<Func, redux_evaluator<Xpr>, SliceVectorizedTraversal, NoUnrolling>
    : oa::eigen_hooks::detail::offloading_redux<Func, Xpr, SliceVectorizedTraversal> {};

}  // namespace internal
}  // namespace Eigen
#endif  // OA_OFFLOAD_REDUCTIONS

#if !defined(OA_OFFLOAD_CWISE) || OA_OFFLOAD_CWISE
namespace Eigen {
namespace internal {

template <class Dst, class Src, class Func>
struct Assignment<Dst, Src, Func, Dense2Dense,
                  typename enable_if<oa::eigen_hooks::detail::hooked_assignment<Dst, Src, Func>::value>::type> {
  EIGEN_DEVICE_FUNC static EIGEN_STRONG_INLINE void run(Dst& dst, const Src& src, const Func& func) {
#ifndef EIGEN_NO_DEBUG
    internal::check_for_aliasing(dst, src);
#endif
    resize_if_allowed(dst, src, func);
    if (oa::eigen_hooks::detail::offload_assignment(dst, src, func)) return;
    call_dense_assignment_loop(dst, src, func);
  }
};

}  // namespace internal
}  // namespace Eigen
#endif  // OA_OFFLOAD_CWISE

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

// Matrix-vector products (and the vector-matrix ones Eigen transposes into
// them). Eigen's BLAS backend (EIGEN_USE_BLAS) specialises the same kernel:
// then BLAS keeps them.
#if !defined(EIGEN_USE_BLAS)
#define OA_EIGEN_GEMV(S, ORDER, X_ORDER)                                                                         \
  template <class Index>                                                                                         \
  struct general_matrix_vector_product<Index, S, const_blas_data_mapper<S, Index, ORDER>, ORDER, false, S,      \
                                       const_blas_data_mapper<S, Index, X_ORDER>, false, Specialized>           \
      : oa::eigen_hooks::detail::offloading_gemv<Index, S, ORDER> {};
OA_EIGEN_GEMV(double, ColMajor, RowMajor)
OA_EIGEN_GEMV(double, RowMajor, ColMajor)
OA_EIGEN_GEMV(float, ColMajor, RowMajor)
OA_EIGEN_GEMV(float, RowMajor, ColMajor)
#undef OA_EIGEN_GEMV
#endif

}  // namespace internal
}  // namespace Eigen
#endif  // OA_OFFLOAD_PRODUCTS

#endif  // __cplusplus
