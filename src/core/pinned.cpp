// The pinned memory pool, the registry of pinned ranges and the host backend.
#include "oa/core/pinned.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "core/pinned_backend.hpp"
#include "oa/core/error.hpp"

namespace oa {

namespace detail {

namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t min_align = 64;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// ---- the registry of pinned ranges ------------------------------------------------

/// Every pinned range of the process: pool arenas and pin()'s ranges, by start.
class registry {
 public:
  enum class kind { arena, user };

  /// Records [b, b + bytes); false when it overlaps a recorded range.
  /// A range recorded not `ready` is held but not yet reported pinned.
  bool add(std::uintptr_t b, std::size_t bytes, kind k, bool ready) {
    std::unique_lock lock(mutex_);
    const std::uintptr_t e = b + bytes;
    auto next = ranges_.lower_bound(b);
    if (next != ranges_.end() && next->first < e) return false;
    if (next != ranges_.begin() && std::prev(next)->second.end > b) return false;
    ranges_.emplace(b, entry{e, k, ready});
    return true;
  }
  void set_ready(std::uintptr_t b) {
    std::unique_lock lock(mutex_);
    auto it = ranges_.find(b);
    if (it != ranges_.end()) it->second.ready = true;
  }
  /// Removes the range starting at b of kind k; its size, or 0 when none.
  std::size_t remove(std::uintptr_t b, kind k) {
    std::unique_lock lock(mutex_);
    auto it = ranges_.find(b);
    if (it == ranges_.end() || it->second.k != k) return 0;
    const std::size_t bytes = it->second.end - b;
    ranges_.erase(it);
    return bytes;
  }
  /// The range holding p: its start and kind; false when none.
  bool find(std::uintptr_t p, std::uintptr_t& start, kind& k) const {
    std::shared_lock lock(mutex_);
    auto it = containing(p);
    if (it == ranges_.end()) return false;
    start = it->first;
    k = it->second.k;
    return true;
  }
  bool contains(std::uintptr_t p, std::size_t bytes) const noexcept {
    std::shared_lock lock(mutex_);
    auto it = containing(p);
    return it != ranges_.end() && it->second.ready && bytes <= it->second.end - p;
  }

 private:
  struct entry {
    std::uintptr_t end;
    kind k;
    bool ready;
  };
  std::map<std::uintptr_t, entry>::const_iterator containing(std::uintptr_t p) const {
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return ranges_.end();
    --it;
    return p < it->second.end ? it : ranges_.end();
  }

  mutable std::shared_mutex mutex_;
  std::map<std::uintptr_t, entry> ranges_;
};

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: pools may outlive static destructors
  return *r;
}

// ---- the host backend ---------------------------------------------------------------

bool transparent_huge_pages() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  return f && modes.find("[never]") == std::string::npos;
}

std::string memlock_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) != 0) return "unknown";
  if (r.rlim_cur == RLIM_INFINITY) return "unlimited";
  return std::to_string(r.rlim_cur) + " bytes";
}

/// Writes one byte per 4 KiB page of [p, p + bytes), split among threads
/// (slices of whole huge pages, so that each huge page is faulted by one).
void pre_touch(char* p, std::size_t bytes, int threads) {
  constexpr std::size_t page = 4096;
  auto touch = [](char* b, char* e) {
    for (volatile char* q = b; q < e; q += page) *q = 0;
  };
  const std::size_t slices = std::max<std::size_t>(1, std::min<std::size_t>(threads, bytes / huge_page));
  if (slices == 1) return touch(p, p + bytes);
  const std::size_t slice = round_up(bytes / slices, huge_page);
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < slices && i * slice < bytes; ++i)
    pool.emplace_back(touch, p + i * slice, p + std::min(bytes, (i + 1) * slice));
  touch(p, p + std::min(bytes, slice));
  for (auto& t : pool) t.join();
}

/// Reads one byte per page of a user's range: faults it in without writing.
void read_touch(const char* p, std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (const volatile char* q = p; q < p + bytes; q += page) (void)*q;
  if (bytes) (void)*(const volatile char*)(p + bytes - 1);
}

class host_backend final : public pinned_backend {
 public:
  explicit host_backend(int threads) : threads_(threads), huge_(transparent_huge_pages()) {}

  const char* name() const noexcept override { return "mmap"; }
  bool huge_pages() const noexcept override { return huge_; }

