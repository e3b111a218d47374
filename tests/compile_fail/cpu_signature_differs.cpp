// Must not compile: the signature given to oa::cpu is not the function's
// (one function of that name: its type is deduced, then checked).
#include <oa/oa.hpp>
#include <span>

namespace lib {
inline void negate(std::span<double> x) {
  for (double& v : x) v = -v;
}
}  // namespace lib

inline constexpr auto negate = oa::annotate<"lib::negate">(
    oa::cpu<void(std::span<float>)>(&lib::negate), oa::args(oa::mut<oa::split::contiguous>("x")));

int main() {}
