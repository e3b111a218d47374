#pragma once
// Element-wise operations: the device functions of element-wise annotations.
// Each is a functor over scalars, callable on host and device, so a stage of
// them runs as one loop (one fused kernel on a GPU) with temporaries in
// registers; the emulated device runs the same functors on the host.

// This header is also compiled at run time by NVRTC into fused stage kernels
// (src/core/kernel_source.cpp), so it includes nothing there.
#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define OA_HD __host__ __device__
#define OA_MATH(f) ::f
#else
#define OA_HD
#define OA_MATH(f) std::f
#endif

namespace oa::ops {

#define OA_BINARY_OP(NAME, EXPR)                   \
  struct NAME {                                    \
    static constexpr const char* name = #NAME;     \
    template <class A, class B>                    \
    OA_HD auto operator()(A a, B b) const {        \
      return EXPR;                                 \
    }                                              \
  };
#define OA_UNARY_OP(NAME, EXPR)                    \
  struct NAME {                                    \
    static constexpr const char* name = #NAME;     \
    template <class A>                             \
    OA_HD auto operator()(A a) const {             \
      return EXPR;                                 \
    }                                              \
  };

OA_BINARY_OP(add, a + b)
OA_BINARY_OP(sub, a - b)
OA_BINARY_OP(mul, a* b)
OA_BINARY_OP(div, a / b)
// std::min and std::max, to the bit: the first operand unless the second is
// smaller (larger), so with a NaN or equal operands (-0.0 and 0.0) the
// first, as a CPU function written with std::min/std::max gives.
OA_BINARY_OP(min, b < a ? b : a)
OA_BINARY_OP(max, a < b ? b : a)
// The smaller (larger) of a and b, or NaN when either is NaN (only NaN
// differs from itself): what min and max reductions combine with, so that
// their result is NaN when any element is, whatever the order of combining
// (chunks, blocks, threads). min and max above are also Eigen's cwiseMin/cwiseMax.
OA_BINARY_OP(min_nan, a != a ? a : b != b ? b : (b < a ? b : a))
OA_BINARY_OP(max_nan, a != a ? a : b != b ? b : (a < b ? b : a))
OA_BINARY_OP(less, a < b)
OA_BINARY_OP(less_equal, a <= b)
OA_BINARY_OP(greater, a > b)
OA_BINARY_OP(greater_equal, a >= b)
OA_BINARY_OP(equal_to, a == b)
OA_BINARY_OP(not_equal_to, a != b)
OA_BINARY_OP(pow, OA_MATH(pow)(a, b))
OA_BINARY_OP(second, (static_cast<void>(a), b))  // b, whatever a is: an assignment (std::fill)
OA_UNARY_OP(exp, OA_MATH(exp)(a))
OA_UNARY_OP(log, OA_MATH(log)(a))
OA_UNARY_OP(log2, OA_MATH(log2)(a))
OA_UNARY_OP(sqrt, OA_MATH(sqrt)(a))
OA_UNARY_OP(sin, OA_MATH(sin)(a))
OA_UNARY_OP(cos, OA_MATH(cos)(a))
OA_UNARY_OP(tan, OA_MATH(tan)(a))
OA_UNARY_OP(asin, OA_MATH(asin)(a))
OA_UNARY_OP(acos, OA_MATH(acos)(a))
OA_UNARY_OP(atan, OA_MATH(atan)(a))
OA_UNARY_OP(tanh, OA_MATH(tanh)(a))
OA_UNARY_OP(erf, OA_MATH(erf)(a))
OA_UNARY_OP(abs, OA_MATH(fabs)(a))

#undef OA_BINARY_OP
#undef OA_UNARY_OP

struct negate {
  static constexpr const char* name = "negate";
  template <class A>
  OA_HD A operator()(A a) const {
    return -a;
  }
};
struct identity {
  static constexpr const char* name = "identity";
  template <class A>
  OA_HD A operator()(A a) const {
    return a;
  }
};
struct square {
  static constexpr const char* name = "square";
  template <class A>
  OA_HD A operator()(A a) const {
    return a * a;
  }
};
/// cond ? a : b, element-wise.
struct select {
  static constexpr const char* name = "select";
  template <class C, class A, class B>
  OA_HD auto operator()(C c, A a, B b) const {
    return c ? a : b;
  }
};

}  // namespace oa::ops

#if !defined(__CUDACC_RTC__)
#include <cstddef>

// Vectorized double-precision math for the annotations' CPU functions on the
// host: SLEEF's 1.0-ULP functions at the widest vector width the CPU runs,
// chosen at run time (OA_HOST_MATH=eigen turns it off). Results are within a
// few ULP of Eigen's (which calls libm one element at a time for sin, cos,
// asin and erf), and each element's result depends on its value only, so
// chunking never changes a bit. Absent (a build without SLEEF, or a CPU
// without AVX2 and FMA), apply() declines and Eigen computes.
namespace oa::host_math {

enum class fn : unsigned char { sin, cos, asin, erf, exp, log2, count };

/// out[i] = f(in[i]) for i < n (in == out allowed); false, with nothing
/// written, when no vectorized implementation is in use.
bool apply(fn f, const double* in, double* out, std::size_t n) noexcept;

/// The function an element-wise operation computes, as `apply` takes it
/// (fn::count: none of them).
template <class Op>
inline constexpr fn fn_of = fn::count;
template <> inline constexpr fn fn_of<ops::sin> = fn::sin;
template <> inline constexpr fn fn_of<ops::cos> = fn::cos;
template <> inline constexpr fn fn_of<ops::asin> = fn::asin;
template <> inline constexpr fn fn_of<ops::erf> = fn::erf;
template <> inline constexpr fn fn_of<ops::exp> = fn::exp;
template <> inline constexpr fn fn_of<ops::log2> = fn::log2;

/// The implementation in use: "sleef-avx512f", "sleef-avx2" or "eigen".
const char* implementation() noexcept;

/// Turns the vectorized functions off (Eigen's run) or back on; returns the
/// previous setting. For comparisons and tests of the Eigen path.
bool enable(bool on) noexcept;

}  // namespace oa::host_math
#endif
