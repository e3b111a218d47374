#pragma once
// Element-wise device functions written as expressions of oa::ops
// operations, for a library function that is more than one of them:
//
//   oa::device_fn(oa::elementwise([](auto x, auto mean, auto sd) {
//     const auto z = (x - mean) / sd;
//     return exp(-0.5 * z * z) / (sd * 2.5066282746310002);
//   }))
//
// The function is called once, when a call is recorded, with one placeholder
// per operand (the in and mut arguments, an oa::overwrite's excepted, and
// the scalars, in spec order); the operators and functions below (found by
// argument-dependent lookup: write `exp(z)`, not `std::exp(z)`) build a tree
// of oa::ops operations over the placeholders and the constants it meets. That tree is the device function:
// the host and emulated devices evaluate it element by element with the
// oa::ops functors, and the engine writes it into the stage's fused kernel,
// one statement per operation, temporaries in registers, fused with the
// stage's other element-wise calls. Written with the operations and in the
// order of the CPU function, it computes the same bits on the host; a GPU's
// math functions (exp, erf, ...) and its fused multiply-adds differ in the
// last bits.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "oa/core/fusion.hpp"
#include "oa/core/graph.hpp"
#include "oa/core/ops.hpp"

namespace oa::expr {

/// The I-th operand of the device function.
template <std::size_t I>
struct arg {};
/// A number the expression uses: a literal of the kernel.
template <class T>
struct constant {
  T value;
};
/// An oa::ops operation on sub-expressions.
template <class Op, class... E>
struct node {
  std::tuple<E...> in;
};

template <class E>
struct is_expression : std::false_type {};
template <std::size_t I>
struct is_expression<arg<I>> : std::true_type {};
template <class T>
struct is_expression<constant<T>> : std::true_type {};
template <class Op, class... E>
struct is_expression<node<Op, E...>> : std::true_type {};

template <class E>
concept expression = is_expression<std::remove_cvref_t<E>>::value;
/// What an operation takes: an expression, or a number (bool, integers,
/// float, double: what a kernel's literal can hold).
template <class E>
concept operand = expression<E> || (std::is_arithmetic_v<std::remove_cvref_t<E>> &&
                                     !std::is_same_v<std::remove_cvref_t<E>, long double>);
/// Operands of an operation of which at least one is an expression (numbers
/// alone are C++'s).
template <class... E>
concept operands = (operand<E> && ...) && (expression<E> || ...);

/// An operand as a node: an expression as it is, a number as a constant.
template <operand E>
constexpr auto lift(E e) {
  if constexpr (expression<E>)
    return e;
  else
    return constant<std::remove_cvref_t<E>>{e};
}

/// The operation Op (an oa::ops functor with a `name`) on the operands.
template <class Op, operand... E>
constexpr node<Op, decltype(lift(std::declval<E>()))...> apply(E... e) {
  return {{lift(e)...}};
}

#define OA_EXPR_BINARY_OPERATOR(SYMBOL, OP)          \
  template <class A, class B>                       \
    requires operands<A, B>                         \
  constexpr auto operator SYMBOL(A a, B b) {        \
    return apply<ops::OP>(a, b);                    \
  }
#define OA_EXPR_BINARY(NAME, OP)                     \
  template <class A, class B>                       \
    requires operands<A, B>                         \
  constexpr auto NAME(A a, B b) {                   \
    return apply<ops::OP>(a, b);                    \
  }
#define OA_EXPR_UNARY(NAME)                          \
  template <expression A>                           \
  constexpr auto NAME(A a) {                        \
    return apply<ops::NAME>(a);                     \
  }

OA_EXPR_BINARY_OPERATOR(+, add)
OA_EXPR_BINARY_OPERATOR(-, sub)
OA_EXPR_BINARY_OPERATOR(*, mul)
OA_EXPR_BINARY_OPERATOR(/, div)
OA_EXPR_BINARY_OPERATOR(<, less)
OA_EXPR_BINARY_OPERATOR(<=, less_equal)
OA_EXPR_BINARY_OPERATOR(>, greater)
OA_EXPR_BINARY_OPERATOR(>=, greater_equal)
OA_EXPR_BINARY_OPERATOR(==, equal_to)
OA_EXPR_BINARY_OPERATOR(!=, not_equal_to)
OA_EXPR_BINARY(pow, pow)
// oa::ops::min and max: std::min and std::max (with a NaN or equal
// operands, the first); select says otherwise.
OA_EXPR_BINARY(min, min)
OA_EXPR_BINARY(max, max)
OA_EXPR_UNARY(exp)
OA_EXPR_UNARY(log)
OA_EXPR_UNARY(log2)
OA_EXPR_UNARY(sqrt)
OA_EXPR_UNARY(sin)
OA_EXPR_UNARY(cos)
OA_EXPR_UNARY(tan)
OA_EXPR_UNARY(asin)
OA_EXPR_UNARY(acos)
OA_EXPR_UNARY(atan)
OA_EXPR_UNARY(tanh)
OA_EXPR_UNARY(erf)
OA_EXPR_UNARY(abs)
OA_EXPR_UNARY(square)

#undef OA_EXPR_BINARY_OPERATOR
#undef OA_EXPR_BINARY
#undef OA_EXPR_UNARY

template <expression A>
constexpr auto operator-(A a) {
  return apply<ops::negate>(a);
}
/// cond ? a : b, element by element.
template <class C, class A, class B>
  requires operands<C, A, B>
constexpr auto select(C cond, A a, B b) {
  return apply<ops::select>(cond, a, b);
}

// ---- evaluation: one element's value, on the host ----------------------------------

template <std::size_t I, class... V>
constexpr auto eval(arg<I>, const V&... v) {
  return std::get<I>(std::tie(v...));
}
template <class T, class... V>
constexpr T eval(const constant<T>& c, const V&...) {
  return c.value;
}
template <class Op, class... E, class... V>
constexpr auto eval(const node<Op, E...>& n, const V&... v) {
  return std::apply([&](const auto&... e) { return Op{}(eval(e, v...)...); }, n.in);
}

/// An expression as a functor over its operands' values: the device
/// function's host twin.
template <class E>
struct function {
  E e;
  template <class... V>
  constexpr auto operator()(const V&... v) const {
    return eval(e, v...);
  }
};

/// What `f` builds from N placeholders.
template <std::size_t N, class F>
constexpr auto trace(const F& f) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto e = lift(f(arg<I>{}...));
    return function<decltype(e)>{e};
  }(std::make_index_sequence<N>{});
}

