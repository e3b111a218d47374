// Must not compile: a mut argument updates the caller's object; a temporary
// that owns its elements (a std::vector) has no caller to see the update. A
// temporary std::span (a view of the caller's storage) is taken.
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
  std::vector<double> v(10, 1.0);
  scale(std::span<double>(v), 2.0);  // fine: updates v
  scale(std::vector<double>(10, 1.0), 2.0);
  return 0;
}
