#pragma once
// The rates a CUDA device reports to the planner's time model.

#include "oa/core/device.hpp"

namespace oa::cuda::detail {

/// Measures GPU `ordinal`'s link (64 MiB pinned copies each way alone and
/// both at once, best of three) and device memory rate, and the staging
/// engine's rate (`staging_threads` at one thread's memcpy rate), and
/// estimates its in-core product rate from its multiprocessors and clock;
/// each snapped (device_rates::snapped). Takes tens of milliseconds, once;
/// what cannot be measured stays 0 (unknown). Never throws.
device_rates measure_rates(int ordinal, int staging_threads) noexcept;

}  // namespace oa::cuda::detail
