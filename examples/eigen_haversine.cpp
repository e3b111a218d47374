// Haversine as a plain Eigen program: the distances in miles from a fixed
// point to n others, the 16 element-wise operations of WORKLOADS.md, one Eigen
// statement each, over arrays of doubles. It includes nothing of oa.
// examples/CMakeLists.txt builds it twice from this source: as it is
// (oa_example_eigen_haversine), and with oa_offload()
// (oa_example_eigen_haversine_offload), where each statement large enough runs
// through oa's engine as one stage, paged through the device in chunks. Both
// print the same checksums, within floating-point rounding.
//
//   oa_example_eigen_haversine_offload 4194304
//   OA_DEVICE=emulated OA_DEVICE_MEMORY=1MiB OA_REPORT=report.json oa_example_eigen_haversine_offload 1000000

#include <Eigen/Core>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>

namespace {

using Eigen::ArrayXd;

// The fixed point (radians) and the Earth's radius in miles.
const double lat1 = 0.70984286, lon1 = 1.23892197, miles = 3959.0;

// One statement per operation, in WORKLOADS.md's order: each is evaluated
// whole before the next, as the NumPy original evaluates one call at a time.
void haversine(const ArrayXd& lat2, const ArrayXd& lon2, ArrayXd& a) {
  ArrayXd dlat = lat2 - lat1;
  ArrayXd dlon = lon2 - lon1;
  dlat = dlat / 2.0;
  dlat = dlat.sin();
  dlat = dlat * dlat;
  a = lat2.cos();
  a = a * std::cos(lat1);
  dlon = dlon / 2.0;
  dlon = dlon.sin();
  dlon = dlon * dlon;
  a = a * dlon;
  a = dlat + a;
  a = a.sqrt();
  a = a.asin();
  a = a * 2.0;
  a = a * miles;
}

ArrayXd uniform(Eigen::Index n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  ArrayXd a(n);
  for (Eigen::Index i = 0; i < n; ++i) a[i] = dist(rng);
  return a;
}

// Its sum, three entries, its minimum and maximum, with 16 significant
// digits: finer than any tolerance the builds are compared with.
void print_checksums(const char* what, const ArrayXd& a) {
  const Eigen::Index mid = a.size() / 2, last = a.size() - 1;
  std::printf("%s sum %.15e  [0] %.15e  [%ld] %.15e  [%ld] %.15e  min %.15e  max %.15e\n", what, a.sum(), a[0],
              static_cast<long>(mid), a[mid], static_cast<long>(last), a[last], a.minCoeff(), a.maxCoeff());
}

}  // namespace

int main(int argc, char** argv) try {
  const long long max_n = 1LL << 31;
  long long n = 1 << 20;
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [n]  (points; default 1048576)\n", argv[0]);
    return 2;
  }
  if (argc == 2) {
    char* end = nullptr;
    n = std::strtoll(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || n < 1 || n > max_n) {
      std::fprintf(stderr, "%s: n: '%s' is not a count of points from 1 to %lld\n", argv[0], argv[1], max_n);
      return 2;
    }
  }
  std::printf("n = %lld\n", n);

  ArrayXd a;
  {
    // Random points in oa-bench's ranges (radians, away from the poles): a
    // constant input would hide an element computed from the wrong index.
    std::mt19937_64 rng(42);
    const ArrayXd lat2 = uniform(n, -1.5, 1.5, rng), lon2 = uniform(n, -1.5, 1.5, rng);
    const auto t0 = std::chrono::steady_clock::now();
    haversine(lat2, lon2, a);
    // On stderr: the builds' outputs are compared line by line.
    std::fprintf(stderr, "haversine: %.3f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  print_checksums("miles", a);

  // WORKLOADS.md's check: from (0.0698132, 0.0698132) every distance is 4839.95983063.
  {
    const ArrayXd point = ArrayXd::Constant(n, 0.0698132);
    haversine(point, point, a);
  }
  const double expected = 4839.95983063;
  const bool ok = (a - expected).abs().maxCoeff() <= 1e-6;
  std::printf("check, every point (0.0698132, 0.0698132): %.15e .. %.15e: %s\n", a.minCoeff(), a.maxCoeff(),
              ok ? "4839.95983063 within 1e-6" : "WRONG, expected 4839.95983063");
  return ok ? 0 : 1;
} catch (const std::exception& e) {  // std::bad_alloc for an n too large for this machine, ...
  std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
  return 1;
}
