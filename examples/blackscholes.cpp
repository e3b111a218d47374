// Black-Scholes through oa: the workload source (bench/workloads.hpp) is the
// plain Eigen program; instantiated with oa::lazy arrays it records a task
// graph that oa runs chunk by chunk on the configured device.
//
//   OA_DEVICE=emulated OA_DEVICE_MEMORY=16MiB OA_REPORT=report.json ./oa_example_blackscholes

#include <cstdio>
#include <oa/annotations/eigen_array.hpp>
#include <oa/oa.hpp>

#include "workloads.hpp"

int main() try {
  using Eigen::ArrayXd;
  const Eigen::Index n = 1 << 22;
  const ArrayXd price = 30.0 + 20.0 * ArrayXd::Random(n), strike = 30.0 + 20.0 * ArrayXd::Random(n),
                t = ArrayXd::Constant(n, 1.0), rate = ArrayXd::Constant(n, 0.03), vol = ArrayXd::Constant(n, 0.3);

  oa::lazy<ArrayXd> call, put;  // results; every temporary stays on the device
  oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);

  const ArrayXd& c = call.get();  // runs the 32 calls as one pipelined stage
  const ArrayXd& p = put.get();
  const oa::stage_report r = oa::total(oa::reports());
  std::printf("call[0] = %.6f, put[0] = %.6f\n", c[0], p[0]);
  std::printf("device %s: %zu chunks on %d streams, %.3f s, peak device memory %zu bytes\n", r.device.c_str(),
              r.chunks, r.streams, r.seconds, r.peak_device_bytes);
} catch (const oa::config_error& e) {  // a bad OA_* setting, or OA_DEVICE=cuda without a usable GPU
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
