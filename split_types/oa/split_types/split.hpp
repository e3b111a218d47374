#pragma once
// What every split type shares: chunk ranges, shapes, the three kinds, and the
// contract a split type meets (the concepts at the end of this file, checked
// where an annotation is declared, one requirement at a time).
//
// A split type is a policy struct with static members, most of them templates
// over the value type T it splits. Every split type has
//   kind                          split_kind::partitioned, broadcast or reduction
//   name                          a const char* for messages and reports
// Partitioned split types (the value is cut into chunks of units) also have
//   accepts<T>                    bool: whether T can be split this way
//   makeable<T>                   bool: whether make<T> can create a T
//   element<T>                    the type of one element (trivially copyable)
//   view<T>, view<const T>        a chunk's view, writable / read-only
//   shape_of(const T&)            -> shape: units, elements per unit, bytes per element
//   host_region(const T&, range)  -> region: where chunk [begin, end) lies in T's storage
//   packed_region(std::byte*, const shape&, range)  (or packed_region<T>(...), or for values with
//                                 state packed_region<T>(..., const state<T>&))
//                                 -> region: the chunk packed in a device buffer
//   make_view<T>(const region&, const shape&, range)  -> view<T> (and for const T)
//   make<T>(const shape&)         -> T: uninitialised storage for a result (out specs)
//   make<T>(const shape&, first_touch)  optional, for a T whose constructor fills it
//                                 (std::vector zeroes it): hands the storage it allocated
//                                 to the hook before filling it (the engine's hook faults
//                                 its pages in on several threads)
// A value with state that is not split (a name, a unit, a calibration) says
// so with `state<T>`, and then the state travels with it instead:
//   state<T>                      the unsplit state (a copyable type)
//   state_of(const T&)            -> state<T>: read when a call is recorded
//   make_view<T>(region, shape, range, const state<T>&)  -> view<T>: every chunk's
//                                 view sees the state (replaces the 3-argument form)
//   make<T>(const shape&, const state<T>&)  -> T: a result carrying a prototype's
//                                 state (replaces make<T>(shape) for out specs)
//   result_state<R>(const P&)     optional: a result's state from the state P of
//                                 the argument it is made from; without it the
//                                 argument's state is converted to state<R>
//   result_state<R>()             optional: a result's state when no argument has one
// An out result takes the state of the first split argument that has one.
// Only CPU functions and host twins see state: device kernels (generated
// from element-wise functors) see element data alone, so a call whose result
// depends on the state must not name a device function.
// Chunks as the library's own type: a view may be an object that holds a copy
// of the chunk (a library type that owns its storage: a Series with a
// std::vector). Such a split type has
//   store(const V&, const region&, const shape&, range)
//                                 writes a chunk object V (a view, or what a
//                                 function returned) into the chunk's region.
// With it, a view of a mut or out argument is written back after the call,
// and a `ret` spec may take the split type: the function returns its chunk
// of a result shaped like the first split argument (Series f(const Series&)).
// Views that are copies live in host memory; a GPU function (oa::kernel) is
// given device views instead, when the split type has
//   device_view<T>                the view a GPU function gets (pointers into
//                                 device memory, and the state)
//   make_device_view<T>(region, shape, range[, const state<T>&]) -> device_view<T>
// Broadcast split types have accepts<T>. Reduction split types have
// identity<R>(), combine<R>(a, b) and merge<R>(std::span<const R>) (see reduce.hpp).
// Merging partitioned results is concatenation: each chunk is written to its
// own host region, so there is nothing to merge afterwards.
//
// A worked example: a series of samples with a name and a scale, whose
// library functions take a run of samples with the name and scale.
//
//   struct Series { std::vector<double> values; std::string name; double scale = 1.0; };
//   template <class E> struct basic_view { std::span<E> values; std::string_view name; double scale; };
//   struct series_state { std::string name; double scale = 1.0; };
//
//   struct series_split {
//     static constexpr oa::split::split_kind kind = oa::split::split_kind::partitioned;
//     static constexpr const char* name = "geo::series";
//     template <class T> static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, Series>;
//     template <class T> static constexpr bool makeable = accepts<T>;
//     template <class T> using element = double;
//     template <class T> using view = basic_view<std::conditional_t<std::is_const_v<T>, const double, double>>;
//     template <class T> using state = series_state;
//     static series_state state_of(const Series& s) { return {s.name, s.scale}; }
//     static oa::split::shape shape_of(const Series& s) { return {s.values.size(), 1, sizeof(double)}; }
//     static oa::region host_region(const Series& s, oa::split::range r) {
//       auto* p = reinterpret_cast<std::byte*>(const_cast<double*>(s.values.data() + r.begin));
//       return {p, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
//     }
//     static oa::region packed_region(std::byte* b, const oa::split::shape&, oa::split::range r) {
//       return {b, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
//     }
//     template <class T>
//     static view<T> make_view(const oa::region& g, const oa::split::shape&, oa::split::range r,
//                              const series_state& st) {
//       using E = std::conditional_t<std::is_const_v<T>, const double, double>;
//       return {std::span<E>(reinterpret_cast<E*>(g.data), r.size()), st.name, st.scale};
//     }
//     template <class T>
//     static T make(const oa::split::shape& s, const series_state& st) {
//       return Series{std::vector<double>(s.units), st.name, st.scale};
//     }
//   };
//
// examples/stateful/ has it whole, annotated and run against the plain program.