  void* allocate(std::size_t bytes, bool& locked, std::string& why) override {
    char* p = map_aligned(bytes, why);
    if (!p) return nullptr;
    if (huge_ && madvise(p, bytes, MADV_HUGEPAGE) != 0) huge_ = false;
    pre_touch(p, bytes, threads_);
    locked = mlock(p, bytes) == 0;
    if (!locked)
      why = std::string("mlock refused (") + std::strerror(errno) + "; RLIMIT_MEMLOCK " + memlock_limit() +
            "): memory pre-touched, not locked";
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override { munmap(p, bytes); }

  bool pin(void* p, std::size_t bytes, std::string&) override {
    // mlock refused (RLIMIT_MEMLOCK): its pages are made resident instead.
    if (mlock(p, bytes) != 0) read_touch(static_cast<const char*>(p), bytes);
    return true;
  }
  void unpin(void* p, std::size_t bytes) noexcept override { munlock(p, bytes); }

 private:
  /// Anonymous memory aligned to a huge page (the excess unmapped).
  static char* map_aligned(std::size_t bytes, std::string& why) {
    void* raw = mmap(nullptr, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      why = "mmap of " + std::to_string(bytes) + " bytes failed: " + std::strerror(errno);
      return nullptr;
    }
    char* const r = static_cast<char*>(raw);
    char* const p = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(r), huge_page));
    if (p > r) munmap(r, p - r);
    if (r + huge_page > p) munmap(p + bytes, r + huge_page - p);
    return p;
  }

  int threads_;
  bool huge_;
};

int default_touch_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 8u));
}

std::unique_ptr<pinned_backend> choose_backend(pinned_memory_resource::backend_kind kind, int threads) {
#if defined(OA_HAS_CUDA)
  if (kind == pinned_memory_resource::backend_kind::automatic)
    if (auto cuda = make_cuda_pinned_backend()) return cuda;
#else
  (void)kind;
#endif
  return make_host_pinned_backend(threads > 0 ? threads : default_touch_threads());
}

/// The backend pin() and unpin() use, chosen once.
pinned_backend& user_backend() {
  static pinned_backend* b = choose_backend(pinned_memory_resource::backend_kind::automatic, 0).release();
  return *b;
}

}  // namespace

bool in_pinned_arena(const void* p) noexcept {
  std::uintptr_t start = 0;
  auto k = registry::kind::user;
  return the_registry().find(reinterpret_cast<std::uintptr_t>(p), start, k) && k == registry::kind::arena;
}

std::unique_ptr<pinned_backend> make_host_pinned_backend(int threads) {
  return std::make_unique<host_backend>(threads);
}

}  // namespace detail

// ---- the pool --------------------------------------------------------------------

struct pinned_memory_resource::state {
  struct arena {
    std::size_t bytes;
    bool locked;
    std::size_t in_use = 0;
    std::map<char*, std::size_t> free;  // free blocks by address
  };

  options opt;
  mutable std::mutex mutex;
  std::unique_ptr<detail::pinned_backend> backend;  // chosen at the first allocation
  std::map<char*, arena> arenas;                    // by base address
  std::map<char*, std::size_t> used;                // blocks in use: start -> size
  pinned_stats stats;

  std::map<char*, arena>::iterator arena_of(const void* p) {
    auto it = arenas.upper_bound(static_cast<char*>(const_cast<void*>(p)));
    if (it == arenas.begin()) return arenas.end();
    --it;
    return static_cast<const char*>(p) < it->first + it->second.bytes ? it : arenas.end();
  }

  /// First fit in one arena; nullptr when nothing fits.
  static char* take(arena& a, std::size_t bytes, std::size_t alignment) {
    for (auto it = a.free.begin(); it != a.free.end(); ++it) {
      char* const b = it->first;
      const std::size_t size = it->second;
      char* const start = reinterpret_cast<char*>(detail::round_up(reinterpret_cast<std::uintptr_t>(b), alignment));
      if (start + bytes > b + size) continue;
      a.free.erase(it);
      if (start > b) a.free.emplace(b, start - b);
      if (start + bytes < b + size) a.free.emplace(start + bytes, b + size - (start + bytes));
      return start;
    }
    return nullptr;
  }

