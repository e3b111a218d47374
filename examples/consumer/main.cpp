#include <cstdio>
#include <oa/annotations/eigen_array.hpp>
#include <oa/oa.hpp>

int main() {
  const Eigen::ArrayXd x = Eigen::ArrayXd::LinSpaced(100000, 0.0, 1.0);
  auto y = oa::ref(x) * 2.0 + 1.0;
  const double s = oa::sum(y).get();
  std::printf("sum = %.3f\n", s);
  return std::abs(s - 200000.0) < 1e-6 ? 0 : 1;
}
