// A program using geo, as its users write it: nothing of oa in it. Built as
// it is (oa_example_geo_survey) and rebuilt with geo's annotations
// (oa_example_geo_survey_offload, see CMakeLists.txt): both print the same.
//
//   oa_example_geo_survey [samples]

#include <cstdio>
#include <cstdlib>

#include <geo/series.hpp>

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{1} << 22;
  const geo::Series raw = geo::make_series("elevation", 0.5, n, 42);

  const geo::Series doubled = geo::rescale(raw, 2.0);
  const geo::Series calibrated = geo::calibrate(doubled, geo::Polynomial{{0.25, 1.5, -0.02, 0.001}});
  geo::Series bounded = calibrated;
  geo::clamp(bounded, 1.0, 12.0);

  std::printf("%s\n", geo::summary(raw).c_str());
  std::printf("%s\n", geo::summary(doubled).c_str());
  std::printf("%s\n", geo::summary(calibrated).c_str());
  std::printf("%s\n", geo::summary(bounded).c_str());
  std::printf("total of doubled: %.9e\n", geo::total(doubled));
  std::printf("total of bounded: %.9e\n", geo::total(bounded));
  return 0;
}
