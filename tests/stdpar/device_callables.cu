// An unmodified program compiled by nvcc (C++20, --extended-lambda) that
// calls the standard parallel algorithms with functors of its own, built
// with oa_offload(... STDPAR): lambdas without captures and a class marked
// device-callable go to oa's engine (a kernel over the functor on a GPU;
// the functor itself on the host and emulated devices); a lambda with
// captures and a host-only lambda stay with the standard library. Each
// result is compared with the same computation done without a policy.
// Exit status 1 on a difference; tests/stdpar/run_check.cmake reads the
// report (which calls ran as stages, which fell back and why).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <execution>
#include <functional>
#include <numeric>
#include <vector>

#if !defined(OA_OFFLOAD_STDPAR)
#error "built with oa_offload(... STDPAR)"
#endif

namespace {

/// A functor of the program's, marked device-callable.
struct clamp_unit {
  static constexpr bool oa_device_callable = true;
  __host__ __device__ double operator()(double x) const { return x < -1.0 ? -1.0 : (x > 1.0 ? 1.0 : x); }
};

int bad = 0;

template <class T>
void expect_equal(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      std::printf("%s: element %zu differs: %.17g, want %.17g\n", what, i, double(got[i]), double(want[i]));
      ++bad;
      return;
    }
}

void expect_near(const char* what, double got, double want) {
  if (!(std::fabs(got - want) <= 1e-9 * std::fmax(1.0, std::fabs(want)))) {
    std::printf("%s: %.17g, want %.17g\n", what, got, want);
    ++bad;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{1} << 20);
  std::vector<double> a(n), b(n);
  std::vector<std::int64_t> k(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<double>(i % 1009) * 0.01 - 5.0;
    b[i] = static_cast<double>(i % 577) * 0.5 - 100.0;
    k[i] = static_cast<std::int64_t>(i % 1000) - 500;
  }
  const auto square_plus_one = [] __host__ __device__(double x) { return x * x + 1.0; };
  const auto smaller = [] __host__ __device__(double x, double y) { return x < y ? x : y; };

  std::vector<double> want(n), got(n);
  std::transform(a.begin(), a.end(), want.begin(), square_plus_one);
  std::transform(std::execution::par, a.begin(), a.end(), got.begin(), square_plus_one);
  expect_equal("transform", got, want);

  std::transform(a.begin(), a.end(), b.begin(), want.begin(), smaller);
  std::transform(std::execution::par_unseq, a.begin(), a.end(), b.begin(), got.begin(), smaller);
  expect_equal("transform (binary)", got, want);

  std::vector<double> c = b;  // in place
  std::transform(b.begin(), b.end(), want.begin(), clamp_unit{});
  std::transform(std::execution::par, c.begin(), c.end(), c.begin(), clamp_unit{});
  expect_equal("transform in place (marked class)", c, want);

  c = a;
  want = a;
  const auto halve = [] __host__ __device__(double& x) { x *= 0.5; };
  std::for_each(want.begin(), want.end(), halve);
  std::for_each(std::execution::par_unseq, c.begin(), c.end(), halve);
  expect_equal("for_each", c, want);
  std::for_each_n(want.begin(), n / 2, halve);
  std::for_each_n(std::execution::par, c.begin(), n / 2, halve);
  expect_equal("for_each_n", c, want);

  const auto negative = [] __host__ __device__(std::int64_t x) { return x < 0; };
  const auto count = std::count_if(std::execution::par, k.begin(), k.end(), negative);
  if (count != std::count_if(k.begin(), k.end(), negative)) {
    std::printf("count_if: %lld\n", static_cast<long long>(count));
    ++bad;
  }

  const auto product = [] __host__ __device__(std::int64_t x, std::int64_t y) { return x * y + 1; };
  const std::int64_t dot = std::transform_reduce(std::execution::par, k.begin(), k.end(), k.begin(),
                                                 std::int64_t{7}, std::plus<>{}, product);
  if (dot != std::inner_product(k.begin(), k.end(), k.begin(), std::int64_t{7}, std::plus<>{}, product)) {
    std::printf("transform_reduce (binary): %lld\n", static_cast<long long>(dot));
    ++bad;
  }
  std::transform(a.begin(), a.end(), want.begin(), square_plus_one);
  expect_near("transform_reduce (unary)",
              std::transform_reduce(std::execution::par_unseq, a.begin(), a.end(), 0.0, std::plus<>{},
                                    square_plus_one),
              std::accumulate(want.begin(), want.end(), 0.0));

  // Stay with the standard library: a lambda with captures (what it holds
  // may point into host memory), and a lambda nvcc compiles for the host only.
  const double scale = 3.0;
  const auto scaled = [scale] __host__ __device__(double x) { return scale * x; };
  std::transform(a.begin(), a.end(), want.begin(), scaled);
  std::transform(std::execution::par, a.begin(), a.end(), got.begin(), scaled);
  expect_equal("transform with captures", got, want);
  const auto host_only = [](double x) { return x - 1.0; };
  std::transform(a.begin(), a.end(), want.begin(), host_only);
  std::transform(std::execution::par, a.begin(), a.end(), got.begin(), host_only);
  expect_equal("transform, host lambda", got, want);

  std::printf("%s (%zu elements)\n", bad ? "DIFFERENT" : "same results", n);
  return bad ? 1 : 0;
}
