#pragma once
// The chunks of a stage, handed out to the pipelines of the devices that run
// it, and what the chunks leave on the host (reduction partials). One device
// takes them in order. Several devices each take the next chunk when a slot
// of theirs is free, so each gets chunks at the rate it finishes them; at
// the end a slower device declines a chunk when the others are predicted to
// finish all that is left sooner than it would finish that one (the
// prediction: each device's chunks per second since its first finished). OA_SPREAD=even hands
// chunk i to device i mod n instead: the baseline the balanced feed beats.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.hpp"
#include "oa/split_types/split.hpp"

namespace oa::detail {

class chunk_feed {
 public:
  /// `units` cut into chunks of `chunk_units`; `chunk_partial_bytes` of host
  /// memory per chunk for reduction partials; `devices` pipelines take them.
  chunk_feed(std::size_t units, std::size_t chunk_units, std::size_t chunk_partial_bytes, int devices, bool even,
             bool progress, std::string what);
  chunk_feed(const chunk_feed&) = delete;
  chunk_feed& operator=(const chunk_feed&) = delete;

  /// The next chunk for device `d`, or none: every chunk is taken, the stage
  /// failed, or the others are predicted to finish the rest first.
  std::optional<std::size_t> take(int d);
  /// A chunk device `d` took has finished (successfully or not).
  void finished(int d);
  /// Device `d` takes no more chunks (it was lost, or has no memory for one).
  void leave(int d);
  /// A call failed: no device takes another chunk.
  void stop();
  /// Chunks no device took; once every pipeline has ended.
  std::vector<std::size_t> untaken() const;
  /// Chunks device `d` took.
  std::size_t taken_by(int d) const;

  std::size_t chunk_units() const noexcept { return chunk_units_; }
  std::size_t count() const noexcept { return count_; }
  const std::vector<split::range>& ranges() const noexcept { return ranges_; }
  /// Each chunk's reduction partials (chunk_partial_bytes apart) and their
  /// entries; a chunk's are written only by the device that runs it.
  std::vector<std::byte>& partials() noexcept { return partials_; }
  std::vector<std::size_t>& partial_entries() noexcept { return partial_entries_; }

 private:
  using clock = std::chrono::steady_clock;
  struct taker {
    std::size_t taken = 0, finished = 0;
    std::size_t taken_by_first = 0;    // chunks it had taken when its first finished
    clock::time_point settled;         // when those had all finished
    bool active = true;
    std::size_t next_even = 0;
  };
  bool others_first(int d, clock::time_point now) const;

  std::size_t chunk_units_, count_;
  std::vector<split::range> ranges_;
  std::vector<std::byte> partials_;
  std::vector<std::size_t> partial_entries_;
  bool even_;
  mutable std::mutex mutex_;
  std::vector<char> taken_;  // per chunk
  std::size_t next_ = 0;     // balanced: the lowest chunk not taken
  std::size_t handed_ = 0;
  std::size_t finished_ = 0;  // by every taker, for the progress line
  bool stopped_ = false;
  std::vector<taker> takers_;
  progress_line progress_;
};

}  // namespace oa::detail
