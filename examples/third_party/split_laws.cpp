// geo's annotations checked as their author checks them: the laws of the
// split type (geo_oa::series_split) on sample Series, before any program
// relies on it. Rebuilt with oa_annotate like the programs using geo (see
// CMakeLists.txt), so `geo` here is geo as those programs see it. No test
// framework: it prints what it found and exits 1 when a law is broken.
//
//   oa_example_geo_split_laws

#include <geo/series.hpp>
#include <iostream>
#include <oa/testing/split_type.hpp>

int main() {
  int broken = 0;
  // Empty, one sample, a few, and more than a chunk of a thousand.
  for (const std::size_t n : {0, 1, 7, 4099}) {
    const geo::Series s = geo::make_series("elevation", 0.5, n, 42);
    const oa::testing::split_check laws = oa::testing::check_split_type<geo_oa::series_split>(s);
    std::cout << laws << '\n';
    broken += laws ? 0 : 1;
  }
  return broken ? 1 : 0;
}
