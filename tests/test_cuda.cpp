// The CUDA device: the bodies every device runs, on a GPU. Without a usable
// GPU the executable exits 77 (CTest: skipped), or fails when
// OA_TEST_REQUIRE_GPU=1.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bodies.hpp"
#include "oa/cuda/device.hpp"

namespace {

oa::config cuda_config(std::size_t budget = std::size_t{256} << 20) {
  oa::config c = oa_test::host_config();
  c.device = "cuda";
  c.device_memory = budget;
  c.host_threshold = 0;
  return c;
}

// GPU double-precision math is within an ulp or two of glibc's.
constexpr double gpu_tolerance = 1e-12;

}  // namespace

TEST_CASE("cuda: the workloads agree with plain Eigen") {
  oa_test::workloads_match_eigen(cuda_config(), gpu_tolerance);
}

TEST_CASE("cuda: paging through a small budget") { oa_test::paging_within_budget(cuda_config(), gpu_tolerance); }

TEST_CASE("cuda: a user library, in-place updates and reductions") {
  oa_test::library_calls(cuda_config(), gpu_tolerance);
}

TEST_CASE("cuda: stages run as one fused kernel per chunk, copies overlap kernels") {
  const std::size_t n = std::size_t{1} << 24;
  const Eigen::ArrayXd x = oa_test::random_array(n, 0.5, 2, 301), y = oa_test::random_array(n, 0.5, 2, 302);
  oa_test::config_scope cs(cuda_config(std::size_t{64} << 20));
  oa::lazy<Eigen::ArrayXd> r = exp(oa::ref(x)) * oa::ref(y) + 1.0;
  r = sqrt(r);
  CHECK(oa_test::mixed_error(r.get(), ((x.exp() * y + 1.0).sqrt()).eval()) <= gpu_tolerance);
  const auto t = oa_test::run_total();
  CHECK(t.device.rfind("cuda", 0) == 0);
  CHECK(t.chunks >= 8);
  CHECK(t.peak_device_bytes <= std::size_t{64} << 20);
  const double busy = t.h2d_seconds + t.compute_seconds + t.d2h_seconds;
  MESSAGE("wall ", t.seconds, " s; busy h2d ", t.h2d_seconds, " compute ", t.compute_seconds, " d2h ", t.d2h_seconds);
  CHECK(busy > t.seconds);  // phases overlapped
}

TEST_CASE("cuda: a budget too small for one unit is an error at get(), not a crash") {
  oa_test::config_scope cs(cuda_config(1024));
  Eigen::ArrayXd x = Eigen::ArrayXd::Random(1 << 20);
  auto r = exp(oa::ref(x)) + oa::ref(x);
  CHECK_THROWS_AS(r.get(), oa::error);
}

int main(int argc, char** argv) {
  std::string why;
  if (oa::cuda::usable_devices(&why) == 0) {
    const char* require = std::getenv("OA_TEST_REQUIRE_GPU");
    if (require && std::strcmp(require, "1") == 0) {
      std::fprintf(stderr, "test_cuda: OA_TEST_REQUIRE_GPU=1 but no usable GPU (%s)\n", why.c_str());
      return 1;
    }
    std::printf("test_cuda: skipped, no usable GPU (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
