#pragma once
// The host storage of later stages' results, made ahead on a thread of its
// own while earlier stages run. A large result's first touch (its pages
// faulted in, then zeroed by its constructor on one thread: 103 ms for 512
// MiB on an H100 node) is host work its stage would do before its first
// copy; made ahead, it overlaps the stages before. The stage takes what was
// made, waits for a result being made, or makes one not begun itself.
// The scheduler queues the next stage's results as each stage starts: the
// host holds them a stage sooner than it would, never more. None is
// touched by this thread but for reading its shape: the storage is handed
// over by take().

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace oa::detail {

struct value_state;

class results_ahead {
 public:
  struct made {
    std::shared_ptr<void> owned;
    void* object = nullptr;
  };

  /// Starts the thread (std::system_error when it cannot).
  results_ahead();
  /// Stops after the result being made; storage not taken is freed.
  ~results_ahead();
  results_ahead(const results_ahead&) = delete;
  results_ahead& operator=(const results_ahead&) = delete;

  /// Makes the storage of `values` (each with no object and a make of its
  /// own), in order, after those queued before.
  void queue(const std::vector<const value_state*>& values);
  /// The storage made for v (waiting while it is being made), or none: the
  /// caller makes it, and this thread no longer will. A result whose making
  /// failed is none too (the caller meets the error itself).
  std::optional<made> take(const value_state* v);

 private:
  enum class state { queued, making, made, taken };
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<const value_state*> queue_;
  std::unordered_map<const value_state*, state> state_;
  std::unordered_map<const value_state*, made> made_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is in place
};

}  // namespace oa::detail
