// SLEEF's AVX2 double-precision functions (1.0-ULP class): compiled with
// -mavx2 -mfma, reached only when the CPU reports both.
#include <immintrin.h>
#include <sleef.h>

#include "host/host_math_kernels.hpp"

namespace oa::host_math::detail {

const table& avx2_table() noexcept {
  static constexpr auto t = OA_SLEEF_TABLE("sleef-avx2", __m256d, 4, avx2);
  return t;
}

}  // namespace oa::host_math::detail
