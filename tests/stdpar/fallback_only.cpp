// A program none of whose parallel calls oa runs (the program's own
// callables): OA_REPORT must still list them under not_offloaded with their
// reason (no report was written before, since nothing else had configured
// the runtime). tests/stdpar/run_check.cmake checks the report. Exit
// status 1 on a wrong result.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <execution>
#include <vector>

int main() {
  namespace ex = std::execution;
  std::vector<std::int32_t> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i);
  std::sort(ex::par, v.begin(), v.end(), [](std::int32_t a, std::int32_t b) { return a > b; });
  std::atomic<std::int64_t> sum{0};
  std::for_each(ex::par_unseq, v.begin(), v.end(), [&](std::int32_t x) { sum += x; });
  const bool right = v.front() == 999 && v.back() == 0 && sum == 999 * 1000 / 2;
  std::printf("%s\n", right ? "right" : "WRONG");
  return right ? 0 : 1;
}
