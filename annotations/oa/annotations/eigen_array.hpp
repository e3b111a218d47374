#pragma once
// Annotations for coefficient-wise operations on Eigen 1-D arrays, and the
// operators that make oa::lazy<Eigen::Array<S, Dynamic, 1>> read like the
// Eigen original: a workload written once over an array type `A` runs as
// plain Eigen with A = Eigen::ArrayXd and through oa with A = oa::lazy<...>.
//
// Each annotation maps one Eigen statement on a chunk (the CPU function) to
// an element-wise device function from oa/core/ops.hpp.

#include <Eigen/Core>
#include <cstddef>
#include <type_traits>
#include <unsupported/Eigen/SpecialFunctions>

#include "oa/core/annotate.hpp"
#include "oa/core/ops.hpp"

namespace oa::eigen {

template <class S>
using array = Eigen::Array<S, Eigen::Dynamic, 1>;
template <class S>
using lazy_array = oa::lazy<array<S>>;

namespace detail {
using split::broadcast;
using split::contiguous;

#define OA_EIGEN_BINARY(NAME, OP, SYMBOL)                                                                \
  template <class S, class R = S>                                                                       \
  inline constexpr auto NAME##_aa = oa::annotate<"Eigen::ArrayBase::operator" #SYMBOL>(                 \
      oa::cpu([](const auto& a, const auto& b, auto& out) { out = (a SYMBOL b); }),                     \
      oa::args(oa::in<contiguous>, oa::in<contiguous>, oa::out<contiguous, array<R>>),                 \
      oa::device_fn(oa::elementwise(ops::OP{})));                                                          \
  template <class S, class R = S>                                                                       \
  inline constexpr auto NAME##_as = oa::annotate<"Eigen::ArrayBase::operator" #SYMBOL " (scalar)">(     \
      oa::cpu([](const auto& a, const S& b, auto& out) { out = (a SYMBOL b); }),                        \
      oa::args(oa::in<contiguous>, oa::scalar<S>, oa::out<contiguous, array<R>>),                      \
      oa::device_fn(oa::elementwise(ops::OP{})));                                                          \
  template <class S, class R = S>                                                                       \
  inline constexpr auto NAME##_sa = oa::annotate<"Eigen::operator" #SYMBOL " (scalar, array)">(         \
      oa::cpu([](const S& a, const auto& b, auto& out) { out = (a SYMBOL b); }),                        \
      oa::args(oa::scalar<S>, oa::in<contiguous>, oa::out<contiguous, array<R>>),                      \
      oa::device_fn(oa::elementwise(ops::OP{})));

OA_EIGEN_BINARY(add, add, +)
OA_EIGEN_BINARY(sub, sub, -)
OA_EIGEN_BINARY(mul, mul, *)
OA_EIGEN_BINARY(div, div, /)
OA_EIGEN_BINARY(lt, less, <)
OA_EIGEN_BINARY(le, less_equal, <=)
OA_EIGEN_BINARY(gt, greater, >)
OA_EIGEN_BINARY(ge, greater_equal, >=)
#undef OA_EIGEN_BINARY

#define OA_EIGEN_UNARY(NAME)                                                       \
  template <class S>                                                               \
  inline constexpr auto NAME = oa::annotate<"Eigen::ArrayBase::" #NAME>(           \
      oa::cpu([](const auto& a, auto& out) { out = a.NAME(); }),                   \
      oa::args(oa::in<contiguous>, oa::out<contiguous, array<S>>),                 \
      oa::device_fn(oa::elementwise(ops::NAME{})));

OA_EIGEN_UNARY(log)
OA_EIGEN_UNARY(sqrt)
OA_EIGEN_UNARY(abs)
OA_EIGEN_UNARY(square)
#undef OA_EIGEN_UNARY

/// out = f(a) through the host's vectorized math (oa::host_math) where it
/// has the function for the chunk's scalar type; false: Eigen computes.
template <class A, class O>
bool vector_math(host_math::fn f, const A& a, O& out) {
  if constexpr (std::is_same_v<typename A::Scalar, double> && std::is_same_v<typename O::Scalar, double>)
    return a.innerStride() == 1 && out.innerStride() == 1 && a.size() == out.size() &&
           host_math::apply(f, a.data(), out.data(), static_cast<std::size_t>(a.size()));
  else
    return false;
}

