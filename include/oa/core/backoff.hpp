#pragma once
// Waiting for what another thread, a device or another process will do
// soon: spin a little (it is usually near), then yield, then sleep for
// doubling spans up to a cap, so that a long wait costs no core. One
// helper for every poll loop of the runtime (the staging engine's words,
// a collective's completion, a product's overlap), each with its own pace.

#include <algorithm>
#include <chrono>
#include <thread>

namespace oa::detail {

struct backoff_pace {
  int spins = 0;                                   // polls that only re-check
  int yields = 0;                                  // then polls that yield the core
  std::chrono::microseconds first{10}, most{100};  // then sleeps, doubling from first to most
};

class backoff {
 public:
  constexpr explicit backoff(backoff_pace pace) noexcept : pace_(pace) {}

  /// Call between two polls that found nothing.
  void pause() {
    const int n = polls_++;
    if (n < pace_.spins) return;
    if (n < pace_.spins + pace_.yields) {
      std::this_thread::yield();
      return;
    }
    nap_ = nap_.count() == 0 ? pace_.first : std::min(nap_ * 2, pace_.most);
    std::this_thread::sleep_for(nap_);
  }

  /// The polls so far.
  int polls() const noexcept { return polls_; }

 private:
  backoff_pace pace_;
  int polls_ = 0;
  std::chrono::microseconds nap_{0};
};

}  // namespace oa::detail
