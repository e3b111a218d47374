#include "oa/core/host_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

namespace oa::detail {

namespace {
constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
constexpr std::uintptr_t piece = std::uintptr_t{8} << 20;  // one thread's share of work at a time
constexpr std::size_t worth_threads = std::size_t{4} << 20;
}  // namespace

void advise_huge_pages(std::uintptr_t first, std::uintptr_t end) noexcept {
  const std::uintptr_t huge_first = (first + huge - 1) / huge * huge, huge_end = end / huge * huge;
  if (huge_end > huge_first) (void)madvise(reinterpret_cast<void*>(huge_first), huge_end - huge_first, MADV_HUGEPAGE);
}

void fault_in(void* p, std::size_t bytes) noexcept {
  // Once refused for want of MADV_POPULATE_WRITE (Linux before 5.14), never
  // asked again: the first writes fault the pages in, as without this.
  static std::atomic<bool> unsupported{false};
  if (!p || bytes < worth_threads || unsupported.load(std::memory_order_relaxed)) return;
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
  if (end <= first) return;
  advise_huge_pages(first, end);

  std::atomic<std::uintptr_t> next{first};
  std::atomic<bool> stop{false};
  const auto work = [&] {
    for (std::uintptr_t a; !stop.load(std::memory_order_relaxed) && (a = next.fetch_add(piece)) < end;)
      if (madvise(reinterpret_cast<void*>(a), std::min(end, a + piece) - a, MADV_POPULATE_WRITE) != 0) {
        // Any refusal (memory that cannot be populated so, none left) ends
        // it: the rest faults in at its first write.
        if (errno == EINVAL) unsupported.store(true, std::memory_order_relaxed);
        stop.store(true, std::memory_order_relaxed);
      }
  };
  // Results are made before their stage's work starts, or ahead of it while
  // the stage before runs (core/results_ahead.hpp), its threads then sharing
  // the cores; faulting scales with them up to the memory's rate, which a
  // handful of threads reaches.
  const std::size_t pieces = (end - first + piece - 1) / piece;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t helpers = std::min<std::size_t>({pieces, cores, 8}) - 1;
  std::vector<std::thread> threads;
  try {
    threads.reserve(helpers);
    for (std::size_t t = 0; t < helpers; ++t) threads.emplace_back(work);
  } catch (...) {
    // No thread to spare: the calling thread does the rest.
  }
  work();
  for (std::thread& t : threads) t.join();
}

}  // namespace oa::detail
