#pragma once
// The emulated device's link: a rate per direction, a rate both directions
// share (a GPU's link moves less both ways at once than the sum of each
// way alone), and a latency per copy. Each copy reserves its time on its
// direction and on the shared link; it ends when both reservations do.

#include <algorithm>
#include <chrono>
#include <mutex>

#include "oa/core/device.hpp"

namespace oa::detail {

class link_model {
 public:
  using clock = std::chrono::steady_clock;

  /// Rates in bytes per second (0: unlimited); latency in seconds.
  link_model(double per_direction, double shared, double latency)
      : per_direction_(per_direction), shared_(shared), latency_(latency) {}

  bool throttled() const noexcept { return per_direction_ > 0 || shared_ > 0 || latency_ > 0; }

  /// When a copy of `bytes` in direction `d` that may start at `now` is done.
  clock::time_point reserve(phase d, std::size_t bytes, clock::time_point now) {
    std::lock_guard lock(m_);
    clock::time_point& way = d == phase::h2d ? h2d_free_ : d2h_free_;
    const clock::time_point start = std::max(now, way) + seconds(latency_);
    const clock::time_point own = start + seconds(per_direction_ > 0 ? static_cast<double>(bytes) / per_direction_ : 0);
    clock::time_point end = own;
    if (shared_ > 0) {
      shared_free_ = std::max(start, shared_free_) + seconds(static_cast<double>(bytes) / shared_);
      end = std::max(end, shared_free_);
    }
    way = end;
    return end;
  }

 private:
  static clock::duration seconds(double s) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(std::min(s, 1e9)));
  }

  const double per_direction_, shared_, latency_;
  std::mutex m_;
  clock::time_point h2d_free_{}, d2h_free_{}, shared_free_{};
};

}  // namespace oa::detail