#include <concepts>
#include <cstddef>
#include <span>
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

/// What make<T> may call on storage it allocated, before it writes it
/// (see above); never null where it is passed.
using first_touch = void (*)(void* p, std::size_t bytes) noexcept;

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

// ---- the contract ------------------------------------------------------------------

namespace detail {
template <class S, class T>
struct state_of_split {
  using type = void;
};
template <class S, class T>
  requires requires { typename S::template state<T>; }
struct state_of_split<S, T> {
  using type = typename S::template state<T>;
};
}  // namespace detail

/// The unsplit state a split type S keeps for values of type T, or void.
template <class S, class T>
using state_t = typename detail::state_of_split<S, std::remove_cvref_t<T>>::type;
/// Whether values of type T carry unsplit state under S.
template <class S, class T>
inline constexpr bool has_state = !std::is_void_v<state_t<S, T>>;

/// One concept per requirement, so that a check can say which one is missing.
namespace contract {
template <class S>
concept has_kind = requires {
  { S::kind } -> std::convertible_to<split_kind>;
};
template <class S>
concept has_name = requires {
  { S::name } -> std::convertible_to<const char*>;
};
template <class S, class T>
concept has_accepts = requires {
  { S::template accepts<T> } -> std::convertible_to<bool>;
};
template <class S, class T>
concept has_makeable = requires {
  { S::template makeable<T> } -> std::convertible_to<bool>;
};
template <class S, class T>
concept has_element = requires { typename S::template element<T>; } &&
                      std::is_trivially_copyable_v<typename S::template element<T>>;
template <class S, class T>
concept has_view = requires {
  typename S::template view<T>;
  typename S::template view<const T>;
};
template <class S, class T>
concept has_shape_of = requires(const T& x) {
  { S::shape_of(x) } -> std::same_as<shape>;
};
template <class S, class T>
concept has_host_region = requires(const T& x, range r) {
  { S::host_region(x, r) } -> std::same_as<region>;
};
template <class S, class T>
concept has_packed_region = requires(std::byte* b, const shape& s, range r) {
  { S::packed_region(b, s, r) } -> std::same_as<region>;
} || requires(std::byte* b, const shape& s, range r) {
  { S::template packed_region<T>(b, s, r) } -> std::same_as<region>;
} || (has_state<S, T> && requires(std::byte* b, const shape& s, range r, const state_t<S, T>* st) {
  { S::template packed_region<T>(b, s, r, *st) } -> std::same_as<region>;
});
/// Views of a chunk: with the state for values that have one.
template <class S, class T>
concept has_make_view = has_view<S, T> && (has_state<S, T> ? requires(const region& g, const shape& s, range r,
                                                                       const state_t<S, T>* st) {
  { S::template make_view<const T>(g, s, r, *st) } -> std::same_as<typename S::template view<const T>>;
  { S::template make_view<T>(g, s, r, *st) } -> std::same_as<typename S::template view<T>>;
} : requires(const region& g, const shape& s, range r) {
  { S::template make_view<const T>(g, s, r) } -> std::same_as<typename S::template view<const T>>;
  { S::template make_view<T>(g, s, r) } -> std::same_as<typename S::template view<T>>;
});
template <class S, class T>
concept has_state_of = !has_state<S, T> || requires(const T& x) {
  { S::state_of(x) } -> std::convertible_to<state_t<S, T>>;
};
template <class S, class T>
concept has_state_copy = !has_state<S, T> || std::copy_constructible<state_t<S, T>>;
/// make<T>(shape): storage for a result without state.
template <class S, class T>
concept has_make = requires(const shape& s) {
  { S::template make<T>(s) } -> std::same_as<T>;
};
/// make<T>(shape, state): a result carrying a prototype's state.
template <class S, class T>
concept has_make_from_state = requires(const shape& s, const state_t<S, T>* st) {
  { S::template make<T>(s, *st) } -> std::same_as<T>;
};
/// result_state<R>(): a result's state when no argument has one.
template <class S, class R>
concept has_result_state_default = requires {
  { S::template result_state<R>() } -> std::convertible_to<state_t<S, R>>;
};
/// A result's state from its prototype's state P: result_state<R>(p), or P converted.
template <class S, class R, class P>
concept has_result_state_from = !std::is_void_v<P> && (requires(const P* p) {
  { S::template result_state<R>(*p) } -> std::convertible_to<state_t<S, R>>;
} || std::convertible_to<const P&, state_t<S, R>>);
/// store(v, region, shape, range): writes a chunk object back (see above).
template <class S, class V>
concept has_store = requires(const V& v, const region& g, const shape& s, range r) { S::store(v, g, s, r); };
/// device_view<T> and make_device_view<T>: what a GPU function is given.
template <class S, class T>
concept has_device_view =
    requires { typename S::template device_view<T>; } &&
    (has_state<S, T> ? requires(const region& g, const shape& s, range r, const state_t<S, T>* st) {
      { S::template make_device_view<T>(g, s, r, *st) } -> std::same_as<typename S::template device_view<T>>;
    } : requires(const region& g, const shape& s, range r) {
      { S::template make_device_view<T>(g, s, r) } -> std::same_as<typename S::template device_view<T>>;
    });
template <class S, class R>
concept has_identity = requires {
  { S::template identity<R>() } -> std::convertible_to<R>;
};
template <class S, class R>
concept has_combine = requires(const R& a, const R& b) {
  { S::template combine<R>(a, b) } -> std::convertible_to<R>;
};
template <class S, class R>
concept has_merge = requires(std::span<const R> p) {
  { S::template merge<R>(p) } -> std::convertible_to<R>;
};
}  // namespace contract

