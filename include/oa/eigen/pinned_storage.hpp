#pragma once
// Eigen's dense storage from oa's pinned pool (oa::pinned_memory()): what
// oa_offload(<target> PINNED_ALLOCATIONS) gives a program, so that the data
// of its large matrices and arrays crosses the link to a GPU without a
// staging copy.
//
// Eigen 3.4 has no allocator hook for its dense storage (aligned_malloc and
// aligned_free are plain inline functions). What every dynamic-size Matrix
// and Array (DenseStorage) calls is one of three function templates,
// internal::conditional_aligned_{new,delete,realloc_new}_auto<T, true>; this
// header specialises them for float and double. The specialisations decide
// at run time, the same way in every unit that sees them:
//
// - allocation: blocks of at least the threshold come from the pool once a
//   unit built with OA_OFFLOAD_PINNED_ALLOCATIONS=<bytes> has started (it
//   turns the routing on for the process); others from Eigen's aligned_malloc;
// - free: memory of the pool goes back to it (the registry of pinned ranges
//   knows it), any other through Eigen's aligned_free; so a block may be
//   allocated in one unit and freed in another, before or after the routing
//   was turned on;
// - resize keeping the coefficients (conservativeResize): a block that comes
//   from or goes to the pool is moved (allocated, copied, freed), others are
//   realloc'ed as Eigen does.
//
// Since the specialisations behave the same everywhere, the linker may keep
// any unit's copy of them, or of an Eigen function they are inlined in. The
// one requirement, as for every oa_offload hook: each translation unit that
// creates or frees float or double Eigen storage must see this header (a
// unit without it frees pool memory with std::free: a crash). oa_offload()
// brings it with the hooks after every Eigen include; oa's own units that
// use Eigen's real namespace include it first.

#ifdef __cplusplus

#include <Eigen/Core>
#include <cstddef>
#include <cstring>

#if !(EIGEN_WORLD_VERSION == 3 && EIGEN_MAJOR_VERSION == 4)
#error "oa/eigen/pinned_storage.hpp is written for Eigen 3.4 (its internal allocation templates)"
#endif

namespace oa {
namespace eigen_hooks {

/// Routes Eigen storage blocks of min_bytes or more to the pinned pool, for
/// the whole process (the smallest threshold asked for wins).
void enable_pinned_storage(std::size_t min_bytes) noexcept;
/// A pool block of `bytes`, or nullptr when routing is off or bytes is below
/// the threshold. Throws std::bad_alloc when the pool cannot grow.
void* pinned_storage_allocate(std::size_t bytes);
/// Whether p is a block of the pool's (routing on or off).
bool pinned_storage_owns(const void* p) noexcept;
/// Returns p to the pool and true when it is a block of the pool's; false
/// otherwise (the caller frees it).
bool pinned_storage_free(void* p) noexcept;

/// The specialisations' bodies (below).
template <class T>
T* pinned_storage_new(std::size_t size) {
  if (size == 0) return 0;
  Eigen::internal::check_size_for_overflow<T>(size);
  if (void* p = pinned_storage_allocate(sizeof(T) * size)) return static_cast<T*>(p);
  return static_cast<T*>(Eigen::internal::aligned_malloc(sizeof(T) * size));
}

template <class T>
void pinned_storage_delete(T* p) {
  if (p && pinned_storage_free(p)) return;
  Eigen::internal::aligned_free(p);
}

template <class T>
T* pinned_storage_realloc(T* p, std::size_t new_size, std::size_t old_size) {
  Eigen::internal::check_size_for_overflow<T>(new_size);
  Eigen::internal::check_size_for_overflow<T>(old_size);
  const bool from_pool = p && pinned_storage_owns(p);
  T* const to_pool = new_size ? static_cast<T*>(pinned_storage_allocate(sizeof(T) * new_size)) : 0;
  if (!from_pool && !to_pool)  // neither block is the pool's: as Eigen does
    return static_cast<T*>(Eigen::internal::aligned_realloc(p, sizeof(T) * new_size, sizeof(T) * old_size));
  // Moved; when the allocation throws, p is left as it was.
  T* const r = to_pool ? to_pool : pinned_storage_new<T>(new_size);
  if (p && r) std::memcpy(r, p, sizeof(T) * (new_size < old_size ? new_size : old_size));
  pinned_storage_delete(p);
  return r;
}

}  // namespace eigen_hooks
}  // namespace oa

namespace Eigen {
namespace internal {

#define OA_EIGEN_PINNED_STORAGE(T)                                                                   \
  template <>                                                                                        \
  inline T* conditional_aligned_new_auto<T, true>(std::size_t size) {                                \
    return oa::eigen_hooks::pinned_storage_new<T>(size);                                            \
  }                                                                                                  \
  template <>                                                                                        \
  inline void conditional_aligned_delete_auto<T, true>(T * ptr, std::size_t) {                       \
    oa::eigen_hooks::pinned_storage_delete(ptr);                                                    \
  }                                                                                                  \
  template <>                                                                                        \
  inline T* conditional_aligned_realloc_new_auto<T, true>(T * ptr, std::size_t new_size, std::size_t old_size) { \
    return oa::eigen_hooks::pinned_storage_realloc(ptr, new_size, old_size);                        \
  }
OA_EIGEN_PINNED_STORAGE(float)
OA_EIGEN_PINNED_STORAGE(double)
#undef OA_EIGEN_PINNED_STORAGE

}  // namespace internal
}  // namespace Eigen

// oa_offload(<target> PINNED_ALLOCATIONS [PINNED_MIN <bytes>]): each unit
// turns the routing on as it starts, before its own static objects.
#if defined(OA_OFFLOAD_PINNED_ALLOCATIONS) && OA_OFFLOAD_PINNED_ALLOCATIONS
namespace oa {
namespace eigen_hooks {
namespace {
struct pinned_storage_enabler {
  pinned_storage_enabler() { enable_pinned_storage(static_cast<std::size_t>(OA_OFFLOAD_PINNED_ALLOCATIONS)); }
};
const pinned_storage_enabler pinned_storage_enabled;
}  // namespace
}  // namespace eigen_hooks
}  // namespace oa
#endif

#endif  // __cplusplus
