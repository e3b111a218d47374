// The calls of calls.hpp through oa_offload's STDPAR overloads, against the
// same calls built without them (plain.cpp, linked into this program): equal
// results (integers exactly; float and double within their rounding, since
// the engine sums in another order, as std::reduce may). Exit status 1 on a
// difference. tests/stdpar/check.cmake runs it on a small emulated device
// and checks the report: which calls ran through the engine, which fell back.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#define STDPAR_CALLS stdpar_offloaded
#include "calls.hpp"

#if !defined(OA_OFFLOAD_STDPAR)
#error "built with oa_offload(... STDPAR)"
#endif

std::vector<double> plain_i32(std::size_t n);
std::vector<double> plain_i64(std::size_t n);
std::vector<double> plain_f32(std::size_t n);
std::vector<double> plain_f64(std::size_t n);

namespace {

int compare(const char* type, const std::vector<double>& got, const std::vector<double>& want, double tolerance) {
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double scale = std::fmax(1.0, std::fabs(want[i]));
    if (i >= got.size() || !(std::fabs(got[i] - want[i]) <= tolerance * scale)) {
      std::printf("%s: result %zu differs: %.17g through oa, %.17g plain\n", type, i, i < got.size() ? got[i] : NAN,
                  want[i]);
      ++bad;
    }
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{1} << 21);
  int bad = compare("int32", stdpar_offloaded::run<std::int32_t>(n), plain_i32(n), 0);
  bad += compare("int64", stdpar_offloaded::run<std::int64_t>(n), plain_i64(n), 0);
  bad += compare("float", stdpar_offloaded::run<float>(n), plain_f32(n), 1e-3);
  bad += compare("double", stdpar_offloaded::run<double>(n), plain_f64(n), 1e-9);
  // A prvalue policy: libstdc++ 12's own overloads do not compile with one
  // (a plain build cannot call this); the overloads here take it.
  std::vector<double> v = stdpar_offloaded::data<double>(n, 3);
  std::sort(std::execution::parallel_policy{}, v.begin(), v.end());
  if (!std::is_sorted(v.begin(), v.end())) {
    std::printf("sort with a prvalue policy: not sorted\n");
    ++bad;
  }
  std::printf("%s (%zu elements, C++%ld)\n", bad ? "DIFFERENT" : "same results", n, __cplusplus / 100 % 100);
  return bad ? 1 : 0;
}
