#include "oa/core/memory.hpp"

#include <algorithm>
#include <cstdint>
#include <new>

#include "oa/core/error.hpp"

namespace oa {

// ---- host_memory ---------------------------------------------------------------

host_memory::~host_memory() {
  for (auto& [p, bytes] : live_) ::operator delete(p, std::align_val_t{alignment_});
}

void* host_memory::allocate(std::size_t bytes, stream_id) {
  // Zero bytes still get a unique pointer, as cudaMalloc's callers expect.
  void* p = ::operator new(std::max(bytes, alignment_), std::align_val_t{alignment_});
  try {
    std::lock_guard lock(m_);
    live_.emplace(p, bytes);
  } catch (...) {
    ::operator delete(p, std::align_val_t{alignment_});
    throw;
  }
  return p;
}

void host_memory::deallocate(void* p, std::size_t, stream_id) noexcept {
  if (!p) return;
  {
    std::lock_guard lock(m_);
    if (live_.erase(p) == 0) return;  // not ours: ignored
  }
  ::operator delete(p, std::align_val_t{alignment_});
}

bool host_memory::contains(const void* p) const noexcept {
  std::lock_guard lock(m_);
  const auto* b = static_cast<const std::byte*>(p);
  for (const auto& [base, bytes] : live_) {
    const auto* lo = static_cast<const std::byte*>(base);
    if (b >= lo && b < lo + std::max<std::size_t>(bytes, 1)) return true;
  }
  return false;
}

bool host_memory::size_of(const void* p, std::size_t& bytes) const noexcept {
  std::lock_guard lock(m_);
  auto it = live_.find(const_cast<void*>(p));
  if (it == live_.end()) return false;
  bytes = it->second;
  return true;
}

// ---- limit_resource ------------------------------------------------------------

limit_resource::limit_resource(memory_resource& upstream, std::size_t budget, std::size_t granularity,
                               std::string device)
    : up_(upstream), budget_(budget), granularity_(std::max<std::size_t>(granularity, 1)), device_(std::move(device)) {}

std::size_t limit_resource::counted(std::size_t bytes) const noexcept {
  if (bytes > SIZE_MAX - granularity_) return SIZE_MAX;
  return (bytes + granularity_ - 1) / granularity_ * granularity_;
}

void* limit_resource::allocate(std::size_t bytes, stream_id s) {
  const std::size_t c = counted(bytes);
  {
    // Reserved before the allocation below, so concurrent callers cannot overshoot.
    std::lock_guard lock(m_);
    if (c > budget_ || in_use_ > budget_ - c) throw device_out_of_memory(device_, bytes, in_use_, budget_);
    in_use_ += c;
  }
  try {
    return up_.allocate(bytes, s);
  } catch (...) {
    std::lock_guard lock(m_);
    in_use_ -= c;
    throw;
  }
}

void limit_resource::deallocate(void* p, std::size_t bytes, stream_id s) noexcept {
  if (!p) return;
  up_.deallocate(p, bytes, s);
  std::lock_guard lock(m_);
  in_use_ -= std::min(in_use_, counted(bytes));
}

std::size_t limit_resource::in_use() const noexcept {
  std::lock_guard lock(m_);
  return in_use_;
}

// ---- statistics_resource -------------------------------------------------------

void* statistics_resource::allocate(std::size_t bytes, stream_id s) {
  void* p = up_.allocate(bytes, s);
  std::lock_guard lock(m_);
  in_use_ += count(bytes);
  peak_ = std::max(peak_, in_use_);
  ++live_;
  return p;
}

void statistics_resource::deallocate(void* p, std::size_t bytes, stream_id s) noexcept {
  if (!p) return;
  up_.deallocate(p, bytes, s);
  std::lock_guard lock(m_);
  in_use_ -= std::min(in_use_, count(bytes));
  live_ -= live_ > 0;
}

std::size_t statistics_resource::in_use() const noexcept {
  std::lock_guard lock(m_);
  return in_use_;
}

std::size_t statistics_resource::peak() const noexcept {
  std::lock_guard lock(m_);
  return peak_;
}

std::size_t statistics_resource::allocations() const noexcept {
  std::lock_guard lock(m_);
  return live_;
}

void statistics_resource::reset_peak() noexcept {
  std::lock_guard lock(m_);
  peak_ = in_use_;
}

// ---- retry_on_failure ----------------------------------------------------------

void retry_on_failure::set_handler(handler h) {
  std::lock_guard lock(m_);
  handler_ = std::move(h);
}

void* retry_on_failure::allocate(std::size_t bytes, stream_id s) {
  for (;;) {
    try {
      return up_.allocate(bytes, s);
    } catch (const device_out_of_memory&) {
      handler h;
      {
        std::lock_guard lock(m_);
        h = handler_;
      }
      // The handler frees memory (it may deallocate through this resource).
      if (!h || !h(bytes)) throw;
    }
  }
}

}  // namespace oa
