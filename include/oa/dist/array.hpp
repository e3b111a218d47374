#pragma once
// oa::dist::array<S>: a distributed Eigen 1-D array. Each rank holds its
// block as an oa::lazy<Eigen::Array<S, Dynamic, 1>>, and the operators and
// functions of oa's lazy Eigen arrays apply block by block, so a workload
// written over an array type `A` (plain Eigen, oa's lazy arrays) runs over
// the ranks with A = oa::dist::array<double>: element-wise statements are
// local and lazy, and sum, min_coeff and max_coeff are collectives that
// return the same value on every rank.

#include <Eigen/Core>
#include <string>
#include <type_traits>
#include <utility>

#include "oa/annotations/eigen_array.hpp"
#include "oa/dist/algorithms.hpp"

namespace oa::dist {

template <class S>
class array {
 public:
  using scalar = S;
  using block_type = Eigen::Array<S, Eigen::Dynamic, 1>;
  using local_type = oa::lazy<block_type>;

  /// An array with no layout yet, to be assigned (as `A out;` in a workload).
  array() = default;
  /// Rank c.rank()'s block `local` of an array laid out as `l`.
  array(dist::layout l, local_type local, communicator& c = world())
      : layout_(std::move(l)), local_(std::move(local)), comm_(&c) {
    if (layout_.ranks() != c.size())
      throw oa::invalid_argument("oa::dist::array", "layout",
                                 layout_.describe() + " for a communicator of " + std::to_string(c.size()) + " ranks");
  }

  const dist::layout& layout() const noexcept { return layout_; }
  communicator& comm() const { return *comm_; }
  std::size_t size() const noexcept { return layout_.total(); }
  std::size_t offset() const { return layout_.offset(comm_->rank()); }
  /// This rank's block, lazy: reading it gathers nothing.
  const local_type& local() const noexcept { return local_; }
  bool valid() const noexcept { return comm_ != nullptr; }

  /// The whole array on every rank (a collective).
  block_type gather() const {
    const auto parts = comm_->exchange(
        "oa::dist::array::gather",
        [&] {
      const block_type& mine = local_.get();
      if (static_cast<std::size_t>(mine.size()) != layout_.count(comm_->rank()))
        throw oa::error("oa::dist::array::gather: this rank's block holds " + std::to_string(mine.size()) +
                        " elements, its layout " + std::to_string(layout_.count(comm_->rank())));
      return detail::to_bytes(mine.data(), static_cast<std::size_t>(mine.size()));
        },
        layout_.key());
    block_type all(static_cast<Eigen::Index>(layout_.total()));
    Eigen::Index at = 0;
    for (const auto& p : parts) {
      const auto block = detail::from_bytes<S>(p);
      for (const S& v : block) all[at++] = v;
    }
    return all;
  }

