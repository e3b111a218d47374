#pragma once
// The checks every configured program runs after its own Eigen configuration
// and #include of Eigen: a product, a coefficient-wise assignment and a sum
// on a 1 MiB emulated device, each against a plain loop, each through oa's
// engine (its stage reports). Returns the number of failures.

#include <cmath>
#include <cstdio>
#include <oa/oa.hpp>
#include <string>

#if !defined(OA_OFFLOAD)
#error "built with oa_offload()"
#endif

namespace oa_config_check {

inline int expect(bool ok, const char* what) {
  if (!ok) std::printf("FAILED: %s\n", what);
  return ok ? 0 : 1;
}

inline int stages(const char* op) {
  int n = 0;
  for (const auto& r : oa::reports()) n += r.op == op && r.error.empty() && r.device == "emulated";
  return n;
}

template <class Matrix>
int run(const Matrix& a, const Matrix& b) {
  oa::config c = oa::current_config();
  c.device = "emulated";
  c.device_memory = std::size_t{1} << 20;
  c.host_threshold = 0;
  c.offload_gemm_min = 0;
  c.offload_elements_min = 0;
  oa::set_config(c);
  oa::clear_reports();
  const auto n = a.rows();
  Matrix p(n, n), s(n, n);
  p = a * b;
  s = (a.array() * 2.0 + b.array()).matrix();
  const double total = s.sum();
  double worst = 0, want_total = 0;
  for (decltype(a.rows()) i = 0; i < n; ++i)
    for (decltype(a.rows()) j = 0; j < n; ++j) {
      double dot = 0;
      for (decltype(a.rows()) k = 0; k < n; ++k) dot += a(i, k) * b(k, j);
      worst = std::fmax(worst, std::fabs(p(i, j) - dot));
      worst = std::fmax(worst, std::fabs(s(i, j) - (2 * a(i, j) + b(i, j))));
      want_total += 2 * a(i, j) + b(i, j);
    }
  int failed = expect(worst < 1e-9, "results agree with plain loops");
  failed += expect(std::fabs(total - want_total) < 1e-6 * (1 + std::fabs(want_total)), "sum agrees");
  failed += expect(stages("gemm") == 1, "the product ran through the engine");
  failed += expect(stages("cwise") >= 1, "the assignment ran through the engine");
  return failed;
}

template <class Matrix>
Matrix filled(long n, double seed) {
  Matrix m(n, n);
  for (long j = 0; j < n; ++j)
    for (long i = 0; i < n; ++i) m(i, j) = std::sin(seed + 0.37 * static_cast<double>(i) + 0.11 * static_cast<double>(j));
  return m;
}

}  // namespace oa_config_check
