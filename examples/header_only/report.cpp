// A program using stats, as its users write it: nothing of oa in it. Built
// as it is (oa_example_stats_report) and rebuilt with stats' annotations
// (oa_example_stats_report_offload, see ../CMakeLists.txt): both print the
// same.
//
//   oa_example_stats_report [samples]

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <stats/stats.hpp>

namespace {

/// `n` reproducible values in [-4, 4).
std::vector<double> samples(std::size_t n) {
  std::vector<double> x(n);
  std::uint64_t s = 42;
  for (double& v : x) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v = -4.0 + 8.0 * static_cast<double>(s >> 11) * 0x1.0p-53;
  }
  return x;
}

void print(const char* what, const std::vector<double>& v) {
  std::printf("%-12s sum %.12e  first %.12e  last %.12e\n", what, stats::sum(v), v.front(), v.back());
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{1} << 20;
  const std::vector<double> x = samples(n);

  std::vector<double> density(n), cdf(n), poly(n);
  stats::dnorm(x, density, 0.5, 1.5);
  stats::pnorm(x, cdf);  // the standard normal: default mean and sd
  stats::cubic(x, poly, 0.25, 1.5, -0.02, 0.001);
  std::vector<double> z = x;
  stats::standardize(z, 0.5, 1.5);
  std::vector<double> bounded = z;
  stats::clamp(bounded, -1.0, 1.0);

  print("x", x);
  print("dnorm", density);
  print("pnorm", cdf);
  print("cubic", poly);
  print("standardize", z);
  print("clamp", bounded);
  // One value: stats' own overloads, beside the vector ones.
  std::printf("one value    dnorm %.12e  pnorm %.12e  clamp %.12e\n", stats::dnorm(0.3, 0.0, 1.0),
              stats::pnorm(1.0), stats::clamp(2.5, -1.0, 1.0));
  return 0;
}
