// A program using geo through its annotation header, checked against the
// plain program: the results carry the series' name and scale, and the
// totals (which use the scale) agree.

#include <cmath>
#include <cstdio>
#include <random>

#include "geo_oa.hpp"

int main() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> d(0.0, 10.0);
  geo::Series b{std::vector<double>(1 << 20), "elevation", 0.5};
  for (double& v : b.values) v = d(rng);

  // The plain program.
  const geo::Series plain_r = geo::rescale(b, 2.0);
  const double plain_total = geo::total(plain_r);
  geo::Series plain_c = plain_r;
  geo::clamp(plain_c, 1.0, 8.0);
  const double plain_clamped = geo::total(plain_c);

  // The same calls through oa: recorded, run when a result is asked for.
  auto r = geo::oa::rescale(b, 2.0);  // lazy<geo::Series>
  auto t = geo::oa::total(r);         // lazy<double>: uses r's scale
  geo::Series c = r.get();
  geo::oa::clamp(c, 1.0, 8.0);  // in place, bounds in physical units
  auto tc = geo::oa::total(c);

  const geo::Series& res = r.get();
  std::printf("rescale: name '%s', scale %.2f (plain: '%s', %.2f)\n", res.name.c_str(), res.scale,
              plain_r.name.c_str(), plain_r.scale);
  std::printf("total(rescale(b, 2)) = %.6f (plain %.6f)\n", t.get(), plain_total);
  std::printf("total after clamp    = %.6f (plain %.6f)\n", tc.get(), plain_clamped);
  const bool ok = res.name == plain_r.name && res.scale == plain_r.scale && res.values == plain_r.values &&
                  std::abs(t.get() - plain_total) <= 1e-9 * std::abs(plain_total) &&
                  std::abs(tc.get() - plain_clamped) <= 1e-9 * std::abs(plain_clamped) && c.values == plain_c.values;
  std::printf("%s\n", ok ? "agrees with the plain program" : "DIFFERS from the plain program");
  return ok ? 0 : 1;
}
