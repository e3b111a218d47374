// Black-Scholes as a plain Eigen program: the 32 element-wise operations of
// the published benchmark (WORKLOADS.md), one Eigen statement each, over
// arrays of n doubles. It includes nothing of oa. examples/CMakeLists.txt
// builds it twice from this source: as it is (oa_example_eigen_blackscholes),
// and with oa_offload() (oa_example_eigen_blackscholes_offload), where each
// statement large enough runs through oa's engine as one stage, paged through
// the device in chunks. Both print the same checksums, within floating-point
// rounding.
//
//   oa_example_eigen_blackscholes_offload 4194304
//   OA_DEVICE=emulated OA_DEVICE_MEMORY=1MiB OA_REPORT=report.json oa_example_eigen_blackscholes_offload 1000000

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>  // ArrayBase::erf()

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>

namespace {

using Eigen::ArrayXd;

// The benchmark's constants, not the textbook formula's.
const double c05 = 3.0, c10 = 1.5, invsqrt2 = 1.0 / std::sqrt(2.0);

// One statement per operation, in WORKLOADS.md's order: each is evaluated
// whole before the next, as the NumPy original evaluates one call at a time.
void blackscholes(const ArrayXd& price, const ArrayXd& strike, const ArrayXd& t, const ArrayXd& rate,
                  const ArrayXd& vol, ArrayXd& call, ArrayXd& put) {
  ArrayXd rsig = vol * vol;
  rsig = rsig * c05;
  rsig = rsig + rate;
  ArrayXd vol_sqrt = t.sqrt();
  vol_sqrt = vol_sqrt * vol;
  ArrayXd tmp = rsig * t;
  ArrayXd d1 = price / strike;
  d1 = d1.log2();
  d1 = d1 + tmp;
  d1 = d1 / vol_sqrt;
  ArrayXd d2 = d1 - vol_sqrt;
  d1 = d1 * invsqrt2;
  d1 = d1.erf();
  d1 = d1 * c05;
  d1 = d1 + c05;
  d2 = d2 * invsqrt2;
  d2 = d2.erf();
  d2 = d2 * c05;
  d2 = d2 + c05;
  ArrayXd e_rt = rate * (-1.0);
  e_rt = e_rt * t;
  e_rt = e_rt.exp();
  tmp = price * d1;
  ArrayXd tmp2 = e_rt * strike;
  tmp2 = tmp2 * d2;
  call = tmp - tmp2;
  tmp = e_rt * strike;
  tmp2 = c10 - d2;
  put = tmp * tmp2;
  tmp = c10 - d1;
  tmp = price * tmp;
  put = put - tmp;
}

ArrayXd uniform(Eigen::Index n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  ArrayXd a(n);
  for (Eigen::Index i = 0; i < n; ++i) a[i] = dist(rng);
  return a;
}

// One line per result: its sum, three entries, its minimum and maximum, with
// 16 significant digits: finer than any tolerance the builds are compared with.
void print_checksums(const char* what, const ArrayXd& a) {
  const Eigen::Index mid = a.size() / 2, last = a.size() - 1;
  std::printf("%-4s sum %.15e  [0] %.15e  [%ld] %.15e  [%ld] %.15e  min %.15e  max %.15e\n", what, a.sum(), a[0],
              static_cast<long>(mid), a[mid], static_cast<long>(last), a[last], a.minCoeff(), a.maxCoeff());
}

}  // namespace

int main(int argc, char** argv) try {
  const long long max_n = 1LL << 31;
  long long n = 1 << 20;
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [n]  (elements per array; default 1048576)\n", argv[0]);
    return 2;
  }
  if (argc == 2) {
    char* end = nullptr;
    n = std::strtoll(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || n < 1 || n > max_n) {
      std::fprintf(stderr, "%s: n: '%s' is not an element count from 1 to %lld\n", argv[0], argv[1], max_n);
      return 2;
    }
  }
  std::printf("n = %lld\n", n);

  ArrayXd call, put;
  {
    // Random inputs in oa-bench's ranges: a constant input would hide an
    // element computed from the wrong index.
    std::mt19937_64 rng(42);
    const ArrayXd price = uniform(n, 10.0, 50.0, rng), strike = uniform(n, 10.0, 50.0, rng),
                  t = uniform(n, 0.1, 2.0, rng), rate = uniform(n, 0.01, 0.05, rng), vol = uniform(n, 0.1, 0.5, rng);
    const auto t0 = std::chrono::steady_clock::now();
    blackscholes(price, strike, t, rate, vol, call, put);
    // On stderr: the builds' outputs are compared line by line.
    std::fprintf(stderr, "blackscholes: %.3f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  print_checksums("call", call);
  print_checksums("put", put);

  // WORKLOADS.md's check: with every input 4.0, every call is 24 and every put 18.
  {
    const ArrayXd four = ArrayXd::Constant(n, 4.0);
    blackscholes(four, four, four, four, four, call, put);
  }
  const bool ok = (call - 24.0).abs().maxCoeff() <= 1e-5 && (put - 18.0).abs().maxCoeff() <= 1e-5;
  std::printf("check, every input 4.0: call %.15e .. %.15e, put %.15e .. %.15e: %s\n", call.minCoeff(),
              call.maxCoeff(), put.minCoeff(), put.maxCoeff(), ok ? "24 and 18 within 1e-5" : "WRONG, expected 24 and 18");
  return ok ? 0 : 1;
} catch (const std::exception& e) {  // std::bad_alloc for an n too large for this machine, ...
  std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
  return 1;
}
