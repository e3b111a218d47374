// A bad OA_* setting found at the first evaluation: every call it took
// fails with that setting's error (none left pending, none lost), the
// caller's objects untouched; a call recorded later meets the same error.
// Prints one line per outcome (tests/CMakeLists.txt checks them).

#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>

namespace {
template <class F>
std::string outcome(F&& f) {
  try {
    f();
  } catch (const oa::config_error& e) {
    return std::string("config_error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other error: ") + e.what();
  }
  return "no error";
}
}  // namespace

int main() {
  std::vector<double> a(1 << 16), w(1 << 16, 1.0);
  std::iota(a.begin(), a.end(), 0.5);
  auto neg = oa::stl::transform(a, std::negate<>{});
  auto sum = oa::stl::reduce(a, 0.0);
  oa::stl::fill(w, 7.0);
  std::printf("first get: %s\n", outcome([&] { (void)neg.get(); }).c_str());
  std::printf("other get: %s\n", outcome([&] { (void)sum.get(); }).c_str());
  std::printf("evaluate: %s\n", outcome([] { oa::evaluate(); }).c_str());
  std::printf("w untouched: %s\n", w[0] == 1.0 && w.back() == 1.0 ? "yes" : "no");
  auto later = oa::stl::transform(a, std::negate<>{});
  std::printf("later get: %s\n", outcome([&] { (void)later.get(); }).c_str());
}
