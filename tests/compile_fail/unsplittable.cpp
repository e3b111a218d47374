// Must not compile: a std::list cannot be split into contiguous chunks.
#include <list>
#include <oa/oa.hpp>
#include <span>

namespace lib {
inline double total(std::span<const double> x) {
  double s = 0;
  for (double v : x) s += v;
  return s;
}
}  // namespace lib

inline constexpr auto total = oa::annotate<"lib::total">(
    oa::cpu(&lib::total), oa::args(oa::in<oa::split::contiguous>("x"), oa::ret<oa::split::sum, double>));

int main() {
  std::list<double> values{1.0, 2.0};
  return static_cast<int>(total(values).get());
}
