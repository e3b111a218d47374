#pragma once
// The annotation header geo's authors ship beside geo.hpp: how a Series
// splits, and each function's CPU version, device equivalent and specs.
//
// A Series splits by ranges of its samples; its name and scale are state that
// is not split. The split type declares that state (state<T>, state_of), so
// every chunk's view sees it (make_view with the state) and every result made
// from a Series gets it (make from a prototype's state). Device kernels see
// samples only: a function whose result depends on the name or the scale
// (total, clamp) has no device equivalent and runs its CPU version.

#include <oa/oa.hpp>
#include <type_traits>

#include "geo.hpp"

namespace geo::oa {
namespace split = ::oa::split;

/// What a Series carries besides its samples.
struct series_state {
  std::string name;
  double scale = 1.0;
};

/// A Series split into ranges of samples; name and scale travel whole.
struct series_split {
  static constexpr split::split_kind kind = split::split_kind::partitioned;
  static constexpr const char* name = "geo::series";

  template <class T>
  static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, Series>;
  template <class T>
  static constexpr bool makeable = accepts<T>;
  template <class T>
  using element = double;
  /// Read-only for an argument only read (const T), writable otherwise.
  template <class T>
  using view = std::conditional_t<std::is_const_v<std::remove_reference_t<T>>, geo::view, geo::mut_view>;
  template <class T>
  using state = series_state;

  static series_state state_of(const Series& s) { return {s.name, s.scale}; }
  static split::shape shape_of(const Series& s) { return {s.values.size(), 1, sizeof(double)}; }
  static ::oa::region host_region(const Series& s, split::range r) {
    auto* p = reinterpret_cast<std::byte*>(const_cast<double*>(s.values.data())) + r.begin * sizeof(double);
    return {p, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  static ::oa::region packed_region(std::byte* buffer, const split::shape&, split::range r) {
    return {buffer, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  template <class T>
  static view<T> make_view(const ::oa::region& g, const split::shape&, split::range r, const series_state& s) {
    using E = std::conditional_t<std::is_const_v<std::remove_reference_t<T>>, const double, double>;
    return {std::span<E>(reinterpret_cast<E*>(g.data), r.size()), s.name, s.scale};
  }
  /// A result of `s.units` samples with the name and scale of the Series it is made from.
  template <class T>
  static T make(const split::shape& s, const series_state& st) {
    return Series{std::vector<double>(s.units), st.name, st.scale};
  }
};

inline constexpr auto rescale = ::oa::annotate<"geo::rescale">(
    ::oa::cpu(&geo::chunk::rescale),
    ::oa::args(::oa::in<series_split>("series"), ::oa::scalar<double>("factor"), ::oa::out<series_split, Series>("out")),
    ::oa::device_fn(::oa::elementwise(::oa::ops::mul{})));

// The total is in physical units (it uses the scale): CPU only.
inline constexpr auto total = ::oa::annotate<"geo::total">(
    ::oa::cpu(&geo::chunk::total), ::oa::args(::oa::in<series_split>("series"), ::oa::ret<split::sum, double>));

// Bounds in physical units (uses the scale); updates the caller's Series in place.
inline constexpr auto clamp = ::oa::annotate<"geo::clamp">(
    ::oa::cpu(&geo::chunk::clamp),
    ::oa::args(::oa::mut<series_split>("series"), ::oa::scalar<double>("lo"), ::oa::scalar<double>("hi")));

}  // namespace geo::oa
