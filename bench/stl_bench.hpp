#pragma once
// oa-bench's STL workloads: a transform-reduce chain, sum((a + b) * c), an
// inclusive scan and a sort, as the standard algorithms (sequential, and
// std::execution::par on oneTBB) and through oa::stl (pipelined and
// sequential), side by side.

#include <cstddef>
#include <cstdint>
#include <oa/core/config.hpp>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_options.hpp"

namespace oa_bench {

struct stl_options : common_options {
  std::string workload = "transform_reduce";  // or "scan", "sort"
  std::size_t elements = 0;
  std::string type = "double";  // int32, int64, float, double
};

/// Every mode of the STL workloads, in the order they run.
const std::vector<std::string>& stl_modes();

/// Runs the modes, prints the table, appends records to `sink`. Returns
/// false when a verified result differs from the sequential standard
/// algorithms' (exactly for integers, 1e-9 relative for double, 1e-4 for
/// float) or a requested mode cannot run.
bool run_stl(const stl_options& opt, json_sink* sink);

}  // namespace oa_bench
