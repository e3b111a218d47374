// oa::stl from code compiled by nvcc: a user's extended __host__ __device__
// lambda (nvcc --extended-lambda) is device-callable, so the call goes to
// the device, its GPU version a kernel over the lambda. Without a GPU, the
// emulated device runs it as the CPU function does; with one (OA_DEVICE=cuda
// in the GPU check), the kernel runs.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <oa/annotations/stl.hpp>

#include "support.hpp"

TEST_CASE("an extended __host__ __device__ lambda is device-callable: its transform runs on the device, paged") {
  std::vector<double> a(std::size_t{1} << 20);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i % 977) * 0.5 - 100.0;
  const auto f = [] __host__ __device__(double v) { return v * v + 1.0; };
  const auto g = [] __host__ __device__(double x, double y) { return x < y ? x : y; };
  std::vector<double> want(a.size()), want2(a.size());
  std::transform(a.begin(), a.end(), want.begin(), f);
  std::transform(a.begin(), a.end(), want.begin(), want2.begin(), g);
  const char* gpu = std::getenv("OA_TEST_REQUIRE_GPU");
  oa::config c = oa_test::emulated_config(std::size_t{4} << 20);  // 8 MB arrays through 4 MiB
  if (gpu && std::string(gpu) == "1") c.device = "cuda";
  oa_test::config_scope cs(c);
  oa::lazy<std::vector<double>> y = oa::stl::transform(a, f);
  CHECK(oa::stl::transform(a, y, g).get() == want2);
  CHECK(y.get() == want);
  const auto reps = oa::reports();
  REQUIRE(!reps.empty());
  for (const auto& r : reps) {
    CHECK(r.device.rfind(c.device, 0) == 0);  // "cuda (<the GPU's name>)" on a GPU
    CHECK(r.chunks > 1);
    CHECK(r.peak_device_bytes <= c.device_memory);
  }
}
