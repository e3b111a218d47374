#include "stl_thrust.hpp"

#include <cuda_runtime_api.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/sort.h>

#include <stdexcept>
#include <string>

namespace oa_bench {

template <class T>
void thrust_sort(std::vector<T>& x) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw std::runtime_error("thrust::sort needs a GPU, and none is usable");
  thrust::device_vector<T> d(x.begin(), x.end());
  thrust::sort(d.begin(), d.end());
  thrust::copy(d.begin(), d.end(), x.begin());
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) throw std::runtime_error(std::string("thrust::sort: ") + cudaGetErrorString(e));
}

template void thrust_sort<std::int32_t>(std::vector<std::int32_t>&);
template void thrust_sort<std::int64_t>(std::vector<std::int64_t>&);
template void thrust_sort<float>(std::vector<float>&);
template void thrust_sort<double>(std::vector<double>&);

}  // namespace oa_bench
