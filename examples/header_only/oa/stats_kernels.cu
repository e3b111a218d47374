// stats' hand-written kernel (see stats_kernels.hpp).

#include "stats_kernels.hpp"

#include <cstddef>

#include <oa/cuda/device.hpp>
#include <oa/cuda/error.hpp>

namespace stats_oa::gpu {
namespace {

__global__ void standardize_kernel(double* x, std::size_t n, double mean, double sd) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    x[i] = (x[i] - mean) / sd;
}

}  // namespace

void standardize(const oa::stream_view& s, std::span<double> x, double mean, double sd) {
  const std::size_t blocks = (x.size() + 255) / 256;
  standardize_kernel<<<static_cast<unsigned>(blocks < 4096 ? (blocks ? blocks : 1) : 4096), 256, 0,
                       oa::cuda::native_stream(s)>>>(x.data(), x.size(), mean, sd);
  // A launch error is this call's error (a sticky fault loses the device; oa re-runs the chunk on the host).
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    oa::cuda::detail::throw_cuda(e, "stats standardize kernel", __FILE__, __LINE__);
}

}  // namespace stats_oa::gpu
