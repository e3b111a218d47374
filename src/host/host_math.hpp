#pragma once
// The ISA-specific tables of the host math (host_math_<isa>.cpp), chosen at
// run time by host_math.cpp from what the CPU supports.

#include <cstddef>

#include "oa/core/ops.hpp"

namespace oa::host_math::detail {

using kernel = void (*)(const double* in, double* out, std::size_t n) noexcept;

struct table {
  const char* name;
  kernel k[static_cast<int>(fn::count)];  // indexed by fn
};

const table& avx2_table() noexcept;    // needs AVX2 and FMA
const table& avx512_table() noexcept;  // needs AVX-512F

}  // namespace oa::host_math::detail
