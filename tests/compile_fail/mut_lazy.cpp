// Must not compile: a mut argument takes the caller's object, not a lazy value.
#include <oa/oa.hpp>
#include <span>
#include <vector>

namespace lib {
inline void scale(std::span<double> x, double k) {
  for (double& v : x) v *= k;
}
}  // namespace lib

inline constexpr auto scale = oa::annotate<"lib::scale">(
    oa::cpu(&lib::scale), oa::args(oa::mut<oa::split::contiguous>("x"), oa::scalar<double>("k")));

int main() {
  oa::lazy<std::vector<double>> x = oa::hold(std::vector<double>(10, 1.0));
  scale(x, 2.0);
  return 0;
}
