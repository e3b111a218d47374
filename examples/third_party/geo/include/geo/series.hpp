#pragma once
// geo: series of samples with a name and a scale, and a few numeric functions
// over them. A small library as its authors would write it, with nothing of
// oa in it; its annotations live beside it (../../oa/).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace geo {

/// Samples of a quantity in raw units; `scale` converts them to physical
/// units, `name` labels the series.
struct Series {
  std::vector<double> values;
  std::string name;
  double scale = 1.0;
};

/// A cubic calibration curve: c[0] + c[1] x + c[2] x^2 + c[3] x^3.
struct Polynomial {
  std::array<double, 4> c{};
};

/// `n` pseudo-random samples in [0, 10), reproducible from `seed`.
Series make_series(std::string name, double scale, std::size_t n, std::uint64_t seed);

/// The series times `factor`, sample by sample: same name and scale.
Series rescale(const Series& s, double factor);
/// Each raw sample through the calibration curve.
Series calibrate(const Series& s, const Polynomial& p);
/// Clamps the samples to [lo, hi], given in physical units.
void clamp(Series& s, double lo, double hi);
/// The sum of the samples in physical units.
double total(const Series& s);

/// One line: name, size, total, first and last samples.
std::string summary(const Series& s);

}  // namespace geo
