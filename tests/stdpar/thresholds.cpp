// Each family's OA_STDPAR_MIN, run with OA_STDPAR_MIN=sort=1000,scan=5000
// (tests/CMakeLists.txt): a call just below its family's threshold stays
// with the standard library, one at it goes to the engine; a scan of 1000
// elements stays (sort's threshold is not scan's), and a transform keeps
// the elementwise default. tests/stdpar/run_check.cmake checks the report.
// Exit status 1 on a wrong result.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <execution>
#include <functional>
#include <numeric>
#include <vector>

namespace {

/// n values in descending order, so that a sort has work to do.
std::vector<std::int32_t> descending(std::size_t n) {
  std::vector<std::int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::int32_t>(n - i);
  return v;
}

bool sorted_right(std::size_t n) {
  std::vector<std::int32_t> v = descending(n);
  std::sort(std::execution::par, v.begin(), v.end());
  return v.front() == 1 && std::is_sorted(v.begin(), v.end());
}

bool scanned_right(std::size_t n) {
  const std::vector<std::int32_t> v = descending(n);
  std::vector<std::int32_t> out(n);
  std::inclusive_scan(std::execution::par, v.begin(), v.end(), out.begin());
  const auto total = static_cast<std::int64_t>(n) * static_cast<std::int64_t>(n + 1) / 2;
  return out.front() == static_cast<std::int32_t>(n) && out.back() == total;
}

}  // namespace

int main() {
  bool right = true;
  right = sorted_right(999) && right;    // below sort's threshold
  right = sorted_right(1000) && right;   // at it: the engine
  right = scanned_right(1000) && right;  // at sort's threshold, below scan's
  right = scanned_right(4999) && right;  // below scan's
  right = scanned_right(5000) && right;  // at it: the engine
  // Below the elementwise default.
  std::vector<double> a(5000, 1.0), b(5000, 2.0), c(5000);
  std::transform(std::execution::par, a.begin(), a.end(), b.begin(), c.begin(), std::plus<>{});
  right = c.front() == 3.0 && c.back() == 3.0 && right;
  std::printf("%s\n", right ? "right" : "WRONG");
  return right ? 0 : 1;
}
