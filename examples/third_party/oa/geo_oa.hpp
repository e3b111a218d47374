#pragma once
// geo's annotations, shipped beside the library: how a Series splits, and
// for each function its CPU version (geo's own, unchanged), its device
// equivalent and how its arguments split.
//
// A program reaches them without a change to its source: rebuilt with
// oa_annotate() (see ../CMakeLists.txt), its #include <geo/series.hpp> finds
// a generated header that includes geo's with the namespace renamed
// geo_plain (geo's sources are compiled the same way), then this file, which
// opens namespace geo again: everything of geo_plain, with the functions
// below running through oa. Qualified calls (geo::rescale(...)) reach
// them; an unqualified call finds geo_plain's own function by
// argument-dependent lookup (correct, on the CPU), and is ambiguous where a
// using-declaration brings geo's too (docs/annotating-a-library.md).

#include <cstring>
#include <oa/oa.hpp>
#include <span>
#include <string>
#include <type_traits>

#include "geo_kernels.hpp"

namespace geo_oa {
namespace plain = ::geo_plain;  // geo, as compiled
namespace split = ::oa::split;
using plain::Series;

/// What a Series carries besides its samples.
struct series_state {
  std::string name;
  double scale = 1.0;
};

/// A Series split into ranges of samples, its name and scale whole. geo's
/// functions take `const Series&` and return Series, which own their
/// samples: a chunk is presented as a Series holding a copy of its samples
/// (and what a function returns or updates is stored back), so each function
/// is annotated as it is, without an adapter. GPU functions get
/// device_series instead: pointers into device memory, no copy.
struct series_split {
  static constexpr split::split_kind kind = split::split_kind::partitioned;
  static constexpr const char* name = "geo::series";

  template <class T>
  static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, Series>;
  template <class T>
  static constexpr bool makeable = accepts<T>;
  template <class T>
  using element = double;
  template <class T>
  using view = Series;
  template <class T>
  using device_view = device_series<std::conditional_t<std::is_const_v<T>, const double, double>>;
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
  static Series make_view(const ::oa::region& g, const split::shape&, split::range r, const series_state& s) {
    const auto* p = reinterpret_cast<const double*>(g.data);
    return {std::vector<double>(p, p + r.size()), s.name, s.scale};
  }
  template <class T>
  static device_view<T> make_device_view(const ::oa::region& g, const split::shape&, split::range r,
                                         const series_state& s) {
    using E = std::conditional_t<std::is_const_v<T>, const double, double>;
    return {reinterpret_cast<E*>(g.data), r.size(), s.scale};
  }
  /// A chunk's samples back into its region (a Series returned or updated).
  static void store(const Series& chunk, const ::oa::region& g, const split::shape&, split::range) {
    std::memcpy(g.data, chunk.values.data(), chunk.values.size() * sizeof(double));
  }
  /// A result of `s.units` samples with the name and scale of the Series it is made from.
  template <class T>
  static T make(const split::shape& s, const series_state& st) {
    return Series{std::vector<double>(s.units), st.name, st.scale};
  }
};

#if OA_ANNOTATIONS_GPU
#define GEO_OA_GPU(f) &gpu::f
#else
#define GEO_OA_GPU(f) nullptr  // built without CUDA: no GPU version
#endif

// Element-wise: samples times a factor (the name and scale carry over).
inline constexpr auto rescale = ::oa::annotate<"geo::rescale">(
    ::oa::cpu(&plain::rescale),
    ::oa::args(::oa::in<series_split>("s"), ::oa::scalar<double>("factor"), ::oa::ret<series_split, Series>),
    ::oa::device_fn(::oa::elementwise(::oa::ops::mul{})));

// A hand-written kernel (geo_kernels.cu); the emulated device runs geo's own function.
inline constexpr auto calibrate = ::oa::annotate<"geo::calibrate">(
    ::oa::cpu(&plain::calibrate),
    ::oa::args(::oa::in<series_split>("s"), ::oa::scalar<plain::Polynomial>("p"), ::oa::ret<series_split, Series>),
    ::oa::device_fn(::oa::kernel(GEO_OA_GPU(calibrate))), ::oa::cost(4.0));

// In place; the bounds are in physical units (the kernel gets the scale).
inline constexpr auto clamp = ::oa::annotate<"geo::clamp">(
    ::oa::cpu(&plain::clamp),
    ::oa::args(::oa::mut<series_split>("s"), ::oa::scalar<double>("lo"), ::oa::scalar<double>("hi")),
    ::oa::device_fn(::oa::kernel(GEO_OA_GPU(clamp))));

// Partial totals add up (each is in physical units): CPU only.
inline constexpr auto total = ::oa::annotate<"geo::total">(
    ::oa::cpu(&plain::total), ::oa::args(::oa::in<series_split>("s"), ::oa::ret<split::sum, double>));

#undef GEO_OA_GPU

}  // namespace geo_oa

// The calls programs make, with geo's signatures: each runs through oa when
// called, as geo's own does (its result is returned by value).
namespace geo_oa::calls {
inline Series rescale(const Series& s, double factor) { return geo_oa::rescale(s, factor).take(); }
inline Series calibrate(const Series& s, const plain::Polynomial& p) { return geo_oa::calibrate(s, p).take(); }
inline void clamp(Series& s, double lo, double hi) {
  geo_oa::clamp(s, lo, hi);
  ::oa::evaluate();
}
inline double total(const Series& s) { return geo_oa::total(s).get(); }
}  // namespace geo_oa::calls

// geo as the program sees it: the library, with these calls in front of
// the functions they redeclare (any other overload of their names stays
// geo's own).
namespace geo {
using namespace ::geo_plain;
OA_ANNOTATED_NAME(::geo_plain, ::geo_oa::calls, rescale)
OA_ANNOTATED_NAME(::geo_plain, ::geo_oa::calls, calibrate)
OA_ANNOTATED_NAME(::geo_plain, ::geo_oa::calls, clamp)
OA_ANNOTATED_NAME(::geo_plain, ::geo_oa::calls, total)
}  // namespace geo
