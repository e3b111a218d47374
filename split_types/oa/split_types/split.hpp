#pragma once
// What every split type shares: chunk ranges, shapes and the three kinds.
//
// A split type is a policy struct with static member templates over the value
// type T it splits. Partitioned split types provide:
//   accepts<T>                    whether T can be split this way
//   shape_of(const T&)            units, elements per unit, bytes per element
//   host_region(T&, range)        where chunk [begin, end) lies in T's storage
//   make_view<T>(region, shape, range)  a view of a chunk (const T: read-only)
//   make<T>(shape)                uninitialised storage for a result
// Merging partitioned results is concatenation: each chunk is written to its
// own host region, so there is nothing to merge afterwards.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "oa/core/device.hpp"

namespace oa::split {

enum class split_kind { partitioned, broadcast, reduction };

/// Units [begin, end) of a value.
struct range {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const noexcept { return end - begin; }
  friend bool operator==(const range&, const range&) = default;
};

/// The shape of a partitioned value: `units` units (elements, rows or
/// columns) of `inner` elements of `elem_bytes` bytes each.
struct shape {
  std::size_t units = 0;
  std::size_t inner = 1;
  std::size_t elem_bytes = 0;
  std::size_t unit_bytes() const noexcept { return inner * elem_bytes; }
  std::size_t bytes() const noexcept { return units * unit_bytes(); }
  friend bool operator==(const shape&, const shape&) = default;
};

/// Cuts [0, units) into chunks of `chunk_units` (the last may be shorter).
/// Tiles the range exactly; no chunk is empty; zero units give no chunk.
inline std::vector<range> chunks(std::size_t units, std::size_t chunk_units) {
  if (chunk_units == 0) throw std::invalid_argument("oa::split::chunks: chunk_units must be positive");
  std::vector<range> out;
  out.reserve(units / chunk_units + 1);
  for (std::size_t b = 0; b < units; b += chunk_units) out.push_back({b, b + std::min(chunk_units, units - b)});
  return out;
}

/// Cuts [0, units) into `n` chunks as even as possible (sizes differ by at most one).
inline std::vector<range> even_chunks(std::size_t units, std::size_t n) {
  if (n == 0) throw std::invalid_argument("oa::split::even_chunks: n must be positive");
  std::vector<range> out;
  const std::size_t q = units / n, r = units % n;
  std::size_t b = 0;
  for (std::size_t i = 0; i < n && b < units; ++i) {
    const std::size_t len = q + (i < r ? 1 : 0);
    if (len == 0) continue;
    out.push_back({b, b + len});
    b += len;
  }
  return out;
}

namespace detail {
template <class T>
std::byte* bytes_of(const T* p) noexcept {
  return reinterpret_cast<std::byte*>(const_cast<T*>(p));
}
template <class T, class U>
using like_const = std::conditional_t<std::is_const_v<T>, const U, U>;
}  // namespace detail

}  // namespace oa::split
