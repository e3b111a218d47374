// Must not compile: the element-wise device function is neither an oa::ops
// operation nor a builder of an expression (a lambda over doubles, which
// placeholders cannot be passed to).
#include <oa/oa.hpp>
#include <span>
#include <vector>

namespace lib {
inline void twice(std::span<const double> x, std::span<double> out) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = 2 * x[i];
}
}  // namespace lib

inline constexpr auto twice = oa::annotate<"lib::twice">(
    oa::cpu(&lib::twice),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<double>>("out")),
    oa::device_fn(oa::elementwise([](double x) { return 2 * x; })));

int main() {}
