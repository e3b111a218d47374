#pragma once
// lib::scale, annotated with its vector as a mut argument, for the
// compile-fail tests of what a mut argument takes.
#include <oa/oa.hpp>
#include <span>

namespace lib {
inline void scale(std::span<double> x, double k) {
  for (double& v : x) v *= k;
}
}  // namespace lib

inline constexpr auto scale = oa::annotate<"lib::scale">(
    oa::cpu(&lib::scale), oa::args(oa::mut<oa::split::contiguous>("x"), oa::scalar<double>("k")));
