#pragma once
// The CUDA device: the engine's stages on a GPU. Device memory from a
// stream-ordered pool kept under the budget; pageable data staged through
// pinned buffers filled and drained by host threads (OA_CUDA_STAGING=pinned,
// the default), or the host arrays of a stage pinned for direct DMA
// (OA_CUDA_STAGING=register: pinning costs more than the staging copies it
// saves, measured on an H100 in bench/results/2026-11-23-h100); one CUDA
// stream per pipeline slot; fused stage kernels compiled with NVRTC and cached.

#include <cstddef>
#include <memory>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "oa/core/device.hpp"

namespace oa::cuda {

struct options {
  int ordinal = 0;                              // which GPU
  std::size_t memory_budget = 0;                // 0: 80% of the free memory at start
  // A slot of the staging ring (16 per direction): on an H100 node, staging
  // through 8 MiB slots by 8 threads moved 0.98 of the link host-to-device,
  // through 32 MiB slots 0.59 (bench/results/2026-11-26-h100).
  std::size_t staging_bytes = std::size_t{8} << 20;
  int copy_threads = 0;                         // host threads filling/draining staging; 0: up to 8
  // Pin (cudaHostRegister) each stage's host arrays for direct DMA; off:
  // every pageable copy goes through the pinned staging buffers.
  bool register_host_memory = false;
};

/// GPUs this process can use; 0 when there is no driver, no device or any
/// error (the reason goes to `why` when given). Never throws.
int usable_devices(std::string* why = nullptr);

/// Throws oa::config_error naming the reason when no GPU can be used.
std::unique_ptr<device> make_device(const options& opt);

/// The cuBLAS handle bound to a stream of a CUDA device (created on first use).
cublasHandle_t blas_handle(device& dev, stream_id s);
/// The CUDA stream behind a stream id of a CUDA device.
cudaStream_t native_stream(device& dev, stream_id s);
/// The same, for the stream a device entry is given.
cublasHandle_t blas_handle(const stream_view& s);
cudaStream_t native_stream(const stream_view& s);

}  // namespace oa::cuda
