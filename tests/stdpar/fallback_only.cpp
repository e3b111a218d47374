// A program none of whose parallel calls oa runs (the program's own
// callables): OA_REPORT must still list them under not_offloaded with their
// reason (no report was written before, since nothing else had configured
// the runtime), a class marked device-callable among them (taken only where
// the calling code is nvcc's). tests/stdpar/run_check.cmake checks the
// report. Exit status 1 on a wrong result.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <execution>
#include <functional>
#include <numeric>
#include <vector>

/// Marked device-callable, but compiled by the host compiler: no kernel over it exists.
struct twice {
  static constexpr bool oa_device_callable = true;
  std::int32_t operator()(std::int32_t x) const { return 2 * x; }
};

int main() {
  namespace ex = std::execution;
  std::vector<std::int32_t> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i);
  std::sort(ex::par, v.begin(), v.end(), [](std::int32_t a, std::int32_t b) { return a > b; });
  std::atomic<std::int64_t> sum{0};
  std::for_each(ex::par_unseq, v.begin(), v.end(), [&](std::int32_t x) { sum += x; });
  std::vector<std::int32_t> w(v.size());
  std::transform(ex::par, v.begin(), v.end(), w.begin(), twice{});
  // Ranges of two element types, and an init of another type: the library's,
  // each counted once under the algorithm called (libstdc++ runs reduce as
  // transform_reduce: not counted again).
  std::vector<double> d(v.size());
  std::transform(ex::par, v.begin(), v.end(), d.begin(), std::negate<>{});
  const double total = std::reduce(ex::par, v.begin(), v.end(), 0.0);
  const bool right = v.front() == 999 && v.back() == 0 && sum == 999 * 1000 / 2 && w.front() == 1998 && d[1] == -998 && total == 999 * 1000 / 2;
  std::printf("%s\n", right ? "right" : "WRONG");
  return right ? 0 : 1;
}
