// geo's hand-written kernels (see geo_kernels.hpp).

#include "geo_kernels.hpp"

#include <geo/series.hpp>
#include <oa/cuda/device.hpp>
#include <oa/cuda/error.hpp>

#include <stdexcept>
#include <string>

namespace geo_oa::gpu {
namespace {

__global__ void calibrate_kernel(const double* in, std::size_t n, double c0, double c1, double c2, double c3,
                                 double* out) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const double x = in[i];
    out[i] = c0 + x * (c1 + x * (c2 + x * c3));
  }
}

__global__ void clamp_kernel(double* x, std::size_t n, double a, double b) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    x[i] = x[i] < a ? a : x[i] > b ? b : x[i];
}

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 4096 ? (b ? b : 1) : 4096);
}

/// The launch's error, taken (cleared) and thrown as oa classifies CUDA
/// errors: a sticky fault loses the device, and oa re-runs the chunk on the host.
void check(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) oa::cuda::detail::throw_cuda(e, what, __FILE__, __LINE__);
}

}  // namespace

void calibrate(const oa::stream_view& s, device_series<const double> in, const geo_plain::Polynomial& p,
               device_series<double> out) {
  calibrate_kernel<<<blocks_for(in.size), 256, 0, oa::cuda::native_stream(s)>>>(in.data, in.size, p.c[0], p.c[1],
                                                                                 p.c[2], p.c[3], out.data);
  check("geo calibrate kernel");
}

void clamp(const oa::stream_view& s, device_series<double> x, double lo, double hi) {
  clamp_kernel<<<blocks_for(x.size), 256, 0, oa::cuda::native_stream(s)>>>(x.data, x.size, lo / x.scale,
                                                                            hi / x.scale);
  check("geo clamp kernel");
}

}  // namespace geo_oa::gpu
