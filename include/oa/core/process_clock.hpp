#pragma once
// One clock for every device's records and for traces: seconds since the
// process first asked for it. Each device counting from its own start would
// put two devices' work (a host stage beside a GPU stage) on timelines that
// do not line up.

#include <chrono>

namespace oa {

/// The moment the process clock counts from (its first use).
std::chrono::steady_clock::time_point process_epoch() noexcept;

/// Seconds from the process epoch to `t`.
inline double process_seconds(std::chrono::steady_clock::time_point t) noexcept {
  return std::chrono::duration<double>(t - process_epoch()).count();
}

}  // namespace oa
