// Run-time choice of the host math: the widest SLEEF table the CPU runs
// (AVX-512F, then AVX2 with FMA), or none, and then Eigen computes. The
// library is built without -march flags; only the table units use wider ISAs.

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "host/host_math.hpp"

namespace oa::host_math {

namespace detail {
namespace {

const table* pick() noexcept {
#if defined(OA_HAVE_SLEEF) && (defined(__x86_64__) || defined(__i386__))
  const char* env = std::getenv("OA_HOST_MATH");
  const std::string_view want = env && *env ? env : "auto";
  if (want == "eigen") return nullptr;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if ((want == "auto" || want == "avx512") && avx512) return &avx512_table();
  if (avx2) return &avx2_table();
#endif
  return nullptr;
}

const table* const chosen = pick();
std::atomic<bool> enabled{true};

}  // namespace
}  // namespace detail

bool apply(fn f, const double* in, double* out, std::size_t n) noexcept {
  if (!detail::chosen || !detail::enabled.load(std::memory_order_relaxed)) return false;
  detail::chosen->k[static_cast<int>(f)](in, out, n);
  return true;
}

const char* implementation() noexcept {
  return detail::chosen && detail::enabled.load(std::memory_order_relaxed) ? detail::chosen->name : "eigen";
}

bool enable(bool on) noexcept { return detail::enabled.exchange(on); }

}  // namespace oa::host_math
