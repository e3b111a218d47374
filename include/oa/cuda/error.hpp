#pragma once
// Checked CUDA and cuBLAS calls: every failure names the call site, the call,
// and the error's name and message.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "oa/core/error.hpp"

namespace oa::cuda {

/// A CUDA or cuBLAS call that failed and left the device usable (a misuse, a
/// launch asking for too much): an ordinary error of the call that made it.
class cuda_error : public error {
 public:
  cuda_error(const std::string& what, int code) : error(what), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// A CUDA failure after which the device cannot be used (a kernel fault
/// corrupts its context for good): the runtime gives up on the device, and
/// runs what it had not finished on the host.
class cuda_fault : public device_fault {
 public:
  cuda_fault(const std::string& what, int code) : device_fault(what), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

namespace detail {
/// Whether `e` leaves the CUDA context unusable (every later call fails).
bool is_sticky(cudaError_t e) noexcept;
/// Whether a cuBLAS status means its kernel failed on the device.
bool is_sticky(cublasStatus_t s) noexcept;
[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);
std::string describe(cudaError_t e);
}  // namespace detail

}  // namespace oa::cuda

#define OA_CUDA_TRY(call)                                                             \
  do {                                                                                \
    const cudaError_t oa_cuda_status_ = (call);                                       \
    if (oa_cuda_status_ != cudaSuccess)                                               \
      ::oa::cuda::detail::throw_cuda(oa_cuda_status_, #call, __FILE__, __LINE__);     \
  } while (false)

/// Throws oa::cuda::cuda_fault for a sticky error, oa::cuda::cuda_error otherwise.
/// For destructors: reports nothing, throws nothing.
#define OA_CUDA_TRY_NOTHROW(call) static_cast<void>(call)

#define OA_CUBLAS_TRY(call)                                                           \
  do {                                                                                \
    const cublasStatus_t oa_cublas_status_ = (call);                                  \
    if (oa_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::oa::cuda::detail::throw_cublas(oa_cublas_status_, #call, __FILE__, __LINE__); \
  } while (false)
