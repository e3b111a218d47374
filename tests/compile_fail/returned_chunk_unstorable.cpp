// Must not compile: the function returns its chunk of a result (a ret spec
// with a partitioned split type), but the split type cannot store a chunk
// back into the result (no `store`).
#include <oa/oa.hpp>
#include <vector>

namespace lib {
inline std::vector<double> twice(std::span<const double> x) {
  std::vector<double> out(x.begin(), x.end());
  for (double& v : out) v *= 2;
  return out;
}
}  // namespace lib

inline constexpr auto twice = oa::annotate<"lib::twice">(
    oa::cpu(&lib::twice),
    oa::args(oa::in<oa::split::contiguous, std::vector<double>>("x"),
             oa::ret<oa::split::contiguous, std::vector<double>>));

int main() {}
