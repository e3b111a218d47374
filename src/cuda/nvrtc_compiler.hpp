#pragma once
// Run-time compilation of generated stage kernels with NVRTC. Needs the CUDA
// toolkit's NVRTC library, not a GPU or a driver.

#include <string>
#include <vector>

#include "core/kernel_source.hpp"

namespace oa::cuda {

struct compiled_kernel {
  std::string name;
  std::vector<char> cubin;
  std::string log;  // compiler messages (warnings)
  bool from_cache = false;  // read from the kernel cache (kernel_cache.hpp), not compiled
};

/// `refresh`: compile even where the cache holds an entry (one the driver
/// would not load), and replace it.
enum class kernel_cache_use { read_write, refresh };

/// Compiles `k` for compute capability `major.minor` (e.g. 9.0) to CUBIN, or
/// takes the CUBIN compiled for exactly this source and these options (and
/// this NVRTC library and CUB headers) from the kernel cache. Throws
/// oa::error with the compiler's log when the source does not compile.
compiled_kernel compile(const oa::detail::kernel_source& k, int major, int minor,
                        kernel_cache_use use = kernel_cache_use::read_write);

/// Include directories for generated kernels (CCCL for CUB): OA_CUDA_INCLUDE
/// (colon-separated) if set, else the toolkit's directories found at build time.
std::vector<std::string> kernel_include_dirs();

}  // namespace oa::cuda