  static void give_back(arena& a, char* p, std::size_t bytes) {
    auto next = a.free.lower_bound(p);
    char* start = p;
    std::size_t size = bytes;
    if (next != a.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == p) {
        start = prev->first;
        size += prev->second;
        a.free.erase(prev);
      }
    }
    if (next != a.free.end() && p + bytes == next->first) {
      size += next->second;
      a.free.erase(next);
    }
    a.free.emplace(start, size);
  }

  detail::pinned_backend& backend_locked() {
    if (!backend) {
      backend = detail::choose_backend(opt.backend, opt.touch_threads);
      stats.backend = backend->name();
      stats.huge_pages = backend->huge_pages();
    }
    return *backend;
  }

  /// A new arena able to hold `bytes` at `alignment`.
  arena& grow(std::size_t bytes, std::size_t alignment) {
    auto& b = backend_locked();
    const std::size_t need = bytes + (alignment > 4096 ? alignment : 0);
    const std::size_t size = detail::round_up(std::max(opt.arena_bytes, need), detail::huge_page);
    bool locked = false;
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    char* p = static_cast<char*>(b.allocate(size, locked, why));
    stats.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!p)
      throw pinned_bad_alloc("oa: pinned_memory_resource: allocate: " + std::to_string(bytes) + " bytes: " +
                             b.name() + " backend: " + why);
    if (!detail::the_registry().add(reinterpret_cast<std::uintptr_t>(p), size, detail::registry::kind::arena, true)) {
      b.deallocate(p, size);  // only if someone pinned memory the backend then handed out
      throw pinned_bad_alloc("oa: pinned_memory_resource: allocate: new arena at " + detail::hex(p) +
                             " overlaps a range given to oa::pin");
    }
    ++stats.backend_allocations;
    stats.huge_pages = b.huge_pages();  // false once the system refused MADV_HUGEPAGE
    stats.reserved_bytes += size;
    if (locked) stats.locked_bytes += size;
    else if (stats.not_locked_reason.empty()) stats.not_locked_reason = why;
    arena& a = arenas.emplace(p, arena{size, locked, 0, {}}).first->second;
    a.free.emplace(p, size);
    return a;
  }

  void drop(std::map<char*, arena>::iterator it) {
    detail::the_registry().remove(reinterpret_cast<std::uintptr_t>(it->first), detail::registry::kind::arena);
    backend->deallocate(it->first, it->second.bytes);
    stats.reserved_bytes -= it->second.bytes;
    if (it->second.locked) stats.locked_bytes -= it->second.bytes;
    arenas.erase(it);
  }
};

pinned_memory_resource::pinned_memory_resource() : pinned_memory_resource(options{}) {}

pinned_memory_resource::pinned_memory_resource(const options& o) : s_(std::make_unique<state>()) {
  if (o.arena_bytes == 0)
    throw invalid_argument("oa::pinned_memory_resource", "options.arena_bytes", "must be more than 0");
  if (o.touch_threads < 0)
    throw invalid_argument("oa::pinned_memory_resource", "options.touch_threads",
                           std::to_string(o.touch_threads) + " is negative");
  s_->opt = o;
}

pinned_memory_resource::~pinned_memory_resource() {
  std::lock_guard lock(s_->mutex);
  while (!s_->arenas.empty()) s_->drop(s_->arenas.begin());
}

void* pinned_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw pinned_bad_alloc("oa: pinned_memory_resource: allocate: alignment " + std::to_string(alignment) +
                           " is not a power of two");
  if (bytes > (std::size_t{1} << 62) || alignment > (std::size_t{1} << 30))
    throw pinned_bad_alloc("oa: pinned_memory_resource: allocate: " + std::to_string(bytes) + " bytes aligned to " +
                           std::to_string(alignment) + " is more than any arena can hold");
  alignment = std::max(alignment, detail::min_align);
  bytes = detail::round_up(std::max<std::size_t>(bytes, 1), detail::min_align);
  std::lock_guard lock(s_->mutex);
  char* p = nullptr;
  for (auto& [base, a] : s_->arenas)
    if ((p = state::take(a, bytes, alignment))) break;
  if (!p) p = state::take(s_->grow(bytes, alignment), bytes, alignment);
  if (!p)  // the arena was sized for the request: the backend broke its alignment
    throw pinned_bad_alloc("oa: pinned_memory_resource: allocate: " + std::to_string(bytes) +
                           " bytes do not fit the new arena at alignment " + std::to_string(alignment));
  s_->arena_of(p)->second.in_use += bytes;
  s_->used.emplace(p, bytes);
  s_->stats.in_use_bytes += bytes;
  s_->stats.peak_in_use_bytes = std::max(s_->stats.peak_in_use_bytes, s_->stats.in_use_bytes);
  return p;
}

