#pragma once
// The undo log of a stage that updates the caller's objects in place.

#include <cstddef>
#include <memory>
#include <vector>

#include "core/planner.hpp"
#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"

namespace oa::detail {

/// Copies of the caller's objects that a stage updates in place, taken chunk
/// by chunk before the chunk's work can write them: a failed stage puts them
/// all back (all or nothing), and a chunk re-run on the host starts from them.
/// Chunks are saved by whichever thread runs them (distinct chunks touch
/// distinct bytes), so on the host device saving is spread over the workers.
class undo_log {
 public:
  undo_log(const stage& s, const std::vector<call_node>& nodes);
  ~undo_log();
  undo_log(const undo_log&) = delete;
  undo_log& operator=(const undo_log&) = delete;

  bool empty() const noexcept { return targets_.empty(); }

  /// Room for these chunks; memory is touched only as chunks are saved.
  void plan(const std::vector<split::range>& ranges);

  /// Keeps chunk j's bytes of every object updated in place.
  void save(std::size_t j) noexcept {
    if (targets_.empty()) return;
    std::byte* at = data_.get() + offsets_[j];
    for (const value_state* t : targets_) {
      const region from = t->ops->host_region(t->object, ranges_[j]);
      copy_region(from.packed_at(at), from);
      at += from.bytes();
    }
    kept_[j] = 1;
  }

  /// Chunk j as it was before the stage, and kept so (a re-run may fail too).
  void before_rerun(std::size_t j) noexcept {
    if (targets_.empty()) return;
    if (kept_[j]) restore(j);
    else save(j);
  }

  /// Every chunk saved goes back.
  void restore_all() noexcept {
    for (std::size_t j = 0; j < kept_.size(); ++j)
      if (kept_[j]) restore(j);
  }

  /// Bytes kept (the price of all-or-nothing updates).
  std::size_t bytes() const noexcept {
    std::size_t b = 0;
    for (std::size_t j = 0; j < kept_.size(); ++j)
      if (kept_[j]) b += offsets_[j + 1] - offsets_[j];
    return b;
  }

 private:
  void restore(std::size_t j) noexcept {
    std::byte* at = data_.get() + offsets_[j];
    for (const value_state* t : targets_) {
      const region to = t->ops->host_region(t->object, ranges_[j]);
      copy_region(to, to.packed_at(at));
      at += to.bytes();
    }
  }

  std::vector<const value_state*> targets_;
  std::vector<split::range> ranges_;
  std::vector<std::size_t> offsets_;  // chunk j's bytes: [offsets_[j], offsets_[j + 1])
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_ = 0;
  std::vector<char> kept_;  // one flag per chunk, each written by the thread that saved it
};

}  // namespace oa::detail
