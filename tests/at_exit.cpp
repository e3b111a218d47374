// oa called by destructors that run after the main thread's oa state has
// ended: a function-local static made after oa's first use, destroyed at
// exit after the thread's thread_locals. Its calls run as they are
// recorded (nothing would evaluate them later), give the plain results and
// throw their errors; the program exits 0 and prints them
// (tests/CMakeLists.txt).

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>

namespace {

/// x = -x, refusing negative elements.
inline constexpr auto checked_negate = oa::annotate<"checked negate">(
    oa::cpu([](auto& x) {
      for (auto& e : x) {
        if (e < 0) throw std::domain_error("checked negate: a negative element");
        e = -e;
      }
    }),
    oa::args(oa::mut<oa::split::contiguous>("x")));

struct table {
  std::vector<double> v;
  table() : v(200000) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 100003);
    oa::stl::sort(v);
    oa::evaluate();
  }
  ~table() {
    std::vector<double> want = v;
    std::sort(want.begin(), want.end(), std::greater<>{});
    oa::stl::sort(v, std::greater<>{});
    const bool sorted_at_once = v == want;  // read with no evaluation asked for
    const double total = oa::stl::reduce(v, 0.0).get();
    const bool right = sorted_at_once && total == std::accumulate(want.begin(), want.end(), 0.0);
    std::printf("at exit: %s (%g..%g, total %.17g)\n", right ? "right" : "WRONG", v.front(), v.back(), total);
    std::vector<double> bad{1, -2, 3};
    try {
      checked_negate(bad);
      std::printf("at exit: no error\n");
    } catch (const std::domain_error& e) {
      std::printf("at exit: the call threw '%s'; %s\n", e.what(), bad == std::vector<double>{1, -2, 3} ? "untouched" : "CHANGED");
    }
  }
};

const table& the_table() {
  static table t;
  return t;
}

}  // namespace

int main() {
  oa::evaluate();  // oa's state exists before the static's
  std::printf("main: %g\n", the_table().v.back());
  return 0;
}
