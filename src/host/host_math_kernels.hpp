#pragma once
// The loop shared by the ISA-specific translation units of the host math:
// whole vectors straight from the arrays, and the last partial vector through
// a zero-padded buffer, so every element goes through the same vector
// function and its result depends on its value only, never on where a chunk
// starts or ends. Everything here has internal linkage: these units are
// compiled with wider ISA flags than the rest of the library, and no inline
// function they emit may be shared with code that runs on any CPU.

#include <cstddef>

#include "host/host_math.hpp"

namespace oa::host_math::detail {
namespace {

template <class V, auto F>  // F: V(V); V named apart, as template arguments drop vector attributes
void map_vector(const double* in, double* out, std::size_t n) noexcept {
  constexpr std::size_t w = sizeof(V) / sizeof(double);
  std::size_t i = 0;
  for (; i + w <= n; i += w) {
    V x;
    __builtin_memcpy(&x, in + i, sizeof x);
    x = F(x);
    __builtin_memcpy(out + i, &x, sizeof x);
  }
  if (i == n) return;
  double buf[w] = {};
  __builtin_memcpy(buf, in + i, (n - i) * sizeof(double));
  V x;
  __builtin_memcpy(&x, buf, sizeof x);
  x = F(x);
  __builtin_memcpy(buf, &x, sizeof x);
  __builtin_memcpy(out + i, buf, (n - i) * sizeof(double));
}

}  // namespace
}  // namespace oa::host_math::detail

/// The table of SLEEF's double functions for vector type V, N lanes and
/// ISA suffix ISA, in the order of oa::host_math::fn.
#define OA_SLEEF_TABLE(LABEL, V, N, ISA)                                                       \
  table {                                                                                      \
    LABEL, {                                                                                   \
      map_vector<V, Sleef_sind##N##_u10##ISA>, map_vector<V, Sleef_cosd##N##_u10##ISA>,         \
          map_vector<V, Sleef_asind##N##_u10##ISA>, map_vector<V, Sleef_erfd##N##_u10##ISA>,    \
          map_vector<V, Sleef_expd##N##_u10##ISA>, map_vector<V, Sleef_log2d##N##_u10##ISA>     \
    }                                                                                          \
  }
