#pragma once
// Values kept in a device's memory between the stages of an evaluation: a
// product's result read by the element-wise stage after it stays where it
// was computed instead of crossing the link twice. A resident copy mirrors
// the value's host storage byte for byte (same offsets and pitch), so a
// chunk's region in it is the host region moved to the copy. A copy is
// "device only" when no one needs the value on the host: it is written back
// before anything reads the host storage, and dropped once no later stage
// reads it. Budgets: the copies a running stage reads are pinned and their
// bytes reserved out of its budget; the others are evicted by need (written
// back first when device only) when an allocation would exceed the budget.
//
// Between evaluations (an Eigen program's statements, each evaluated when it
// is assigned), copies whose host storage holds the same bytes are kept, with
// a fingerprint of those bytes. A later stage that reads the same host
// storage takes the copy instead of copying it in, once the host's bytes are
// found unchanged: the program may have written them in between, and nothing
// but their content says so. Kept copies are evicted first, oldest first.

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "core/fingerprint.hpp"
#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"

namespace oa::detail {

class residency {
 public:
  struct entry {
    value_ptr value;
    device_buffer copy;
    region host;          // the value's whole host storage (the copy has its layout)
    bool host_valid = false;  // the host storage holds the value too
    fingerprint print;        // of the host storage when it was last found to hold the copy's bytes
  };

  /// Becomes the device's out-of-memory handler (evict()).
  explicit residency(device& dev);
  residency(const residency&) = delete;
  residency& operator=(const residency&) = delete;
  ~residency();
  /// The device's pager (its out-of-memory handler: evict) off while stages
  /// run beside each other on it, each in a share that holds what it needs:
  /// their threads would otherwise evict from this table at once. On again
  /// when they have ended.
  void pause_pager() noexcept;
  void resume_pager();

  device& dev() const noexcept { return dev_; }
  /// The resident copy of `v`, or null.
  entry* find(const value_state* v) noexcept;
  /// Takes `copy` (holding `v` laid out like `host`) as v's resident copy.
  entry& add(value_ptr v, device_buffer copy, const region& host, bool host_valid);
  /// Bytes the copies hold.
  std::size_t bytes() const noexcept;
  /// Pins the copies of `values` (what the next stage reads); unpins the rest.
  template <class Values>
  void pin_only(const Values& values) {
    pinned_.clear();
    for (const value_state* v : values)
      if (entries_.count(v)) pinned_.insert(v);
  }
  /// Bytes of the pinned copies (reserved out of the running stage's budget).
  std::size_t pinned_bytes() const noexcept;
  /// Writes the device-only pinned copies back to their host storage and
  /// unpins every copy, so that a stage reading its values from the host
  /// may evict them (throws the device's error).
  void release_pinned();
  /// Frees at least `bytes` if it can: unpinned copies go, largest first,
  /// device-only ones written back first (one that cannot be stays).
  /// Returns whether anything was freed.
  bool evict(std::size_t bytes) noexcept;
  /// Bytes evicted so far.
  std::size_t evicted_bytes() const noexcept { return evicted_; }
  /// Chunk `host_chunk` of e's value (a region of its host storage), in the copy.
  static region in_copy(const entry& e, const region& host_chunk) noexcept;
  /// Copies a device-only value to its host storage (throws the device's error).
  void write_back(entry& e);
  /// Drops `v`'s copy.
  void drop(const value_state* v);
  /// `from`'s copy, updated in place on the device and copied back, now
  /// holds `to` (its new version), as the host storage does.
  void rekey(const value_state* from, value_ptr to);
  /// Retires the copies `keep` says no: kept when their host storage holds
  /// them, else dropped.
  template <class Keep>
  void drop_unless(Keep&& keep) {
    std::erase_if(entries_, [&](auto& kv) {
      if (keep(kv.first)) return false;
      retire(*kv.second);
      return true;
    });
    std::erase_if(pinned_, [&](const value_state* v) { return !entries_.count(v); });
  }
  /// Drops every copy; device-only values nobody needs are simply dropped.
  void clear() noexcept;

  /// The end of an evaluation: copies of values whose host storage holds
  /// them are kept (with the fingerprint of that storage), the rest dropped.
  void end_evaluation() noexcept;
  /// Takes the kept copy of v's host storage as v's resident copy when the
  /// storage still holds what the copy does; a copy found stale is dropped.
  entry* adopt(const value_ptr& v);
  /// Bytes of the kept copies.
  std::size_t kept_bytes() const noexcept;
  /// A copy of v's host storage is kept from an earlier evaluation (whether
  /// the storage still holds its bytes is for adopt to tell).
  bool holds_kept(const value_state& v) const noexcept;
  /// Whether keeping a copy of v's host storage between evaluations has
  /// paid: false once such a copy was evicted before any stage read it (a
  /// stage that streams more than the budget before its reader, in each
  /// evaluation), true again once one is read.
  bool keeping_pays(const value_state& v) const noexcept;

  /// Whole host storage of a value (its first unit to its last).
  static region whole_region(const value_state& v);
  static std::size_t span(const region& r) noexcept {
    return r.rows == 0 || r.width == 0 ? 0 : (r.rows - 1) * r.pitch + r.width;
  }

 private:
  device& dev_;
  std::unordered_map<const value_state*, std::unique_ptr<entry>> entries_;
  std::unordered_set<const value_state*> pinned_;
  std::size_t evicted_ = 0;

  struct kept {
    device_buffer copy;
    region host;
    fingerprint print;
  };
  std::vector<kept> kept_;  // oldest first
  std::vector<region> unread_;  // host storage whose kept copy was evicted unread, latest last
  /// Drops the kept copies overlapping `host` (its bytes are changing hands).
  void forget(const region& host) noexcept;
  /// Keeps e's copy when its host storage holds the same bytes.
  void retire(entry& e) noexcept;
};

}  // namespace oa::detail
