#pragma once
// A user's own CPU library, as its authors wrote it: a series of samples with
// a name and a scale. Its functions are written over a run of samples that
// carries the series' name and scale (geo::chunk); the whole-series functions
// call them once. Nothing here knows about oa.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace geo {

/// Samples of a quantity in raw units; `scale` converts them to physical
/// units, `name` labels the series.
struct Series {
  std::vector<double> values;
  std::string name;
  double scale = 1.0;
};

/// A run of a series' samples, with the series' name and scale.
template <class E>
struct basic_view {
  std::span<E> values;
  std::string_view name;
  double scale = 1.0;
};
using view = basic_view<const double>;
using mut_view = basic_view<double>;

inline view view_of(const Series& s) { return {s.values, s.name, s.scale}; }
inline mut_view view_of(Series& s) { return {s.values, s.name, s.scale}; }

namespace chunk {
/// out = in * factor, sample by sample.
inline void rescale(view in, double factor, mut_view out) {
  for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] = in.values[i] * factor;
}
/// The sum of the samples in physical units.
inline double total(view s) {
  double t = 0;
  for (double v : s.values) t += v;
  return t * s.scale;
}
/// Clamps the samples to [lo, hi], given in physical units.
inline void clamp(mut_view s, double lo, double hi) {
  const double a = lo / s.scale, b = hi / s.scale;
  for (double& v : s.values) v = v < a ? a : v > b ? b : v;
}
}  // namespace chunk

/// The series times `factor`: same name and scale.
inline Series rescale(const Series& s, double factor) {
  Series out{std::vector<double>(s.values.size()), s.name, s.scale};
  chunk::rescale(view_of(s), factor, view_of(out));
  return out;
}
inline double total(const Series& s) { return chunk::total(view_of(s)); }
inline void clamp(Series& s, double lo, double hi) { chunk::clamp(view_of(s), lo, hi); }

}  // namespace geo