/// A split type of the given kind with a name.
template <class S, split_kind K>
concept split_type_of_kind = contract::has_kind<S> && contract::has_name<S> && S::kind == K;

/// A partitioned split type that accepts, and can view and stage, values of type T.
template <class S, class T>
concept partitioned_split =
    split_type_of_kind<S, split_kind::partitioned> && contract::has_accepts<S, T> && S::template accepts<T> &&
    contract::has_makeable<S, T> && contract::has_element<S, T> && contract::has_view<S, T> &&
    contract::has_shape_of<S, T> && contract::has_host_region<S, T> && contract::has_packed_region<S, T> &&
    contract::has_make_view<S, T> && contract::has_state_of<S, T> && contract::has_state_copy<S, T>;

/// A partitioned split type that can also create results of type R.
template <class S, class R>
concept partitioned_result_split =
    partitioned_split<S, R> && S::template makeable<R> &&
    (has_state<S, R> ? contract::has_make_from_state<S, R> : contract::has_make<S, R>);

/// A broadcast split type for values of type T.
template <class S, class T>
concept broadcast_split =
    split_type_of_kind<S, split_kind::broadcast> && contract::has_accepts<S, T> && S::template accepts<T>;

/// A reduction split type merging per-chunk partials of type R.
template <class S, class R>
concept reduction_split = split_type_of_kind<S, split_kind::reduction> && contract::has_identity<S, R> &&
                          contract::has_combine<S, R> && contract::has_merge<S, R>;

}  // namespace oa::split
