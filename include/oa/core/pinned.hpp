#pragma once
// Pinned (page-locked) host memory: a pool that hands it out, a registry that
// knows which memory is pinned, and an allocator for std::vector.
//
// Why: a GPU's DMA engines copy at link rate only from pinned host memory.
// Pageable memory is staged through a pinned buffer (one more memcpy per
// copy) or registered before its copy (cudaHostRegister: about 0.1-0.5 s per
// GiB of 4 KiB pages, paid on the critical path). Data that will cross the
// link many times, or is large, is better allocated pinned from the start:
// copies of it go straight to the device, with no staging copy. Small or
// short-lived data is better left in ordinary memory.
//
// Costs: memory comes from the backend in arenas (64 MiB, or the request
// rounded up to 2 MiB when larger), each paid for once: with a usable CUDA
// GPU, cudaHostAlloc (the driver pins it); otherwise anonymous memory with
// transparent huge pages where the system offers them (THP 'madvise' or
// 'always'), pre-touched by min(hardware threads, 8) threads, then locked
// with mlock. Locked memory counts against RLIMIT_MEMLOCK (`ulimit -l`);
// when mlock is refused the arena stays pre-touched but unlocked, and
// stats() says so. Arenas are kept for reuse: freed blocks go back to the
// pool, never to the operating system, until release() or the end of the
// process. Memory pinned this way is memory the rest of the system cannot
// page out: size the pool to the data that crosses the link.
//
// The registry: is_pinned(p, bytes) says whether a copy of [p, p + bytes)
// may go to a device's DMA directly (the pools' arenas and memory given to
// pin()); the devices ask it for every copy.

#include <cstddef>
#include <memory>
#include <memory_resource>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

namespace oa {

/// What a pinned_memory_resource holds and what it cost.
struct pinned_stats {
  /// The backend chosen at the first allocation: "cuda" (cudaHostAlloc),
  /// "mmap" (anonymous memory, pre-touched, mlock'ed when permitted), or ""
  /// before any allocation.
  std::string backend;
  std::size_t reserved_bytes = 0;       ///< held from the backend (all arenas)
  std::size_t locked_bytes = 0;         ///< of reserved_bytes, page-locked
  std::size_t in_use_bytes = 0;         ///< handed out and not yet returned
  std::size_t peak_in_use_bytes = 0;    ///< the most in_use_bytes has been
  std::size_t arenas = 0;               ///< arenas held now
  std::size_t backend_allocations = 0;  ///< arenas obtained since creation
  double backend_seconds = 0;           ///< spent obtaining them (pinning, pre-touching)
  bool huge_pages = false;              ///< huge pages were asked for (MADV_HUGEPAGE)
  /// Why some arena is not locked (mlock refused: RLIMIT_MEMLOCK), or "".
  std::string not_locked_reason;
};

/// A thread-safe pool of pinned host memory (a std::pmr::memory_resource).
/// Blocks are at least 64-byte aligned; a request is served first-fit from
/// the arenas' free blocks, freed blocks coalesce with their free neighbours.
/// Allocation failure throws std::bad_alloc (pinned_bad_alloc: its what()
/// gives the reason). Backend calls run under the pool's lock: a new arena
/// holds up other allocations while it is pinned.
class pinned_memory_resource : public std::pmr::memory_resource {
 public:
  enum class backend_kind {
    automatic,  ///< cuda with a usable GPU in a CUDA build, otherwise host
    host,       ///< anonymous memory, pre-touched, mlock'ed when permitted
  };
  struct options {
    std::size_t arena_bytes = std::size_t{64} << 20;  ///< the smallest arena
    backend_kind backend = backend_kind::automatic;
    int touch_threads = 0;  ///< threads pre-touching an arena (host); 0: min(hardware, 8)
  };

  pinned_memory_resource();
  explicit pinned_memory_resource(const options& o);
  /// Returns every arena to the backend: memory still in use dangles.
  ~pinned_memory_resource() override;
  pinned_memory_resource(const pinned_memory_resource&) = delete;
  pinned_memory_resource& operator=(const pinned_memory_resource&) = delete;

  pinned_stats stats() const;
  /// Returns the arenas that hold no block in use to the backend (arenas
  /// with live blocks stay); the bytes returned.
  std::size_t release();
  /// Whether p lies in one of this pool's arenas.
  bool owns(const void* p) const noexcept;
  /// The size of the block that begins at p (what was asked, rounded up to
  /// 64 bytes); 0 when p is not a block in use of this pool.
  std::size_t block_size(const void* p) const noexcept;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  struct state;
  std::unique_ptr<state> s_;
};

/// The bad_alloc a pinned_memory_resource throws: what() says why.
class pinned_bad_alloc : public std::bad_alloc {
 public:
  explicit pinned_bad_alloc(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

/// The process-wide pool (automatic backend), made at its first use and never
/// destroyed: its memory stays valid until the process ends.
pinned_memory_resource& pinned_memory();

/// Whether [p, p + bytes) lies within one pinned range: an arena of a
/// pinned_memory_resource or memory given to pin(). bytes == 0 asks about p
/// alone. Thread-safe, lock-shared: meant to be called for every copy.
bool is_pinned(const void* p, std::size_t bytes) noexcept;

/// Pins a user's existing memory and records it: with a usable GPU
/// cudaHostRegister, otherwise mlock (when refused, its pages are touched and
/// it is recorded as pinned all the same). Throws oa::invalid_argument for a
/// null p, zero bytes, or a range overlapping one already pinned; oa::error
/// when the backend refuses. The memory must stay allocated until unpin().
void pin(void* p, std::size_t bytes);
/// Undoes pin(p, ...): p must be the start of a range given to pin()
/// (oa::invalid_argument otherwise).
void unpin(void* p);

/// A std allocator over pinned_memory(): stateless (all compare equal),
/// blocks aligned to at least 64 bytes and alignof(T).
/// Note: std::vector<T, pinned_allocator<T>>(n) value-initialises its n
/// elements (writes zeroes to doubles) as std::vector always does: one pass
/// over the memory; reserve() then push_back/insert avoids it.
template <class T>
struct pinned_allocator {
  using value_type = T;
  static constexpr std::size_t alignment = alignof(T) > 64 ? alignof(T) : 64;

  pinned_allocator() noexcept = default;
  template <class U>
  pinned_allocator(const pinned_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(pinned_memory().allocate(n * sizeof(T), alignment));
  }
  void deallocate(T* p, std::size_t n) noexcept { pinned_memory().deallocate(p, n * sizeof(T), alignment); }

  template <class U>
  bool operator==(const pinned_allocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const pinned_allocator<U>&) const noexcept {
    return false;
  }
};

/// A std::vector whose elements live in pinned memory.
template <class T>
using pinned_vector = std::vector<T, pinned_allocator<T>>;

}  // namespace oa
