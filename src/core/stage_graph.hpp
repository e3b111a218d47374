#pragma once
// The order stages must keep among themselves: a stage follows an earlier
// one that writes what it reads or writes, or reads what it writes (by
// value, and by the host storage values share: versions of the caller's
// object updated in place). Stages with no such path between them may run
// at the same time.

#include <cstddef>
#include <vector>

#include "core/planner.hpp"
#include "oa/core/graph.hpp"

namespace oa::detail {

/// For each stage, the earlier stages it must follow directly.
std::vector<std::vector<std::size_t>> stage_dependencies(const std::vector<stage>& stages,
                                                         const std::vector<call_node>& nodes);

}  // namespace oa::detail
