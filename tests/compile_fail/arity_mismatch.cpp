// Must not compile: three specs (ret excluded) for a function of two parameters.
#include <oa/oa.hpp>
#include <span>

namespace lib {
inline void negate(std::span<const double> a, std::span<double> out) {
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = -a[i];
}
}  // namespace lib

inline constexpr auto negate = oa::annotate<"lib::negate">(
    oa::cpu(&lib::negate), oa::args(oa::in<oa::split::contiguous>("a"), oa::in<oa::split::contiguous>("b"),
                                    oa::out<oa::split::contiguous, std::vector<double>>("out")));

int main() {}