/// Whether `f`, called with N placeholders, builds an expression.
template <std::size_t N, class F>
constexpr bool traceable = [] {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    if constexpr (std::is_invocable_v<const F&, arg<I>...>)
      return operand<std::invoke_result_t<const F&, arg<I>...>>;
    else
      return false;
  }(std::make_index_sequence<N>{});
}();

// ---- description: the steps a kernel generator writes out --------------------------

namespace detail {

/// An input of a step: operand k (k >= 0) or step s (-1 - s).
inline int step_input(std::size_t s) { return -1 - static_cast<int>(s); }

/// Adds a constant operand, or finds the same literal already there.
template <class T>
int describe(oa::detail::elementwise_desc& d, const constant<T>& c) {
  oa::detail::elementwise_desc probe;
  fusion::describe_scalar(probe, c.value);
  const auto& o = probe.operands.back();
  for (std::size_t k = 0; k < d.operands.size(); ++k)
    if (d.operands[k].arg < 0 && d.operands[k].scalar < 0 && d.operands[k].literal == o.literal &&
        d.operands[k].type == o.type)
      return static_cast<int>(k);
  d.operands.push_back(o);
  return static_cast<int>(d.operands.size() - 1);
}
template <std::size_t I>
int describe(oa::detail::elementwise_desc&, arg<I>) {
  return static_cast<int>(I);
}
/// Adds the node's step after its inputs' (a step already there, the same
/// operation on the same inputs, is computed once).
template <class Op, class... E>
int describe(oa::detail::elementwise_desc& d, const node<Op, E...>& n) {
  oa::detail::elementwise_desc::step s{Op::name, {}};
  std::apply([&](const auto&... e) { (s.inputs.push_back(describe(d, e)), ...); }, n.in);
  for (std::size_t k = 0; k < d.steps.size(); ++k)
    if (d.steps[k].op == s.op && d.steps[k].inputs == s.inputs) return step_input(k);
  d.steps.push_back(std::move(s));
  return step_input(d.steps.size() - 1);
}

}  // namespace detail

/// Writes the expression into `d` as steps, after the call's own operands
/// (which the placeholders name): its value is the last step's.
template <class E>
void describe(oa::detail::elementwise_desc& d, const function<E>& f) {
  const int root = detail::describe(d, f.e);
  if (root >= 0) d.steps.push_back({ops::identity::name, {root}});  // a placeholder or a constant alone
}

}  // namespace oa::expr
