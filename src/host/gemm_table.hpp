#pragma once
// The builds of host_gemm, one per vector ISA (see gemm_host.cpp).

#include <cstddef>

namespace oa::linalg::detail {

using dgemm_fn = void (*)(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                          const double*, std::size_t, double, double*, std::size_t);
using sgemm_fn = void (*)(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
struct gemm_table {
  const char* isa;
  dgemm_fn d;
  sgemm_fn s;
};
const gemm_table& gemm_generic();
const gemm_table& gemm_avx2();
const gemm_table& gemm_avx512();

}  // namespace oa::linalg::detail
