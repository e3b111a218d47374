#pragma once
// Recovery from a device fault: the chunks the device failed on run again
// on the host, in place, from the caller's data as it was before them.

#include <cstddef>
#include <exception>
#include <unordered_set>
#include <vector>

#include "core/planner.hpp"
#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"

namespace oa::detail {

/// Runs chunks `which` of the stage again on the host device, in place, over
/// its streams. A chunk of a fused stage runs the kernel's description, as
/// the emulated device does, so that it computes the same bits and leaves
/// the same per-block partials (`fused_entries`: blocks per chunk); other
/// chunks run the CPU functions and leave one partial per reduction where
/// the device's entries would have been. Returns the error of the first
/// failing chunk.
std::exception_ptr rerun_on_host(device& host, const stage& s, const std::vector<call_node>& nodes,
                                 const std::unordered_set<const value_state*>& needed_on_host,
                                 const std::vector<split::range>& ranges, const std::vector<std::size_t>& which,
                                 std::size_t chunk_units, const stage_layout& L,
                                 const std::vector<std::size_t>& partial_offsets, std::size_t chunk_partial_bytes,
                                 std::vector<std::byte>& partials, std::vector<std::size_t>* fused_entries);

}  // namespace oa::detail
