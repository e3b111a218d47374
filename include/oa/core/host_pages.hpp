#pragma once
// Host memory's first touch, in parallel. A page written for the first time
// costs a fault and a zeroed page: one thread does that at a tenth of its
// memcpy rate or less (this 2-core machine: 512 MiB in 0.42-0.50 s; an H100
// node: 1.7-3.5 GB/s a thread). A result the engine makes for a stage (a
// std::vector of its length, whose constructor zero-fills it on the calling
// thread) paid that on the stage's critical path, before any work began: the
// engine passes fault_in to split types' make<T>(shape, first_touch).

#include <cstddef>
#include <cstdint>

namespace oa::detail {

/// Faults in the pages of [p, p + bytes) on up to 8 threads (the calling
/// one among them, one per core at most) without writing a byte, asking for
/// transparent huge pages on the whole 2 MiB blocks inside. Best effort, and
/// only worth its threads for large ranges: below 4 MiB, or where the kernel
/// lacks MADV_POPULATE_WRITE, it does nothing and the first writes fault as
/// before.
void fault_in(void* p, std::size_t bytes) noexcept;

/// Asks for transparent huge pages (MADV_HUGEPAGE) on the whole 2 MiB blocks
/// inside [first, end), where the system grants them on request (THP
/// "madvise"): nothing outside is committed, and the mapping splits at two
/// places at most. Best effort.
void advise_huge_pages(std::uintptr_t first, std::uintptr_t end) noexcept;

}  // namespace oa::detail
