// Must not compile: the spec says the argument is a vector of doubles, whose
// chunk view is std::span<double>, but the function takes std::span<int>.
#include <oa/oa.hpp>
#include <span>
#include <vector>

namespace lib {
inline void scale_ints(std::span<int> x, double k) {
  for (int& v : x) v = static_cast<int>(v * k);
}
}  // namespace lib

inline constexpr auto scale_ints = oa::annotate<"lib::scale_ints">(
    oa::cpu(&lib::scale_ints), oa::args(oa::mut<oa::split::contiguous, std::vector<double>>("x"), oa::scalar<double>("k")));

int main() {}
