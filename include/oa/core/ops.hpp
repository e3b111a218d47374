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
OA_BINARY_OP(min, a < b ? a : b)
OA_BINARY_OP(max, a < b ? b : a)
OA_BINARY_OP(less, a < b)
OA_BINARY_OP(less_equal, a <= b)
OA_BINARY_OP(greater, a > b)
OA_BINARY_OP(greater_equal, a >= b)
OA_BINARY_OP(equal_to, a == b)
OA_UNARY_OP(exp, OA_MATH(exp)(a))
OA_UNARY_OP(log, OA_MATH(log)(a))
OA_UNARY_OP(log2, OA_MATH(log2)(a))
OA_UNARY_OP(sqrt, OA_MATH(sqrt)(a))
OA_UNARY_OP(sin, OA_MATH(sin)(a))
OA_UNARY_OP(cos, OA_MATH(cos)(a))
OA_UNARY_OP(asin, OA_MATH(asin)(a))
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
