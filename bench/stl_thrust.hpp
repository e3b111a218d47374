#pragma once
// The in-core ceiling of oa-bench's sort on a GPU: thrust::sort of data that
// fits in GPU memory, copies in and out included (bench/stl_thrust.cu, built
// with the CUDA toolkit).

#include <cstdint>
#include <vector>

namespace oa_bench {
/// Copies x to the GPU, sorts it there with thrust::sort, copies it back.
/// Throws std::runtime_error when no GPU can run it.
template <class T>
void thrust_sort(std::vector<T>& x);
}  // namespace oa_bench
