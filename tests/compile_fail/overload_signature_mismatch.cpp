// Must not compile: no overload of lib::scale has the signature asked for
// (its parameters in another order): the error names the signature (and,
// with GCC, the overloads).
#include <oa/oa.hpp>

#include "overloaded_scale.hpp"

inline constexpr auto scale = oa::annotate<"lib::scale">(
    oa::cpu<void(double, std::span<double>)>(&lib::scale),
    oa::args(oa::scalar<double>("k"), oa::mut<oa::split::contiguous>("x")));

int main() {}
