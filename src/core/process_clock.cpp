#include "oa/core/process_clock.hpp"

namespace oa {

std::chrono::steady_clock::time_point process_epoch() noexcept {
  static const std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  return epoch;
}

}  // namespace oa
