// Must not compile: lib::scale is overloaded, and oa::cpu is given the name
// without a signature: the error names the fix (and, with GCC, the overloads).
#include <oa/oa.hpp>

#include "overloaded_scale.hpp"

inline constexpr auto scale = oa::annotate<"lib::scale">(
    oa::cpu(&lib::scale), oa::args(oa::mut<oa::split::contiguous>("x"), oa::scalar<double>("k")));

int main() {}