// Functions Eigen runs one element at a time for double (sin, cos, asin,
// erf) or at SSE2 width (exp, log2): vectorized on the host when available.
#define OA_EIGEN_UNARY_VECTOR(NAME)                                                          \
  template <class S>                                                                         \
  inline constexpr auto NAME = oa::annotate<"Eigen::ArrayBase::" #NAME>(                     \
      oa::cpu([](const auto& a, auto& out) {                                                 \
        if (!vector_math(host_math::fn::NAME, a, out)) out = a.NAME();                       \
      }),                                                                                    \
      oa::args(oa::in<contiguous>, oa::out<contiguous, array<S>>),                           \
      oa::device_fn(oa::elementwise(ops::NAME{})));

OA_EIGEN_UNARY_VECTOR(exp)
OA_EIGEN_UNARY_VECTOR(log2)
OA_EIGEN_UNARY_VECTOR(sin)
OA_EIGEN_UNARY_VECTOR(cos)
OA_EIGEN_UNARY_VECTOR(asin)
OA_EIGEN_UNARY_VECTOR(erf)
#undef OA_EIGEN_UNARY_VECTOR

template <class S>
inline constexpr auto negate = oa::annotate<"Eigen::ArrayBase::operator- (unary)">(
    oa::cpu([](const auto& a, auto& out) { out = -a; }), oa::args(oa::in<contiguous>, oa::out<contiguous, array<S>>),
    oa::device_fn(oa::elementwise(ops::negate{})));

// cond.select(a, b) with arrays or scalars for a and b.
template <class S>
inline constexpr auto select_aa = oa::annotate<"Eigen::DenseBase::select">(
    oa::cpu([](const auto& c, const auto& a, const auto& b, auto& out) { out = c.select(a, b); }),
    oa::args(oa::in<contiguous>, oa::in<contiguous>, oa::in<contiguous>, oa::out<contiguous, array<S>>),
    oa::device_fn(oa::elementwise(ops::select{})));
template <class S>
inline constexpr auto select_sa = oa::annotate<"Eigen::DenseBase::select (scalar, array)">(
    oa::cpu([](const auto& c, const S& a, const auto& b, auto& out) { out = c.select(a, b); }),
    oa::args(oa::in<contiguous>, oa::scalar<S>, oa::in<contiguous>, oa::out<contiguous, array<S>>),
    oa::device_fn(oa::elementwise(ops::select{})));
template <class S>
inline constexpr auto select_as = oa::annotate<"Eigen::DenseBase::select (array, scalar)">(
    oa::cpu([](const auto& c, const auto& a, const S& b, auto& out) { out = c.select(a, b); }),
    oa::args(oa::in<contiguous>, oa::in<contiguous>, oa::scalar<S>, oa::out<contiguous, array<S>>),
    oa::device_fn(oa::elementwise(ops::select{})));

// Reductions: a partial per chunk, merged in chunk order. minCoeff and
// maxCoeff are NaN when any coefficient is (Eigen's PropagateNaN per chunk,
// split::min and max across chunks), on every device and chunking.
template <class S>
inline constexpr auto sum = oa::annotate<"Eigen::DenseBase::sum">(
    oa::cpu([](const auto& a) { return S(a.sum()); }), oa::args(oa::in<contiguous>, oa::ret<split::sum, S>),
    oa::device_fn(oa::elementwise(ops::identity{})));
template <class S>
inline constexpr auto min_coeff = oa::annotate<"Eigen::DenseBase::minCoeff">(
    oa::cpu([](const auto& a) { return a.size() ? S(a.template minCoeff<Eigen::PropagateNaN>()) : split::min::identity<S>(); }),
    oa::args(oa::in<contiguous>, oa::ret<split::min, S>), oa::device_fn(oa::elementwise(ops::identity{})));
