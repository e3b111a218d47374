#pragma once
// Matrix products through the engine: C = alpha op(A) op(B) + beta C on
// dense Eigen matrices (float or double, either storage order), recorded
// lazily like every oa call and run tile by tile. On a device with its own
// memory the operands may be larger than the budget: C's tiles accumulate on
// the device over k and go back once; A's and B's tiles are paged in,
// pipelined with the products (cuBLAS on a GPU, Eigen's product on the
// emulated device). On the host device each core computes a part of C.
//
//   Eigen::MatrixXd A = ..., B = ..., C = ...;
//   oa::linalg::gemm(2.0, A, B, 1.0, C);              // C = 2 A B + C, in place
//   oa::lazy<Eigen::MatrixXd> P = oa::linalg::product(A, B, oa::linalg::op::transpose);  // A^T B
//   oa::evaluate();                                   // or P.get()
//
// Arguments are matrices (read by reference: they must stay alive and
// unchanged until evaluated), lazy handles, or temporaries (kept by the call).

#include <Eigen/Core>
#include <string>
#include <string_view>
#include <utility>
#include <type_traits>

#include "oa/core/annotate.hpp"
#include "oa/core/bind.hpp"
#include "oa/linalg/kernels.hpp"
#include "oa/split_types/matrix.hpp"

