#pragma once
// 1-D contiguous values split into element ranges: std::vector, std::span
// (which also covers pointer + length) and Eigen vectors and 1-D arrays.

#include <Eigen/Core>
#include <span>
#include <vector>

#include "oa/split_types/split.hpp"

namespace oa::split {

namespace detail {
template <class T>
struct contiguous_traits {
  static constexpr bool ok = false;
};

template <class E, class A>
struct contiguous_traits<std::vector<E, A>> {
  static constexpr bool ok = std::is_trivially_copyable_v<E> && !std::is_same_v<E, bool>;
  using element = E;
  template <class Cv>
  using view = std::span<like_const<Cv, E>>;
  static std::vector<E, A> make(std::size_t n) { return std::vector<E, A>(n); }
  // Its constructor zeroes it on the calling thread: the hook sees the
  // storage first (the engine faults its pages in on several threads).
  static std::vector<E, A> make(std::size_t n, first_touch touch) {
    std::vector<E, A> v;
    v.reserve(n);
    touch(v.data(), n * sizeof(E));
    v.resize(n);
    return v;
  }
  static constexpr bool makeable = true;
};

template <class E, std::size_t X>
struct contiguous_traits<std::span<E, X>> {
  static constexpr bool ok = X == std::dynamic_extent && std::is_trivially_copyable_v<E>;
  using element = std::remove_const_t<E>;
  template <class Cv>
  using view = std::span<std::conditional_t<std::is_const_v<E>, E, like_const<Cv, E>>>;
  static constexpr bool makeable = false;
};

template <class S, int R, int C, int O, int MR, int MC>
struct eigen_vector_traits {
  static constexpr bool ok = (R == 1 || C == 1) && (R == Eigen::Dynamic || C == Eigen::Dynamic);
  using element = S;
};

template <class S, int R, int C, int O, int MR, int MC>
struct contiguous_traits<Eigen::Matrix<S, R, C, O, MR, MC>> : eigen_vector_traits<S, R, C, O, MR, MC> {
  using plain = Eigen::Matrix<S, R, C, O, MR, MC>;
  template <class Cv>
  using view = Eigen::Map<like_const<Cv, plain>>;
  static plain make(std::size_t n) { return plain(static_cast<Eigen::Index>(n)); }
  static constexpr bool makeable = true;
};

template <class S, int R, int C, int O, int MR, int MC>
struct contiguous_traits<Eigen::Array<S, R, C, O, MR, MC>> : eigen_vector_traits<S, R, C, O, MR, MC> {
  using plain = Eigen::Array<S, R, C, O, MR, MC>;
  template <class Cv>
  using view = Eigen::Map<like_const<Cv, plain>>;
  static plain make(std::size_t n) { return plain(static_cast<Eigen::Index>(n)); }
  static constexpr bool makeable = true;
};
}  // namespace detail

/// Element ranges of a 1-D contiguous value.
struct contiguous {
  static constexpr split_kind kind = split_kind::partitioned;
  static constexpr const char* name = "contiguous";

  template <class T>
  static constexpr bool accepts = detail::contiguous_traits<std::remove_cvref_t<T>>::ok;
  template <class T>
  static constexpr bool makeable = detail::contiguous_traits<std::remove_cvref_t<T>>::makeable;
  template <class T>
  using element = typename detail::contiguous_traits<std::remove_cvref_t<T>>::element;
  /// View of a chunk; read-only when T is const.
  template <class T>
  using view = typename detail::contiguous_traits<std::remove_cvref_t<T>>::template view<std::remove_reference_t<T>>;

  template <class T>
  static shape shape_of(const T& x) {
    return {static_cast<std::size_t>(x.size()), 1, sizeof(element<T>)};
  }
  template <class T>
  static region host_region(const T& x, range r) {
    const std::size_t eb = sizeof(element<T>);
    return {detail::bytes_of(x.data()) + r.begin * eb, r.size() * eb, 1, r.size() * eb};
  }
  /// Where chunk r lies in a packed device buffer.
  static region packed_region(std::byte* buffer, const shape& s, range r) {
    const std::size_t w = r.size() * s.unit_bytes();
    return {buffer, w, 1, w};
  }
  template <class T>
  static view<T> make_view(const region& reg, const shape&, range r) {
    using E = std::remove_pointer_t<decltype(std::declval<view<T>&>().data())>;
    E* p = reinterpret_cast<E*>(reg.data);
    if constexpr (requires { typename view<T>::element_type; })
      return view<T>(p, r.size());  // std::span
    else
      return view<T>(p, static_cast<Eigen::Index>(r.size()));
  }
  template <class T>
  static T make(const shape& s) {
    return detail::contiguous_traits<T>::make(s.units);
  }
  template <class T>
    requires requires(first_touch f) { detail::contiguous_traits<T>::make(std::size_t{}, f); }
  static T make(const shape& s, first_touch touch) {
    return detail::contiguous_traits<T>::make(s.units, touch);
  }
};

}  // namespace oa::split
