// Eigen's dense storage from the pinned pool (oa/eigen/pinned_storage.hpp):
// the run-time side of the specialisations every unit shares.
#include "oa/eigen/pinned_storage.hpp"

#include <atomic>
#include <cstdint>

#include "core/pinned_backend.hpp"
#include "oa/core/pinned.hpp"

namespace oa::eigen_hooks {

namespace {
// Blocks of this many bytes or more come from the pool; SIZE_MAX: routing off.
std::atomic<std::size_t> min_bytes{SIZE_MAX};
constexpr std::size_t alignment = 64;  // Eigen's widest (AVX-512)
}  // namespace

void enable_pinned_storage(std::size_t m) noexcept {
  m = m == 0 ? 1 : m;
  std::size_t current = min_bytes.load();
  while (m < current && !min_bytes.compare_exchange_weak(current, m)) {
  }
}

void* pinned_storage_allocate(std::size_t bytes) {
  if (bytes == 0 || bytes < min_bytes.load(std::memory_order_relaxed)) return nullptr;
  return pinned_memory().allocate(bytes, alignment);
}

bool pinned_storage_owns(const void* p) noexcept {
  // Only pinned_storage_allocate gives pool memory to Eigen: none while
  // routing was never on. Then the registry (a shared lock): most blocks lie
  // in no arena.
  if (!p || min_bytes.load(std::memory_order_relaxed) == SIZE_MAX) return false;
  return detail::in_pinned_arena(p) && pinned_memory().owns(p);
}

bool pinned_storage_free(void* p) noexcept {
  if (!pinned_storage_owns(p)) return false;
  pinned_memory().deallocate(p, 0, alignment);  // the pool knows the block's size
  return true;
}

}  // namespace oa::eigen_hooks