 private:
  dist::layout layout_;
  local_type local_;
  communicator* comm_ = nullptr;
};

/// An array of n elements laid out evenly, each rank computing its block:
/// element i is f(i) (i the global index). Not a collective.
template <class S, class F>
array<S> generate_array(std::size_t n, F f, communicator& c = world()) {
  dist::layout l = layout::even(n, c.size());
  typename array<S>::block_type b(static_cast<Eigen::Index>(l.count(c.rank())));
  for (Eigen::Index i = 0; i < b.size(); ++i) b[i] = static_cast<S>(f(l.offset(c.rank()) + static_cast<std::size_t>(i)));
  return array<S>(std::move(l), oa::hold(std::move(b)), c);
}

namespace detail {

template <class S>
const array<S>& usable(const char* call, const char* argument, const array<S>& a) {
  if (!a.valid()) throw oa::invalid_argument(call, argument, "an array with no layout (default-constructed)");
  return a;
}

template <class A, class B>
void laid_out_alike(const char* call, const array<A>& a, const array<B>& b) {
  usable(call, "left operand", a);
  usable(call, "right operand", b);
  alike(call, "right operand", "left", a, b);
}

/// The array of the lazy block `local`, laid out as `like`.
template <class Like, class L>
auto array_of(const array<Like>& like, L&& local) {
  using block = typename std::remove_cvref_t<L>::value_type;
  return array<typename block::Scalar>(like.layout(), std::forward<L>(local), like.comm());
}

}  // namespace detail

#define OA_DIST_BINARY(SYMBOL, CALL)                                                                   \
  template <class S>                                                                                  \
  auto operator SYMBOL(const array<S>& a, const array<S>& b) {                                        \
    detail::laid_out_alike(CALL, a, b);                                                               \
    return detail::array_of(a, a.local() SYMBOL b.local());                                           \
  }                                                                                                   \
  template <class S>                                                                                  \
  auto operator SYMBOL(const array<S>& a, std::type_identity_t<S> b) {                                \
    return detail::array_of(a, detail::usable(CALL, "left operand", a).local() SYMBOL b);             \
  }                                                                                                   \
  template <class S>                                                                                  \
  auto operator SYMBOL(std::type_identity_t<S> a, const array<S>& b) {                                \
    return detail::array_of(b, a SYMBOL detail::usable(CALL, "right operand", b).local());            \
  }
OA_DIST_BINARY(+, "oa::dist::array operator+")
OA_DIST_BINARY(-, "oa::dist::array operator-")
OA_DIST_BINARY(*, "oa::dist::array operator*")
OA_DIST_BINARY(/, "oa::dist::array operator/")
OA_DIST_BINARY(<, "oa::dist::array operator<")
OA_DIST_BINARY(<=, "oa::dist::array operator<=")
OA_DIST_BINARY(>, "oa::dist::array operator>")
OA_DIST_BINARY(>=, "oa::dist::array operator>=")
#undef OA_DIST_BINARY

template <class S>
array<S> operator-(const array<S>& a) {
  return detail::array_of(a, -detail::usable("oa::dist::array operator-", "operand", a).local());
}

#define OA_DIST_UNARY(NAME)                                                                     \
  template <class S>                                                                           \
  array<S> NAME(const array<S>& a) {                                                           \
    return detail::array_of(a, oa::NAME(detail::usable("oa::dist::" #NAME, "a", a).local()));  \
  }
OA_DIST_UNARY(exp)
OA_DIST_UNARY(log)
OA_DIST_UNARY(log2)
OA_DIST_UNARY(sqrt)
OA_DIST_UNARY(sin)
OA_DIST_UNARY(cos)
OA_DIST_UNARY(asin)
OA_DIST_UNARY(erf)
OA_DIST_UNARY(abs)
OA_DIST_UNARY(square)
#undef OA_DIST_UNARY

/// cond.select(a, b), a and b arrays or scalars.
template <class S>
array<S> select(const array<bool>& c, const array<S>& a, const array<S>& b) {
  detail::laid_out_alike("oa::dist::select", c, a);
  detail::laid_out_alike("oa::dist::select", a, b);
  return detail::array_of(a, oa::select(c.local(), a.local(), b.local()));
}
template <class S>
array<S> select(const array<bool>& c, std::type_identity_t<S> a, const array<S>& b) {
  detail::laid_out_alike("oa::dist::select", c, b);
  return detail::array_of(b, oa::select(c.local(), a, b.local()));
}
template <class S>
array<S> select(const array<bool>& c, const array<S>& a, std::type_identity_t<S> b) {
  detail::laid_out_alike("oa::dist::select", c, a);
  return detail::array_of(a, oa::select(c.local(), a.local(), b));
}

/// The sum of every rank's elements (a collective: partials combined in
/// rank order, the same bits on every rank).
template <class S>
S sum(const array<S>& a) {
  detail::usable("oa::dist::sum", "a", a);
  const auto partials =
      each_rank<S>(a.comm(), "oa::dist::sum", [&] { return oa::sum(a.local()).get(); }, a.layout().key());
  S acc = 0;
  for (int r = 0; r < a.layout().ranks(); ++r)
    if (a.layout().count(r) > 0) acc += partials[static_cast<std::size_t>(r)];
  return acc;
}

namespace detail {
/// The smallest (Min) or largest element over every rank.
template <bool Min, class S>
S extreme(const char* call, const array<S>& a) {
  usable(call, "a", a);
  const auto partials = each_rank<S>(
      a.comm(), call, [&] { return (Min ? oa::min_coeff(a.local()) : oa::max_coeff(a.local())).get(); },
      a.layout().key());
  // Combined as oa's reductions combine chunks: a NaN on any rank is the result.
  S acc = partials.front();
  for (const S& p : partials) acc = Min ? split::ops_detail::minimum{}(acc, p) : split::ops_detail::maximum{}(acc, p);
  return acc;
}
}  // namespace detail

/// The smallest (largest) element over every rank; of an empty array, what
/// oa's lazy arrays give for an empty one (a collective).
template <class S>
S min_coeff(const array<S>& a) {
  return detail::extreme<true>("oa::dist::min_coeff", a);
}
template <class S>
S max_coeff(const array<S>& a) {
  return detail::extreme<false>("oa::dist::max_coeff", a);
}

}  // namespace oa::dist
