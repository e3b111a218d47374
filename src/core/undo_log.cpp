#include "core/undo_log.hpp"

#include <algorithm>
#include <mutex>

namespace oa::detail {

namespace {

/// Memory for undo logs, kept between stages: fresh memory costs a page fault
/// per page on first touch, more than the copy itself. One block of at most
/// `kept_max` bytes is kept; larger ones go back to the system at once.
class undo_storage {
 public:
  static constexpr std::size_t kept_max = std::size_t{1} << 30;

  static std::unique_ptr<std::byte[]> take(std::size_t bytes, std::size_t& capacity) {
    {
      std::lock_guard lock(m_);
      if (block_ && size_ >= bytes) {
        capacity = size_;
        return std::move(block_);
      }
    }
    capacity = std::max<std::size_t>(bytes, 1);
    return std::unique_ptr<std::byte[]>(new std::byte[capacity]);  // uninitialised: no pass over it
  }
  static void give(std::unique_ptr<std::byte[]> b, std::size_t capacity) noexcept {
    if (!b || capacity > kept_max) return;
    std::lock_guard lock(m_);
    if (!block_ || size_ < capacity) {
      block_ = std::move(b);
      size_ = capacity;
    }
  }

 private:
  static inline std::mutex m_;
  static inline std::unique_ptr<std::byte[]> block_;
  static inline std::size_t size_ = 0;
};

}  // namespace

undo_log::undo_log(const stage& s, const std::vector<call_node>& nodes) {
  for (int c : s.calls)
    for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
      if (a.role == arg_role::mut && std::none_of(targets_.begin(), targets_.end(), [&](const value_state* t) {
            return t->object == a.value->object;
          }))
        targets_.push_back(a.value.get());
}

undo_log::~undo_log() { undo_storage::give(std::move(data_), capacity_); }

void undo_log::plan(const std::vector<split::range>& ranges) {
  if (targets_.empty()) return;
  ranges_ = ranges;
  offsets_.assign(ranges.size() + 1, 0);
  for (std::size_t j = 0; j < ranges.size(); ++j) {
    std::size_t b = 0;
    for (const value_state* t : targets_) b += t->ops->host_region(t->object, ranges[j]).bytes();
    offsets_[j + 1] = offsets_[j] + b;
  }
  data_ = undo_storage::take(offsets_.back(), capacity_);
  kept_.assign(ranges.size(), 0);
}

}  // namespace oa::detail
