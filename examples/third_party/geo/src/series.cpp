#include "geo/series.hpp"

#include <cstdio>

namespace geo {

Series make_series(std::string name, double scale, std::size_t n, std::uint64_t seed) {
  Series s{std::vector<double>(n), std::move(name), scale};
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& v : s.values) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    v = static_cast<double>(x >> 11) * 0x1.0p-53 * 10.0;
  }
  return s;
}

Series rescale(const Series& s, double factor) {
  Series out{std::vector<double>(s.values.size()), s.name, s.scale};
  for (std::size_t i = 0; i < s.values.size(); ++i) out.values[i] = s.values[i] * factor;
  return out;
}

Series calibrate(const Series& s, const Polynomial& p) {
  Series out{std::vector<double>(s.values.size()), s.name, s.scale};
  for (std::size_t i = 0; i < s.values.size(); ++i) {
    const double x = s.values[i];
    out.values[i] = p.c[0] + x * (p.c[1] + x * (p.c[2] + x * p.c[3]));
  }
  return out;
}

void clamp(Series& s, double lo, double hi) {
  const double a = lo / s.scale, b = hi / s.scale;
  for (double& v : s.values) v = v < a ? a : v > b ? b : v;
}

double total(const Series& s) {
  double t = 0;
  for (double v : s.values) t += v;
  return t * s.scale;
}

std::string summary(const Series& s) {
  char line[256];
  std::snprintf(line, sizeof line, "%s: %zu samples, total %.9e, first %.9e, last %.9e", s.name.c_str(),
                s.values.size(), total(s), s.values.empty() ? 0.0 : s.values.front(),
                s.values.empty() ? 0.0 : s.values.back());
  return line;
}

}  // namespace geo
