#pragma once
// A 1-D contiguous value cut into blocks of B elements (the last may be
// shorter): one unit per block, so chunks hold whole blocks wherever the
// engine cuts them. For algorithms that work block by block and combine
// per-block results in a second pass (the scans of oa::stl): a chunk's view
// is an indexed_span of its blocks' elements, `first` the index of its first
// element in the value.

#include <algorithm>
#include <cstddef>

#include "oa/split_types/indexed.hpp"

namespace oa::split {

template <std::size_t B>
struct blocks {
  static_assert(B > 0, "oa::split::blocks: a block holds at least one element");
  static constexpr split_kind kind = split_kind::partitioned;
  static constexpr const char* name = "blocks";
  static constexpr std::size_t block = B;

  template <class T>
  static constexpr bool accepts = contiguous::accepts<T>;
  template <class T>
  static constexpr bool makeable = contiguous::makeable<T>;
  template <class T>
  using element = contiguous::element<T>;
  template <class T>
  using view = indexed::view<T>;
  /// The element count: the last block's length.
  template <class T>
  using state = std::size_t;

  template <class T>
  static std::size_t state_of(const T& x) {
    return static_cast<std::size_t>(x.size());
  }
  template <class T>
  static shape shape_of(const T& x) {
    const auto n = static_cast<std::size_t>(x.size());
    return {(n + B - 1) / B, B, sizeof(element<T>)};
  }
  /// Elements [begin B, min(end B, n)).
  template <class T>
  static region host_region(const T& x, range r) {
    const std::size_t eb = sizeof(element<T>), n = static_cast<std::size_t>(x.size());
    const std::size_t from = std::min(r.begin * B, n), to = std::min(r.end * B, n);
    return {detail::bytes_of(x.data()) + from * eb, (to - from) * eb, 1, (to - from) * eb};
  }
  /// A packed buffer holds whole blocks; the chunk is the elements it has
  /// (the last block's tail, past the value's end, is unused).
  template <class T>
  static region packed_region(std::byte* buffer, const shape& s, range r, const std::size_t& n) {
    const std::size_t from = std::min(r.begin * B, n), to = std::min(r.end * B, n);
    const std::size_t w = (to - from) * s.elem_bytes;
    return {buffer, w, 1, w};
  }
  template <class T>
  static view<T> make_view(const region& reg, const shape&, range r, const std::size_t& n) {
    using E = std::remove_pointer_t<decltype(std::declval<view<T>&>().data())>;
    const std::size_t from = std::min(r.begin * B, n), to = std::min(r.end * B, n);
    return view<T>(reinterpret_cast<E*>(reg.data), to - from, from);
  }
  template <class T>
  static T make(const shape&, const std::size_t& n) {
    return detail::contiguous_traits<T>::make(n);
  }
  template <class T>
    requires requires(first_touch f) { detail::contiguous_traits<T>::make(std::size_t{}, f); }
  static T make(const shape&, const std::size_t& n, first_touch touch) {
    return detail::contiguous_traits<T>::make(n, touch);
  }
};

}  // namespace oa::split