namespace oa::linalg {

/// What is applied to an operand before the product.
enum class op { none, transpose };

namespace detail {

template <class M>
struct dense : std::false_type {};
template <class S, int O>
struct dense<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, O>>
    : std::bool_constant<std::is_same_v<S, float> || std::is_same_v<S, double>> {};

/// The matrix type behind an argument (M, M&, lazy<M>).
template <class A>
using matrix_t = oa::detail::value_type_of<A>;
template <class A>
using scalar_t = typename matrix_t<A>::Scalar;

template <class M>
matrix_block storage(const void* object) {
  const M& x = *static_cast<const M*>(object);
  using S = typename M::Scalar;
  return {reinterpret_cast<std::byte*>(const_cast<S*>(x.data())),
          static_cast<std::size_t>(x.rows()),
          static_cast<std::size_t>(x.cols()),
          static_cast<std::size_t>(x.outerStride()),
          bool(M::IsRowMajor),
          sizeof(S)};
}

template <class M>
const oa::detail::value_ops* ops() {
  return &oa::detail::partitioned_ops<split::cols, M>::table;
}

/// rows x cols of a matrix argument, before it is computed (lazy results
/// know their shape when recorded).
template <class A>
std::pair<std::size_t, std::size_t> dims(const A& a) {
  if constexpr (is_lazy_v<A>) {
    if (!a.valid()) throw invalid_argument("oa::linalg", "operand", "empty lazy handle");
    const oa::detail::value_state& v = *a.state();
    if (!v.pending()) {
      if (v.status == oa::detail::value_status::failed) (void)a.get();  // rethrows the error it failed with
      const auto& m = *static_cast<const matrix_t<A>*>(v.object);
      return {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
    }
    // A pending result of a matrix split by rows or by columns.
    const bool by_rows = std::string_view(v.ops->split_name) == split::rows::name;
    return by_rows ? std::pair{v.shape.units, v.shape.inner} : std::pair{v.shape.inner, v.shape.units};
  } else {
    return {static_cast<std::size_t>(a.rows()), static_cast<std::size_t>(a.cols())};
  }
}

inline std::string shape_text(std::pair<std::size_t, std::size_t> d) {
  return std::to_string(d.first) + "x" + std::to_string(d.second);
}

template <class S>
oa::detail::contraction_desc::step_fn cpu_step(S alpha, S beta, bool ta, bool tb) {
  return [=](const matrix_block& a, const matrix_block& b, const matrix_block& c, bool first, const stream_view&) {
    gemm_blocks<S>(a, ta, b, tb, c, alpha, first ? beta : S(1),
                   [](auto&&... x) { host_gemm(std::forward<decltype(x)>(x)...); });
  };
}

template <class S>
oa::detail::contraction_desc::step_fn gpu_step([[maybe_unused]] S alpha, [[maybe_unused]] S beta,
                                               [[maybe_unused]] bool ta, [[maybe_unused]] bool tb) {
#if defined(OA_HAS_CUDA)
  return [=](const matrix_block& a, const matrix_block& b, const matrix_block& c, bool first, const stream_view& s) {
    gemm_blocks<S>(a, ta, b, tb, c, alpha, first ? beta : S(1),
                   [&s](auto&&... x) { cuda_gemm(std::forward<decltype(x)>(x)..., s); });
  };
#else
  return {};
#endif
}

/// Records C = alpha op(A) op(B) + beta C; returns the result's value.
template <class AA, class BA, class CA>
oa::detail::value_ptr record(const char* fn, scalar_t<AA> alpha, AA&& A, op opa, BA&& B, op opb, scalar_t<AA> beta,
                             std::remove_reference_t<CA>* C, bool in_place) {
  using MA = matrix_t<AA>;
  using MB = matrix_t<BA>;
  using S = typename MA::Scalar;
  using MC = std::conditional_t<std::is_void_v<CA>, MA, matrix_t<CA>>;
  static_assert(dense<MA>::value && dense<MB>::value && dense<MC>::value,
                "oa::linalg: operands are dynamic-size Eigen::Matrix of float or double");
  static_assert(std::is_same_v<S, typename MB::Scalar> && std::is_same_v<S, typename MC::Scalar>,
                "oa::linalg: A, B and C have one scalar type");
  const bool ta = opa == op::transpose, tb = opb == op::transpose;
  const auto da = dims(A), db = dims(B);
  const std::size_t m = ta ? da.second : da.first, k = ta ? da.first : da.second;
  const std::size_t kb = tb ? db.second : db.first, n = tb ? db.first : db.second;
  if (kb != k)
    throw invalid_argument(fn, "B", "op(B) is " + std::to_string(kb) + "x" + std::to_string(n) + " but op(A) is " +
                                        std::to_string(m) + "x" + std::to_string(k) +
                                        ": the inner dimensions of a product must agree");
  if constexpr (!std::is_void_v<CA>) {
    const auto dc = dims(*C);
    if (dc.first != m || dc.second != n)
      throw invalid_argument(fn, "C", "is " + shape_text(dc) + " but op(A) op(B) is " + std::to_string(m) + "x" +
                                          std::to_string(n));
  }

  auto g = oa::detail::current_graph();
  std::lock_guard lock(g->mutex());
  oa::detail::call_node node;
  node.name = fn;
  node.units = n;
  node.args.push_back({oa::detail::arg_role::in,
                       oa::detail::bind_value<split::cols, MA>(*g, std::forward<AA>(A), ops<MA>(), fn, "A", false),
                       nullptr});
  node.args.push_back({oa::detail::arg_role::in,
                       oa::detail::bind_value<split::cols, MB>(*g, std::forward<BA>(B), ops<MB>(), fn, "B", false),
                       nullptr});
  oa::detail::value_ptr result;
  if constexpr (!std::is_void_v<CA>) {
    oa::detail::value_ptr vc =
        oa::detail::bind_value<split::cols, MC>(*g, std::forward<CA>(*C), ops<MC>(), fn, "C", in_place);
    if (in_place) {
      result = std::make_shared<oa::detail::value_state>();
      result->label = std::string("C of ") + fn + " (updated in place)";
      result->ops = ops<MC>();
      result->shape = vc->shape;
      result->object = vc->object;
      result->user_storage = true;
      result->storage_first = vc->storage_first;  // later bindings of C's elements are ordered after it
      result->storage_last = vc->storage_last;
      result->status = oa::detail::value_status::pending;
      result->owner = g->weak_from_this();
      g->set_user_version(vc->object, result);
      node.args.push_back({oa::detail::arg_role::mut, vc, result});
    } else if (beta != S(0)) {
      node.args.push_back({oa::detail::arg_role::in, vc, nullptr});
    }
  }
  if (!result) {
    result = std::make_shared<oa::detail::value_state>();
    result->label = std::string("result of ") + fn;
    result->ops = ops<MC>();
    result->shape = {n, m, sizeof(S)};
    result->status = oa::detail::value_status::pending;
    result->owner = g->weak_from_this();
    node.args.push_back({oa::detail::arg_role::out, result, nullptr});
  }

  auto d = std::make_shared<oa::detail::contraction_desc>();
  d->m = m, d->n = n, d->k = k;
  d->trans_a = ta, d->trans_b = tb;
  d->reads_c = !std::is_void_v<CA> && beta != S(0);
  d->elem_bytes = sizeof(S);
  d->storage = {&storage<MA>, &storage<MB>, &storage<MC>};
  d->cpu = cpu_step<S>(alpha, beta, ta, tb);
  d->device = gpu_step<S>(alpha, beta, ta, tb);
  d->type_name = std::is_same_v<S, double> ? "double" : "float";
  node.contraction = std::move(d);
  const int id = g->add(std::move(node));
  result->producer = id;
  return result;
}

}  // namespace detail

/// C = alpha op_a(A) op_b(B) + beta C.
/// C a matrix (a non-const lvalue): updated in place when evaluated; returns nothing.
/// C a lazy handle (or a const or temporary matrix): C is read, not changed,
/// and the result is a new lazy matrix.
/// beta == 0 ignores what C holds (NaNs included), as BLAS does.
template <class AA, class BA, class CA>
auto gemm(detail::scalar_t<AA> alpha, AA&& A, BA&& B, detail::scalar_t<AA> beta, CA&& C, op op_a = op::none,
          op op_b = op::none) {
  using MC = detail::matrix_t<CA>;
  constexpr bool in_place = std::is_lvalue_reference_v<CA> && !is_lazy_v<CA> &&
                            !std::is_const_v<std::remove_reference_t<CA>>;
  auto v = detail::record<AA, BA, CA>("oa::linalg::gemm", alpha, std::forward<AA>(A), op_a, std::forward<BA>(B), op_b, beta, &C,
                          in_place);
  if constexpr (in_place) {
    oa::detail::recorded(*oa::detail::current_graph(), "oa::linalg::gemm");
  } else {
    lazy<MC> result(std::move(v));
    oa::detail::recorded(*oa::detail::current_graph(), "oa::linalg::gemm");  // with its handle: the result is kept
    return result;
  }
}

/// op_a(A) op_b(B) as a new lazy matrix (of A's matrix type).
template <class AA, class BA>
lazy<detail::matrix_t<AA>> product(AA&& A, BA&& B, op op_a = op::none, op op_b = op::none) {
  using S = detail::scalar_t<AA>;
  lazy<detail::matrix_t<AA>> result(detail::record<AA, BA, void>("oa::linalg::product", S(1), std::forward<AA>(A), op_a,
                                                                   std::forward<BA>(B), op_b, S(0), nullptr, false));
  oa::detail::recorded(*oa::detail::current_graph(), "oa::linalg::product");  // with its handle: the result is kept
  return result;
}

}  // namespace oa::linalg
