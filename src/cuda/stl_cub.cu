// oa::stl's GPU versions over CUB (see oa/cuda/stl.hpp).

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <string>

#include "oa/core/error.hpp"
#include "oa/cuda/device.hpp"
#include "oa/cuda/error.hpp"
#include "oa/cuda/stl.hpp"

namespace oa::cuda::stl {
namespace {

/// A CUDA error as oa classifies it (a sticky fault loses the device; its
/// chunks re-run on the host); the launch error CUB or a kernel left is cleared.
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) e = cudaGetLastError();
  else (void)cudaGetLastError();
  if (e != cudaSuccess) detail::throw_cuda(e, what, __FILE__, __LINE__);
}

/// CUB's temporary storage, from the chunk's scratch memory.
void* temporary(std::span<std::byte> scratch, std::size_t bytes, const char* what) {
  if (bytes > scratch.size())
    throw error(std::string("oa::stl on the GPU: ") + what + " needs " + std::to_string(bytes) +
                " bytes of temporary storage, more than the " + std::to_string(scratch.size()) + " planned");
  return scratch.data();
}

/// Where block b begins and ends in an array of n elements.
struct block_bound {
  std::size_t block, n;
  bool end;
  __host__ __device__ std::size_t operator()(std::size_t b) const {
    const std::size_t at = (b + (end ? 1 : 0)) * block;
    return at < n ? at : n;
  }
};

/// The chunk's index made the range's (or the empty chunk's identity).
template <class T>
__global__ void finish_position(T* value, std::int64_t* index, std::size_t n, std::size_t first) {
  if (n == 0) {
    *value = T{};
    *index = -1;
  } else {
    *index += static_cast<std::int64_t>(first);
  }
}

template <class T>
__global__ void iota_kernel(T* out, std::size_t n, std::size_t first, T value) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<T>(value + static_cast<T>(first + i));
}

}  // namespace

template <class T>
void sort_runs(const stream_view& s, const T* in, T* out, std::size_t n, std::size_t run, bool descending,
               std::span<std::byte> scratch) {
  const cudaStream_t cs = native_stream(s);
  for (std::size_t from = 0; from < n; from += run) {
    const int m = static_cast<int>(n - from < run ? n - from : run);
    std::size_t bytes = 0;
    check(descending ? cub::DeviceRadixSort::SortKeysDescending(nullptr, bytes, in + from, out + from, m, 0,
                                                                int(sizeof(T) * 8), cs)
                     : cub::DeviceRadixSort::SortKeys(nullptr, bytes, in + from, out + from, m, 0,
                                                      int(sizeof(T) * 8), cs),
          "sizing a radix sort");
    void* tmp = temporary(scratch, bytes, "a run's radix sort");
    check(descending ? cub::DeviceRadixSort::SortKeysDescending(tmp, bytes, in + from, out + from, m, 0,
                                                                int(sizeof(T) * 8), cs)
                     : cub::DeviceRadixSort::SortKeys(tmp, bytes, in + from, out + from, m, 0, int(sizeof(T) * 8),
                                                      cs),
          "a run's radix sort");
  }
}

template <class T>
void block_sums(const stream_view& s, const T* in, std::size_t n, std::size_t block, T* sums,
                std::span<std::byte> scratch) {
  const cudaStream_t cs = native_stream(s);
  const std::size_t blocks = (n + block - 1) / block;
  if (blocks == 0) return;
  const thrust::counting_iterator<std::size_t> counting(0);
  const auto begins = thrust::make_transform_iterator(counting, block_bound{block, n, false});
  const auto ends = thrust::make_transform_iterator(counting, block_bound{block, n, true});
  std::size_t bytes = 0;
  check(cub::DeviceSegmentedReduce::Sum(nullptr, bytes, in, sums, static_cast<int>(blocks), begins, ends, cs),
        "sizing the block sums");
  check(cub::DeviceSegmentedReduce::Sum(temporary(scratch, bytes, "the block sums"), bytes, in, sums,
                                        static_cast<int>(blocks), begins, ends, cs),
        "the block sums");
}

template <class T>
void scan_sum(const stream_view& s, const T* in, T* out, std::size_t n, T init, bool inclusive,
              std::span<std::byte> scratch) {
  if (n == 0) return;
  const cudaStream_t cs = native_stream(s);
  std::size_t bytes = 0;
  if (inclusive) {
    check(cub::DeviceScan::InclusiveScanInit(nullptr, bytes, in, out, ::cuda::std::plus<>{}, init, n, cs),
          "sizing a scan");
    check(cub::DeviceScan::InclusiveScanInit(temporary(scratch, bytes, "a scan"), bytes, in, out,
                                             ::cuda::std::plus<>{}, init, n, cs),
          "a scan");
  } else {
    check(cub::DeviceScan::ExclusiveScan(nullptr, bytes, in, out, ::cuda::std::plus<>{}, init, n, cs), "sizing a scan");
    check(cub::DeviceScan::ExclusiveScan(temporary(scratch, bytes, "a scan"), bytes, in, out, ::cuda::std::plus<>{},
                                         init, n, cs),
          "a scan");
  }
}

template <class T>
void arg_extreme(const stream_view& s, const T* in, std::size_t n, std::size_t first, bool min, T* value,
                 std::int64_t* index, std::span<std::byte> scratch) {
  const cudaStream_t cs = native_stream(s);
  if (n > 0) {
    const auto items = static_cast<std::int64_t>(n);
    std::size_t bytes = 0;
    check(min ? cub::DeviceReduce::ArgMin(nullptr, bytes, in, value, index, items, cs)
              : cub::DeviceReduce::ArgMax(nullptr, bytes, in, value, index, items, cs),
          "sizing an extremum");
    void* tmp = temporary(scratch, bytes, "an extremum");
    check(min ? cub::DeviceReduce::ArgMin(tmp, bytes, in, value, index, items, cs)
              : cub::DeviceReduce::ArgMax(tmp, bytes, in, value, index, items, cs),
          "an extremum");
  }
  finish_position<<<1, 1, 0, cs>>>(value, index, n, first);
  check(cudaSuccess, "an extremum's position");
}

template <class T>
void iota(const stream_view& s, T* out, std::size_t n, std::size_t first, T value) {
  if (n == 0) return;
  const std::size_t grid = (n + 255) / 256;
  iota_kernel<<<static_cast<unsigned>(grid < 4096 ? grid : 4096), 256, 0, native_stream(s)>>>(out, n, first, value);
  check(cudaSuccess, "iota");
}

#define OA_STL_INSTANTIATE(T)                                                                                       \
  template void sort_runs<T>(const stream_view&, const T*, T*, std::size_t, std::size_t, bool, std::span<std::byte>); \
  template void block_sums<T>(const stream_view&, const T*, std::size_t, std::size_t, T*, std::span<std::byte>);     \
  template void scan_sum<T>(const stream_view&, const T*, T*, std::size_t, T, bool, std::span<std::byte>);           \
  template void iota<T>(const stream_view&, T*, std::size_t, std::size_t, T);                                       \
  template void arg_extreme<T>(const stream_view&, const T*, std::size_t, std::size_t, bool, T*, std::int64_t*,      \
                               std::span<std::byte>);
OA_STL_INSTANTIATE(std::int32_t)
OA_STL_INSTANTIATE(std::int64_t)
OA_STL_INSTANTIATE(float)
OA_STL_INSTANTIATE(double)
#undef OA_STL_INSTANTIATE

}  // namespace oa::cuda::stl
