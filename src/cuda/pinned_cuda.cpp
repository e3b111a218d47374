// Pinned memory from the CUDA driver: cudaHostAlloc for the pool's arenas,
// cudaHostRegister for oa::pin. Portable: pinned for every GPU of the process.
#include <cuda_runtime.h>

#include <string>

#include "core/pinned_backend.hpp"
#include "oa/cuda/device.hpp"

namespace oa::detail {

namespace {

std::string describe(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

class cuda_backend final : public pinned_backend {
 public:
  const char* name() const noexcept override { return "cuda"; }

  void* allocate(std::size_t bytes, bool& locked, std::string& why) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      why = "cudaHostAlloc of " + std::to_string(bytes) + " bytes failed (" + describe(e) + ")";
      return nullptr;
    }
    locked = true;
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override { (void)cudaFreeHost(p); }

  bool pin(void* p, std::size_t bytes, std::string& why) override {
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    if (e == cudaSuccess) return true;
    (void)cudaGetLastError();
    why = "cudaHostRegister failed (" + describe(e) + ")";
    return false;
  }
  void unpin(void* p, std::size_t) noexcept override {
    if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
  }
};

}  // namespace

std::unique_ptr<pinned_backend> make_cuda_pinned_backend() {
  if (cuda::usable_devices() == 0) return nullptr;
  return std::make_unique<cuda_backend>();
}

}  // namespace oa::detail
