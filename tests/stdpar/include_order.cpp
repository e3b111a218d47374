// A program that includes <execution> before <algorithm> and <numeric>, as
// libstdc++'s own pstl tests do. libstdc++'s <execution> includes both
// headers before it declares its parallel algorithms, so the wrappers bring
// oa's overloads in only once <execution> is read (this did not compile
// before). Its taken calls must still reach the engine
// (tests/stdpar/run_check.cmake). Exit status 1 on a wrong result.

#include <execution>
#include <numeric>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

int main() {
  namespace ex = std::execution;
  const std::size_t n = 5000;
  std::vector<std::int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::int32_t>((i * 7919) % n);  // a permutation
  int bad = 0;
  std::sort(ex::par, v.begin(), v.end(), std::greater<>{});
  for (std::size_t i = 0; i < n; ++i) bad += v[i] != static_cast<std::int32_t>(n - 1 - i);
  const std::vector<std::int64_t> w(v.begin(), v.end());
  bad += std::reduce(ex::par_unseq, w.begin(), w.end()) != static_cast<std::int64_t>(n * (n - 1) / 2);
  std::vector<std::int64_t> s(n);
  std::exclusive_scan(ex::par, w.begin(), w.end(), s.begin(), std::int64_t{0});
  bad += s[n - 1] != static_cast<std::int64_t>(n * (n - 1) / 2);
  std::printf("%s\n", bad ? "WRONG" : "right");
  return bad ? 1 : 0;
}
