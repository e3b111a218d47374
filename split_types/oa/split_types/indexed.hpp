#pragma once
// Element ranges of a 1-D contiguous value, as `contiguous` cuts them, whose
// chunk views also say where they start in the whole value: for functions
// whose result depends on an element's position (std::iota, the index of
// std::min_element), which a plain span of the chunk cannot tell.

#include <cstddef>
#include <span>

#include "oa/split_types/contiguous.hpp"

namespace oa::split {

/// A chunk of elements, and the index of its first element in the value.
template <class E>
struct indexed_span : std::span<E> {
  std::size_t first = 0;
  indexed_span(E* p, std::size_t n, std::size_t at) : std::span<E>(p, n), first(at) {}
};

struct indexed : contiguous {
  static constexpr const char* name = "indexed";
  template <class T>
  using view = indexed_span<std::remove_pointer_t<decltype(std::declval<contiguous::view<T>&>().data())>>;
  template <class T>
  static view<T> make_view(const region& reg, const shape&, range r) {
    using E = std::remove_pointer_t<decltype(std::declval<view<T>&>().data())>;
    return view<T>(reinterpret_cast<E*>(reg.data), r.size(), r.begin);
  }
};

}  // namespace oa::split
