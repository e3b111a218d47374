// A program using a user's own library through its annotation header: calls
// record into oa's graph and run when a result is asked for.

#include <cstdio>
#include <exception>
#include <vector>

#include "vecmath_oa.hpp"

int main() try {
  std::vector<double> a(1 << 20, 1.5), b(1 << 20, 2.0);
  auto c = vecmath::oa::add(a, b);     // lazy<std::vector<double>>
  vecmath::oa::scale(a, 2.0);          // updates a in place (after add has read it)
  auto d = vecmath::oa::dot(c, a);     // lazy<double>, merged over chunks
  std::printf("dot = %.1f (expected %.1f)\n", d.get(), 3.5 * 3.0 * (1 << 20));
  std::printf("a[0] = %.1f after scale\n", a[0]);
  return d.get() == 3.5 * 3.0 * (1 << 20) ? 0 : 1;
} catch (const oa::config_error& e) {  // a bad OA_* setting, or OA_DEVICE=cuda without a usable GPU
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
