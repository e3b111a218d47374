#pragma once
// The standard algorithms over distributed vectors: each rank runs
// oa::stl's over its block through its own runtime (out of core on its
// devices), and what crosses ranks is what the split types merge: a
// reduction's partials, combined in rank order on every rank (so every rank
// gets the same bits, as chunks' partials are merged in order on one), and
// a scan's block totals, folded into each rank's starting value.
// Element-wise calls are local and lazy; reductions, scans and gathers are
// collectives: every rank calls them, in the same order.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "oa/annotations/stl.hpp"
#include "oa/dist/vector.hpp"

namespace oa::dist {

namespace detail {

/// Two distributed values an element-wise call takes together (vectors or
/// arrays): over one communicator and laid out alike, else an
/// oa::invalid_argument naming `arg` (the second, `first` the other).
template <class X, class Y>
void alike(const char* call, const char* arg, const std::string& first, const X& a, const Y& b) {
  if (&a.comm() != &b.comm())
    throw oa::invalid_argument(call, arg,
                               "made over another communicator than the " + first +
                                   ": element-wise calls need the same ranks");
  if (a.layout() != b.layout())
    throw oa::invalid_argument(call, arg,
                               "laid out as " + b.layout().describe() + ", the " + first + " as " +
                                   a.layout().describe() + ": element-wise calls need the same layout");
}

template <class A, class B>
void same_layout(const char* call, const vector<A>& a, const vector<B>& b) {
  alike(call, "second range", "first", a, b);
}

/// A vector of the lazy block `local` laid out as `like`.
template <class Like, class L>
auto laid_out_as(const vector<Like>& like, L&& local) {
  using V = typename std::remove_cvref_t<L>::value_type;  // the block's std::vector
  return vector<typename V::value_type>(like.layout(), std::forward<L>(local), like.comm());
}

/// The reduction's identity for `Op` (oa::stl's: std::plus, std::multiplies,
/// oa::ops::min/max, or the operation's own).
template <class Op, class T>
T identity() {
  return oa::stl::detail::reduction_t<Op>::template identity<T>();
}

/// op folded over the partials of ranks [0, upto) that hold elements, in
/// rank order, after `start` (when given), as oa::stl's reductions combine
/// their chunks: oa::ops::min and max keep a NaN wherever it is (a rank's
/// NaN partial is the result, as on one process).
template <class T, class Op>
std::optional<T> fold(std::optional<T> start, const std::vector<T>& partials, const layout& l, int upto, const Op& op) {
  using R = oa::stl::detail::reduction_t<Op>;
  const auto combine = [&](const T& a, const T& b) {
    if constexpr (std::is_same_v<R, std::remove_cvref_t<Op>>)
      return T(op(a, b));  // the caller's own operation
    else
      return T(R{}(a, b));
  };
  for (int r = 0; r < upto; ++r) {
    if (l.count(r) == 0) continue;
    const T& p = partials[static_cast<std::size_t>(r)];
    start = start ? combine(*start, p) : p;
  }
  return start;
}

/// Every rank's block reduced by `op` (from its identity), in rank order.
template <class U, class T, class Op>
std::vector<U> totals(const char* call, const vector<T>& x, const Op& op) {
  return each_rank<U>(
      x.comm(), call,
      [&] {
        (void)x.block(call);
        return U(oa::stl::reduce(x.local(), identity<Op, U>(), op).get());
      },
      x.layout().key());
}

/// Every rank's partial (its block reduced by `local`), combined in rank
/// order after init.
template <class T, class Op, class Like, class F>
T combine(const char* call, const vector<Like>& x, T init, const Op& op, F&& local) {
  const auto partials = each_rank<T>(
      x.comm(), call,
      [&] {
        (void)x.block(call);
        return T(local().get());
      },
      x.layout().key());
  return *fold<T>(std::optional<T>(init), partials, x.layout(), x.layout().ranks(), op);
}

}  // namespace detail

/// std::transform over a distributed vector: each rank's block, lazily.
template <class T, class F>
auto transform(const vector<T>& x, F f) {
  return detail::laid_out_as(x, oa::stl::transform(x.local(), f));
}

/// std::transform of two distributed vectors laid out alike.
template <class A, class B, class F>
auto transform(const vector<A>& a, const vector<B>& b, F f) {
  detail::same_layout("oa::dist::transform", a, b);
  return detail::laid_out_as(a, oa::stl::transform(a.local(), b.local(), f));
}

/// std::reduce over every rank's elements: the same value on every rank.
template <class T, class U, class Op = std::plus<>>
U reduce(const vector<T>& x, U init, Op op = {}) {
  return detail::combine<U>("oa::dist::reduce", x, init, op,
                            [&] { return oa::stl::reduce(x.local(), detail::identity<Op, U>(), op); });
}

/// std::transform_reduce(first, last, init, reduce_op, transform_op).
template <class T, class U, class Op, class F>
U transform_reduce(const vector<T>& x, U init, Op reduce_op, F transform_op) {
  return detail::combine<U>("oa::dist::transform_reduce", x, init, reduce_op, [&] {
    return oa::stl::transform_reduce(x.local(), detail::identity<Op, U>(), reduce_op, transform_op);
  });
}

/// std::transform_reduce(first1, last1, first2, init, reduce_op, transform_op).
template <class A, class B, class U, class Op, class F>
U transform_reduce(const vector<A>& a, const vector<B>& b, U init, Op reduce_op, F transform_op) {
  detail::same_layout("oa::dist::transform_reduce", a, b);
  return detail::combine<U>("oa::dist::transform_reduce", a, init, reduce_op, [&] {
    return oa::stl::transform_reduce(a.local(), b.local(), detail::identity<Op, U>(), reduce_op, transform_op);
  });
}

/// std::transform_reduce(first1, last1, first2, init): the sum of products.
template <class A, class B, class U>
U transform_reduce(const vector<A>& a, const vector<B>& b, U init) {
  return oa::dist::transform_reduce(a, b, init, std::plus<>{}, std::multiplies<>{});
}

/// std::count_if over every rank's elements.
template <class T, class P>
std::int64_t count_if(const vector<T>& x, P p) {
  return detail::combine<std::int64_t>("oa::dist::count_if", x, std::int64_t{0}, std::plus<>{},
                                       [&] { return oa::stl::count_if(x.local(), p); });
}

/// std::inclusive_scan: each rank scans its block starting from the
/// reduction of the blocks before it (their totals exchanged, folded in rank
/// order).
template <class T, class Op = std::plus<>>
vector<T> inclusive_scan(const vector<T>& x, Op op = {}) {
  const auto totals = detail::totals<T>("oa::dist::inclusive_scan", x, op);
  const std::optional<T> before = detail::fold<T>(std::nullopt, totals, x.layout(), x.comm().rank(), op);
  if (!before) return detail::laid_out_as(x, lazy<std::vector<T>>(oa::stl::inclusive_scan(x.local(), op)));
  return detail::laid_out_as(x, oa::stl::inclusive_scan(x.local(), op, *before));
}

/// std::exclusive_scan: each rank's block starts from init folded with the
/// totals of the blocks before it.
template <class T, class U, class Op = std::plus<>>
vector<U> exclusive_scan(const vector<T>& x, U init, Op op = {}) {
  static_assert(std::is_same_v<T, U>,
                "oa::dist::exclusive_scan: init has the elements' type (as oa::stl::exclusive_scan's)");
  const auto totals = detail::totals<U>("oa::dist::exclusive_scan", x, op);
  const U start = *detail::fold<U>(std::optional<U>(init), totals, x.layout(), x.comm().rank(), op);
  return detail::laid_out_as(x, oa::stl::exclusive_scan(x.local(), start, op));
}

}  // namespace oa::dist
