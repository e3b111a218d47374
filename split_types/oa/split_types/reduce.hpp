#pragma once
// Associative reductions: each chunk yields a partial result and the partials
// are merged in chunk order (so a floating-point result does not depend on
// which device or how many streams ran the chunks, only on the chunk size).
//
// A user-defined reduction is any `Op` with `template <class R> static R
// identity()` and `R operator()(R, R) const`, used as `reduce<Op>`. To reduce
// on a device too it names the oa::ops functor that combines two partials:
// `static constexpr const char* device_op = "add";`, and may name itself in
// messages and reports: `static constexpr const char* name = "norm";`.

#include <algorithm>
#include <limits>
#include <span>

#include "oa/split_types/split.hpp"

namespace oa::split {

namespace ops_detail {
template <class Op>
constexpr const char* name_of() {
  if constexpr (requires { { Op::name } -> std::convertible_to<const char*>; })
    return Op::name;
  else
    return "reduce";
}
}  // namespace ops_detail

template <class Op>
struct reduce {
  static constexpr split_kind kind = split_kind::reduction;
  static constexpr const char* name = ops_detail::name_of<Op>();
  using op = Op;

  template <class R>
  static R identity() {
    return Op::template identity<R>();
  }
  template <class R>
  static R combine(const R& a, const R& b) {
    return Op{}(a, b);
  }
  /// Folds per-chunk partials, in order, into the result.
  template <class R>
  static R merge(std::span<const R> partials) {
    R acc = identity<R>();
    for (const R& p : partials) acc = combine(acc, p);
    return acc;
  }
};

namespace ops_detail {
struct plus {
  static constexpr const char* name = "sum";
  static constexpr const char* device_op = "add";  // the oa::ops functor a kernel combines with
  template <class R>
  static R identity() {
    return R(0);
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    return a + b;
  }
};
// min and max: NaN when any element is NaN (x != x only for NaN), in any
// order of combining, so every device and chunking gives the same result
// (oa::ops::min_nan and max_nan in kernels). Eigen's minCoeff/maxCoeff with
// PropagateNaN computes the same.
struct minimum {
  static constexpr const char* name = "min";
  static constexpr const char* device_op = "min_nan";
  template <class R>
  static R identity() {
    if constexpr (std::numeric_limits<R>::has_infinity) return std::numeric_limits<R>::infinity();
    return std::numeric_limits<R>::max();
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    return a != a ? a : b != b ? b : (b < a ? b : a);
  }
};
struct maximum {
  static constexpr const char* name = "max";
  static constexpr const char* device_op = "max_nan";
  template <class R>
  static R identity() {
    if constexpr (std::numeric_limits<R>::has_infinity) return -std::numeric_limits<R>::infinity();
    return std::numeric_limits<R>::lowest();
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    return a != a ? a : b != b ? b : (a < b ? b : a);
  }
};
struct times {
  static constexpr const char* name = "product";
  static constexpr const char* device_op = "mul";
  template <class R>
  static R identity() {
    return R(1);
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    return a * b;
  }
};
}  // namespace ops_detail

using sum = reduce<ops_detail::plus>;
using product = reduce<ops_detail::times>;
using min = reduce<ops_detail::minimum>;
using max = reduce<ops_detail::maximum>;

}  // namespace oa::split