void pinned_memory_resource::do_deallocate(void* p, std::size_t, std::size_t) {
  if (!p) return;
  std::lock_guard lock(s_->mutex);
  auto u = s_->used.find(static_cast<char*>(p));
  if (u == s_->used.end()) {
    // As free() of a pointer malloc never gave: the heap's state is unknown.
    std::fprintf(stderr, "oa: pinned_memory_resource: deallocate: p: %s is not a block in use of this pool\n",
                 detail::hex(p).c_str());
    std::abort();
  }
  const std::size_t bytes = u->second;
  s_->used.erase(u);
  auto& a = s_->arena_of(p)->second;
  a.in_use -= bytes;
  state::give_back(a, static_cast<char*>(p), bytes);
  s_->stats.in_use_bytes -= bytes;
}

pinned_stats pinned_memory_resource::stats() const {
  std::lock_guard lock(s_->mutex);
  pinned_stats r = s_->stats;
  r.arenas = s_->arenas.size();
  return r;
}

std::size_t pinned_memory_resource::release() {
  std::lock_guard lock(s_->mutex);
  std::size_t returned = 0;
  for (auto it = s_->arenas.begin(); it != s_->arenas.end();) {
    auto next = std::next(it);
    if (it->second.in_use == 0) {
      returned += it->second.bytes;
      s_->drop(it);
    }
    it = next;
  }
  return returned;
}

bool pinned_memory_resource::owns(const void* p) const noexcept {
  std::lock_guard lock(s_->mutex);
  return s_->arena_of(p) != s_->arenas.end();
}

std::size_t pinned_memory_resource::block_size(const void* p) const noexcept {
  std::lock_guard lock(s_->mutex);
  auto u = s_->used.find(static_cast<char*>(const_cast<void*>(p)));
  return u == s_->used.end() ? 0 : u->second;
}

pinned_memory_resource& pinned_memory() {
  static pinned_memory_resource* r = new pinned_memory_resource;  // never destroyed: see the header
  return *r;
}

pinned_memory_resource& detail::staging_memory() {
  static pinned_memory_resource* r = new pinned_memory_resource;  // as pinned_memory()
  return *r;
}

// ---- the registry's API --------------------------------------------------------------

bool is_pinned(const void* p, std::size_t bytes) noexcept {
  if (!p) return false;
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  if (bytes > UINTPTR_MAX - b) return false;
  return detail::the_registry().contains(b, bytes);
}

void pin(void* p, std::size_t bytes) {
  if (!p) throw invalid_argument("oa::pin", "p", "is null");
  if (bytes == 0) throw invalid_argument("oa::pin", "bytes", "is 0: nothing to pin");
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  if (bytes > UINTPTR_MAX - b)
    throw invalid_argument("oa::pin", "bytes", std::to_string(bytes) + " bytes from " + detail::hex(p) +
                                                   " pass the end of the address space");
  auto& reg = detail::the_registry();
  // Held but not reported pinned until the backend has pinned it.
  if (!reg.add(b, bytes, detail::registry::kind::user, false))
    throw invalid_argument("oa::pin", "p", "[" + detail::hex(p) + ", +" + std::to_string(bytes) +
                                               " bytes) overlaps memory already pinned");
  std::string why;
  bool ok = false;
  try {
    ok = detail::user_backend().pin(p, bytes, why);
  } catch (...) {
    reg.remove(b, detail::registry::kind::user);
    throw;
  }
  if (!ok) {
    reg.remove(b, detail::registry::kind::user);
    throw error("oa::pin: " + std::to_string(bytes) + " bytes at " + detail::hex(p) + ": " + why);
  }
  reg.set_ready(b);
}

void unpin(void* p) {
  if (!p) throw invalid_argument("oa::unpin", "p", "is null");
  auto& reg = detail::the_registry();
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  const std::size_t bytes = reg.remove(b, detail::registry::kind::user);
  if (bytes != 0) return detail::user_backend().unpin(p, bytes);
  std::uintptr_t start = 0;
  auto k = detail::registry::kind::user;
  if (!reg.find(b, start, k))
    throw invalid_argument("oa::unpin", "p", detail::hex(p) + " was not given to oa::pin");
  if (k == detail::registry::kind::arena)
    throw invalid_argument("oa::unpin", "p", detail::hex(p) +
                                                 " lies in a pinned_memory_resource's arena: it goes back to its pool");
  throw invalid_argument("oa::unpin", "p", detail::hex(p) + " lies inside a pinned range but does not start it (" +
                                               detail::hex(reinterpret_cast<void*>(start)) + " does)");
}

}  // namespace oa
