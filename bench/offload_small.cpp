// oa-offload-small: what oa_offload() costs code it does not offload. Plain
// Eigen statements below the offload thresholds, run many times; built twice
// from this source, plain (oa-offload-small-plain) and with the hooks
// (oa-offload-small), so the two builds' times compare the hooks' checks
// against nothing. Prints the best of --repeat rounds per statement, in
// microseconds.
//
//   oa-offload-small-plain; oa-offload-small     (same machine, one after the other)

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>

namespace {

double best_microseconds(int rounds, int calls, const std::function<void()>& f) {
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s / calls * 1e6);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  if (argc > 1) {
    char* end = nullptr;
    const long r = std::strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || r < 1 || r > 1000) {
      std::fprintf(stderr, "%s: rounds: '%s' is not a count from 1 to 1000\n", argv[0], argv[1]);
      return 2;
    }
    rounds = static_cast<int>(r);
  }
#if defined(OA_OFFLOAD)
  const char* build = "with oa_offload";
#else
  const char* build = "plain";
#endif
  std::printf("oa-offload-small (%s build): best of %d rounds, microseconds per statement\n", build, rounds);
  double sink = 0;
  for (const int n : {16, 64, 144}) {  // 144^3 is below OA_OFFLOAD_GEMM_MIN's default (2^22)
    const Eigen::MatrixXd A = Eigen::MatrixXd::Random(n, n), B = Eigen::MatrixXd::Random(n, n);
    Eigen::MatrixXd C(n, n);
    const int calls = std::max(4, 2000000 / (n * n * n / 8 + 1));
    const double us = best_microseconds(rounds, calls, [&] { C.noalias() = A * B; });
    sink += C(0, 0);
    std::printf("gemm  n=%-7d %12.3f\n", n, us);
  }
  for (const int n : {1000, 100000, 500000}) {  // 500000 is below OA_OFFLOAD_ELEMENTS_MIN's default (2^19)
    const Eigen::ArrayXd a = Eigen::ArrayXd::Random(n) + 2.0, b = Eigen::ArrayXd::Random(n);
    Eigen::ArrayXd r(n);
    const int calls = std::max(4, 20000000 / n);
    const double cwise = best_microseconds(rounds, calls, [&] { r = (a * b + 1.0).exp() * 0.5 + a.sqrt(); });
    const double sum = best_microseconds(rounds, calls, [&] { sink += (a * b).sum(); });
    sink += r(0);
    std::printf("cwise n=%-7d %12.3f\nsum   n=%-7d %12.3f\n", n, cwise, n, sum);
  }
  return sink == 42.0 ? 1 : 0;  // keeps the results alive
}