template <class S>
inline constexpr auto max_coeff = oa::annotate<"Eigen::DenseBase::maxCoeff">(
    oa::cpu([](const auto& a) { return a.size() ? S(a.template maxCoeff<Eigen::PropagateNaN>()) : split::max::identity<S>(); }),
    oa::args(oa::in<contiguous>, oa::ret<split::max, S>), oa::device_fn(oa::elementwise(ops::identity{})));
}  // namespace detail

}  // namespace oa::eigen

namespace oa {

// Operators and functions on lazy Eigen arrays, found by argument-dependent
// lookup exactly where the Eigen originals are.
#define OA_LAZY_BINARY(NAME, SYMBOL, RESULT)                                                              \
  template <class S>                                                                                      \
  lazy<eigen::array<RESULT>> operator SYMBOL(const eigen::lazy_array<S>& a, const eigen::lazy_array<S>& b) { \
    return eigen::detail::NAME##_aa<S, RESULT>(a, b);                                                     \
  }                                                                                                       \
  template <class S>                                                                                      \
  lazy<eigen::array<RESULT>> operator SYMBOL(const eigen::lazy_array<S>& a, std::type_identity_t<S> b) {  \
    return eigen::detail::NAME##_as<S, RESULT>(a, b);                                                     \
  }                                                                                                       \
  template <class S>                                                                                      \
  lazy<eigen::array<RESULT>> operator SYMBOL(std::type_identity_t<S> a, const eigen::lazy_array<S>& b) {  \
    return eigen::detail::NAME##_sa<S, RESULT>(a, b);                                                     \
  }

OA_LAZY_BINARY(add, +, S)
OA_LAZY_BINARY(sub, -, S)
OA_LAZY_BINARY(mul, *, S)
OA_LAZY_BINARY(div, /, S)
OA_LAZY_BINARY(lt, <, bool)
OA_LAZY_BINARY(le, <=, bool)
OA_LAZY_BINARY(gt, >, bool)
OA_LAZY_BINARY(ge, >=, bool)
#undef OA_LAZY_BINARY

template <class S>
lazy<eigen::array<S>> operator-(const eigen::lazy_array<S>& a) {
  return eigen::detail::negate<S>(a);
}

#define OA_LAZY_UNARY(NAME)                                           \
  template <class S>                                                  \
  lazy<eigen::array<S>> NAME(const eigen::lazy_array<S>& a) {         \
    return eigen::detail::NAME<S>(a);                                 \
  }
OA_LAZY_UNARY(exp)
OA_LAZY_UNARY(log)
OA_LAZY_UNARY(log2)
OA_LAZY_UNARY(sqrt)
OA_LAZY_UNARY(sin)
OA_LAZY_UNARY(cos)
OA_LAZY_UNARY(asin)
OA_LAZY_UNARY(erf)
OA_LAZY_UNARY(abs)
OA_LAZY_UNARY(square)
#undef OA_LAZY_UNARY

/// cond.select(a, b) for lazy arrays; a and b may be scalars.
template <class S>
lazy<eigen::array<S>> select(const eigen::lazy_array<bool>& c, const eigen::lazy_array<S>& a,
                             const eigen::lazy_array<S>& b) {
  return eigen::detail::select_aa<S>(c, a, b);
}
template <class S>
lazy<eigen::array<S>> select(const eigen::lazy_array<bool>& c, std::type_identity_t<S> a, const eigen::lazy_array<S>& b) {
  return eigen::detail::select_sa<S>(c, a, b);
}
template <class S>
lazy<eigen::array<S>> select(const eigen::lazy_array<bool>& c, const eigen::lazy_array<S>& a, std::type_identity_t<S> b) {
  return eigen::detail::select_as<S>(c, a, b);
}

template <class S>
lazy<S> sum(const eigen::lazy_array<S>& a) {
  return eigen::detail::sum<S>(a);
}
template <class S>
lazy<S> min_coeff(const eigen::lazy_array<S>& a) {
  return eigen::detail::min_coeff<S>(a);
}
template <class S>
lazy<S> max_coeff(const eigen::lazy_array<S>& a) {
  return eigen::detail::max_coeff<S>(a);
}

}  // namespace oa
