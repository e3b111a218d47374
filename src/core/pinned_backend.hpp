#pragma once
// Where pinned memory comes from: the host backend (src/core/pinned.cpp) or,
// with a usable GPU, the CUDA one (src/cuda/pinned_cuda.cpp). The core sees
// only this interface: no CUDA header in its host code.

#include <cstddef>
#include <memory>
#include <string>

namespace oa {
class pinned_memory_resource;
}

namespace oa::detail {

class pinned_backend {
 public:
  virtual ~pinned_backend() = default;
  /// "cuda" or "mmap".
  virtual const char* name() const noexcept = 0;
  /// Pinned memory for an arena of `bytes` (a multiple of 2 MiB), or nullptr
  /// with `why` set. `locked` says whether its pages are locked, and when not
  /// `why` says why.
  virtual void* allocate(std::size_t bytes, bool& locked, std::string& why) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  /// Pins a user's range; false with `why` when refused.
  virtual bool pin(void* p, std::size_t bytes, std::string& why) = 0;
  virtual void unpin(void* p, std::size_t bytes) noexcept = 0;
  /// Whether arenas get huge pages (MADV_HUGEPAGE with THP not 'never').
  virtual bool huge_pages() const noexcept { return false; }
};

/// Anonymous memory, MADV_HUGEPAGE, pre-touched by `threads` threads, mlock'ed.
std::unique_ptr<pinned_backend> make_host_pinned_backend(int threads);

/// The process-wide pool the devices' staging slots come from: a pool of
/// oa's own beside the program's pinned_memory(), whose stats() then count
/// only the program's blocks. Made at its first use, never destroyed.
pinned_memory_resource& staging_memory();

/// Whether p lies in an arena of some pinned_memory_resource (the registry).
bool in_pinned_arena(const void* p) noexcept;

#if defined(OA_HAS_CUDA)
/// cudaHostAlloc / cudaHostRegister; nullptr when no GPU is usable.
std::unique_ptr<pinned_backend> make_cuda_pinned_backend();
#endif

}  // namespace oa::detail
