// A program written in the standard-parallelism style, as its author wrote
// it: STREAM's kernels, a dot product, a sum, a sort and a scan, each a
// standard algorithm with std::execution::par. It includes nothing of oa.
// examples/CMakeLists.txt builds it as it is (oa_example_stdpar_stream: the
// standard library's parallel algorithms on oneTBB) and with
// oa_offload(... STDPAR) (oa_example_stdpar_stream_offload), where the
// calls over its arrays run through oa's engine, chunked and paged (each
// family's from its OA_STDPAR_MIN; 0 below takes every one); the kernels
// with a lambda (scale, triad) stay with the standard library. Both print
// the same checksums, within floating-point rounding.
//
//   OA_DEVICE=emulated OA_DEVICE_MEMORY=8MiB OA_STDPAR_MIN=0 OA_REPORT=report.json oa_example_stdpar_stream_offload 4000000

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <execution>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  const long n = argc == 2 ? std::atol(argv[1]) : 1 << 22;
  if (argc > 2 || n < 1) {
    std::fprintf(stderr, "usage: %s [n]  (elements per array; default 4194304)\n", argv[0]);
    return 2;
  }
  namespace ex = std::execution;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<double> a(n), b(n), c(n);
  std::fill(ex::par, a.begin(), a.end(), 1.0);
  std::fill(ex::par, b.begin(), b.end(), 2.0);
  std::fill(ex::par, c.begin(), c.end(), 0.0);
  const double q = 3.0;
  for (int k = 0; k < 3; ++k) {
    std::copy(ex::par, a.begin(), a.end(), c.begin());                                      // copy
    std::transform(ex::par, c.begin(), c.end(), b.begin(), [q](double x) { return q * x; });  // scale
    std::transform(ex::par, a.begin(), a.end(), b.begin(), c.begin(), std::plus<>{});        // add
    std::transform(ex::par, b.begin(), b.end(), c.begin(), a.begin(),
                   [q](double x, double y) { return x + q * y; });  // triad
  }
  std::printf("stream: a %.15e  b %.15e  c %.15e\n", std::reduce(ex::par, a.begin(), a.end()),
              std::reduce(ex::par, b.begin(), b.end()), std::reduce(ex::par, c.begin(), c.end()));
  std::printf("dot: %.15e\n", std::transform_reduce(ex::par, a.begin(), a.end(), b.begin(), 0.0));

  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (auto& x : a) x = uniform(rng);
  std::vector<double> s(n);
  std::inclusive_scan(ex::par, a.begin(), a.end(), s.begin());
  std::printf("scan: last %.15e  middle %.15e\n", s[n - 1], s[n / 2]);
  std::sort(ex::par, a.begin(), a.end());
  std::printf("sort: first %.15e  middle %.15e  last %.15e  sorted %s\n", a[0], a[n / 2], a[n - 1],
              std::is_sorted(a.begin(), a.end()) ? "yes" : "no");
  std::vector<long> keys(n);
  for (auto& k : keys) k = static_cast<long>(rng() % 1000003);
  std::sort(ex::par_unseq, keys.begin(), keys.end(), std::greater<>{});
  std::printf("keys: first %ld  last %ld  count of the first %ld\n", keys[0], keys[n - 1],
              static_cast<long>(std::count(ex::par, keys.begin(), keys.end(), keys[0])));
  std::fprintf(stderr, "%.3f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
