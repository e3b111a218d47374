#pragma once
// Dense Eigen matrices and 2-D arrays split into blocks of rows or of columns,
// in either storage order. A chunk of a column-major matrix's rows is strided
// on the host (one region row per column); on the device it is packed, so the
// view's outer stride differs between the two and comes from the region.

#include <Eigen/Core>

#include "oa/split_types/split.hpp"

namespace oa::split {

namespace detail {
template <class T>
struct dense_traits {
  static constexpr bool ok = false;
};
template <class S, int O, int MR, int MC>
struct dense_traits<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, O, MR, MC>> {
  static constexpr bool ok = true;
  using scalar = S;
  using plain = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, O, MR, MC>;
};
template <class S, int O, int MR, int MC>
struct dense_traits<Eigen::Array<S, Eigen::Dynamic, Eigen::Dynamic, O, MR, MC>> {
  static constexpr bool ok = true;
  using scalar = S;
  using plain = Eigen::Array<S, Eigen::Dynamic, Eigen::Dynamic, O, MR, MC>;
};

/// Blocks along one dimension of a dense matrix. `ByRows`: units are rows.
template <bool ByRows>
struct dense_blocks {
  static constexpr split_kind kind = split_kind::partitioned;
  static constexpr const char* name = ByRows ? "rows" : "cols";

  template <class T>
  static constexpr bool accepts = dense_traits<std::remove_cvref_t<T>>::ok;
  template <class T>
  static constexpr bool makeable = accepts<T>;
  template <class T>
  using element = typename dense_traits<std::remove_cvref_t<T>>::scalar;
  template <class T>
  using view = Eigen::Map<like_const<std::remove_reference_t<T>, typename dense_traits<std::remove_cvref_t<T>>::plain>,
                          0, Eigen::OuterStride<>>;

  template <class T>
  static shape shape_of(const T& x) {
    const auto units = static_cast<std::size_t>(ByRows ? x.rows() : x.cols());
    const auto inner = static_cast<std::size_t>(ByRows ? x.cols() : x.rows());
    return {units, inner, sizeof(element<T>)};
  }

  // Whether a block of units is one contiguous run in storage: row blocks of a
  // row-major matrix, column blocks of a column-major one.
  template <class T>
  static constexpr bool units_are_outer = ByRows == bool(std::remove_cvref_t<T>::IsRowMajor);

  template <class T>
  static region host_region(const T& x, range r) {
    const std::size_t eb = sizeof(element<T>);
    const shape s = shape_of(x);
    // Units without elements have no storage to point into: keep the shape,
    // with no data pointer (no arithmetic on a null pointer).
    std::byte* base = s.inner == 0 ? nullptr : bytes_of(x.data());
    if constexpr (units_are_outer<T>) {
      const std::size_t w = r.size() * s.inner * eb;
      return {base ? base + r.begin * s.inner * eb : nullptr, w, 1, w};
    } else {
      return {base ? base + r.begin * eb : nullptr, r.size() * eb, s.inner, s.units * eb};
    }
  }

  /// Where chunk r lies in a packed device buffer: the host region's shape, packed.
  template <class T>
  static region packed_region(std::byte* buffer, const shape& s, range r) {
    if constexpr (units_are_outer<T>) {
      const std::size_t w = r.size() * s.unit_bytes();
      return {buffer, w, 1, w};
    } else {
      const std::size_t w = r.size() * s.elem_bytes;
      return {buffer, w, s.inner, w};
    }
  }
  template <class T>
  static view<T> make_view(const region& reg, const shape& s, range r) {
    using E = like_const<std::remove_reference_t<T>, element<T>>;
    const auto n = static_cast<Eigen::Index>(r.size()), inner = static_cast<Eigen::Index>(s.inner);
    const Eigen::Index rows = ByRows ? n : inner, cols = ByRows ? inner : n;
    Eigen::Index outer;
    if constexpr (units_are_outer<T>)
      outer = inner;  // each unit is one outer vector, packed
    else
      outer = reg.rows <= 1 ? n : static_cast<Eigen::Index>(reg.pitch / s.elem_bytes);
    return view<T>(reinterpret_cast<E*>(reg.data), rows, cols, Eigen::OuterStride<>(outer));
  }

  template <class T>
  static T make(const shape& s) {
    const auto u = static_cast<Eigen::Index>(s.units), i = static_cast<Eigen::Index>(s.inner);
    return ByRows ? T(u, i) : T(i, u);
  }
};
}  // namespace detail

/// Blocks of rows of a dense matrix (units: rows).
struct rows : detail::dense_blocks<true> {};
/// Blocks of columns of a dense matrix (units: columns).
struct cols : detail::dense_blocks<false> {};

}  // namespace oa::split
