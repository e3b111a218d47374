#pragma once
// The GPU versions of oa::stl's algorithms that are not element-wise: CUB
// (CCCL) on the stream oa gives each chunk, in the scratch memory oa planned
// for it. Declared for int32, int64, float and double; defined in
// src/cuda/stl_cub.cu when oa is built with the CUDA toolkit (OA_HAS_CUDA).
// No CUDA header is needed to call them.

#include <cstddef>
#include <cstdint>
#include <span>

#include "oa/core/device.hpp"

namespace oa::cuda::stl {

// Each takes `scratch`, device memory for CUB's temporary storage, and
// throws oa::error naming the bytes needed when it is too small.

/// Sorts each run of `run` elements of in[0, n) (the last may be shorter)
/// into out, ascending or descending.
template <class T>
void sort_runs(const stream_view& s, const T* in, T* out, std::size_t n, std::size_t run, bool descending,
               std::span<std::byte> scratch);

/// sums[b] = the sum of in[b * block, min(n, (b + 1) * block)).
template <class T>
void block_sums(const stream_view& s, const T* in, std::size_t n, std::size_t block, T* sums,
                std::span<std::byte> scratch);
/// out[i] = init + in[0] + ... + in[i] (inclusive), or without in[i].
template <class T>
void scan_sum(const stream_view& s, const T* in, T* out, std::size_t n, T init, bool inclusive,
              std::span<std::byte> scratch);

/// The smallest (min) or largest element of in[0, n) and its index plus
/// `first`, the first of equal ones, written to *value and *index (device
/// memory); for n = 0, a value-initialised value and index -1.
template <class T>
void arg_extreme(const stream_view& s, const T* in, std::size_t n, std::size_t first, bool min, T* value,
                 std::int64_t* index, std::span<std::byte> scratch);

/// out[i] = value + (first + i), as std::iota's values.
template <class T>
void iota(const stream_view& s, T* out, std::size_t n, std::size_t first, T value);

}  // namespace oa::cuda::stl
