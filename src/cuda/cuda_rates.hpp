#pragma once
// The rates a CUDA device reports to the planner's time model.

#include "oa/core/device.hpp"

namespace oa::cuda::detail {

/// Measures GPU `ordinal`'s link (64 MiB pinned copies each way alone and
/// both at once) and device memory rate, and estimates its in-core product
/// rate from its multiprocessors and clock. Takes a few milliseconds; what
/// cannot be measured stays 0 (unknown). Never throws.
device_rates measure_rates(int ordinal) noexcept;

}  // namespace oa::cuda::detail
