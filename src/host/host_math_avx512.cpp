// SLEEF's AVX-512F double-precision functions (1.0-ULP class): compiled with
// -mavx512f, reached only when the CPU reports it.
#include <immintrin.h>
#include <sleef.h>

#include "host/host_math_kernels.hpp"

namespace oa::host_math::detail {

const table& avx512_table() noexcept {
  static constexpr auto t = OA_SLEEF_TABLE("sleef-avx512f", __m512d, 8, avx512f);
  return t;
}

}  // namespace oa::host_math::detail
