#pragma once
// What one chunk of a stage runs: its calls over the chunk's regions (the
// body of a launch), or for a fused stage its generated kernel (the
// arguments a GPU launches it with; its description, for devices that run
// it on the host). Shared by the chunk pipeline and the host re-runs.

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/kernel_source.hpp"
#include "core/planner.hpp"
#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"

namespace oa::detail {

/// An exception of one of a stage's calls, with the call's position in the
/// stage: the stage runs again without that call and what depends on it.
struct call_failed {
  std::size_t position;
  std::exception_ptr error;
};

/// Where each value of the stage lies for chunk r, given a slot's buffers.
/// Temporaries of a fused stage live in registers: they have no region.
std::vector<region> chunk_regions(const stage_layout& L, const std::vector<std::byte*>& buffers, split::range r);

/// Blocks of a generated kernel over `elements` elements (one partial each).
unsigned fused_grid(std::size_t elements);

/// Arguments of a stage's generated kernel for one chunk, in parameter order.
std::shared_ptr<const generated_kernel> kernel_for_chunk(const kernel_source& ks,
                                                         const std::shared_ptr<const std::string>& source,
                                                         const stage& s, const std::vector<call_node>& nodes,
                                                         const std::vector<std::byte*>& buffers,
                                                         std::byte* partials, std::size_t elements,
                                                         const std::vector<std::size_t>& partial_offsets);

/// Runs every call of the stage on one chunk: the body of a launch. With
/// `use_device_twin`, calls run their device functions: a function given as
/// code enqueues its GPU work on `stream` when that is a CUDA device's, and
/// runs its twin otherwise. A call's exception comes out as call_failed.
void run_chunk(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
               const std::vector<region>& regions, split::range r, std::byte* partials, bool use_device_twin,
               const stream_view& stream = {}, const std::vector<std::byte*>* buffers = nullptr);

/// Bytes of a stage's values a pass of run_fused_description covers: what a
/// core's cache holds, so the twins' operands stay there between calls.
constexpr std::size_t fused_pass_bytes = std::size_t{256} << 10;

/// What a stage's generated kernel computes on one chunk, run on the host:
/// the device functions' host twins over `grid` blocks of the chunk's units,
/// several blocks a pass (temporaries in one pass's host scratch, where the
/// kernel keeps them in registers), each block's reduction partials at its
/// own entry, identities for blocks that get no unit.
void run_fused_description(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
                           const std::vector<region>& regs, split::range r, std::byte* partials,
                           const std::vector<std::size_t>& partial_offsets, unsigned grid);

}  // namespace oa::detail
