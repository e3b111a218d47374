#pragma once
// The planner: which calls are live, how they group into stages, where each
// value of a stage lives per chunk, and how large a chunk can be.

#include <cstddef>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"

namespace oa::detail {

/// Calls that must run: they write a value someone holds, the caller's
/// storage, or an input of another live call. Index = node index.
std::vector<bool> live_calls(const std::vector<call_node>& nodes);

/// A run of calls over the same units, chunked together.
struct stage {
  std::vector<int> calls;  // node indices, program order
  std::size_t units = 0;
  bool device_capable = true;  // every call has a device function
  bool kernels = false;        // device functions given as code (oa::kernel): never fused
  bool contraction = false;    // one contraction call, run tile by tile
};

/// Groups live calls into stages, run in order. A call joins the latest stage
/// over the same units that can run it (all calls with element-wise device
/// functions, all with device functions given as code, or all CPU-only) unless that would run it before something it depends on: a stage
/// producing what it reads, a stage finishing a whole value it needs (a lazy
/// broadcast, strictly earlier), or a stage reading a version it updates.
/// Otherwise it opens a new stage.
std::vector<stage> form_stages(const std::vector<call_node>& nodes, const std::vector<bool>& live);

/// How a value of a stage is held during one chunk.
enum class value_class : std::uint8_t {
  input,      // ready before the stage: staged in (or viewed in place)
  temporary,  // produced and consumed within the chunk: device buffer only
  output,     // written back to its host storage
};

struct stage_value {
  value_state* v;
  value_class cls;
  int buffer = -1;  // device buffer (-1: viewed in place on a host-accessible device)
  int first = -1;   // position of the producing call (-1 for inputs)
  int last = -1;    // position of the last call reading it
  bool loaded = true;  // an input copied in per chunk; false: every call that takes it overwrites it unread
};

struct call_slots {
  std::vector<int> regions;  // stage value index per partitioned argument
  int partial = -1;          // reduction index
  int scratch = -1;          // device buffer of the call's scratch memory (oa::kernel(...).scratch)
};

/// Where every value of a stage lives during a chunk.
struct stage_layout {
  std::vector<stage_value> values;
  std::vector<std::size_t> buffer_unit_bytes;  // per device buffer
  std::vector<std::size_t> buffer_fixed_bytes; // per device buffer: bytes besides its units (scratch)
  std::vector<call_slots> calls;               // per call of the stage
  std::vector<value_state*> reductions;
  std::size_t buffer_bytes_per_unit = 0;   // device memory per unit per pipeline slot
  std::size_t working_bytes_per_unit = 0;  // every value touched, per unit (the working set)
  std::size_t in_bytes_per_unit = 0;       // staged in per unit
  std::size_t out_bytes_per_unit = 0;      // written back per unit
  std::size_t partial_bytes = 0;           // reduction partials per chunk
};

/// Where a stage's values live during a chunk.
enum class placement_mode : std::uint8_t {
  staged,    // a device with its own memory: every value in a device buffer
  in_place,  // a host-accessible device: inputs and outputs viewed in host storage, temporaries in buffers
  fused,     // one generated kernel per chunk: temporaries in registers, no buffer
};

/// Lays out a stage. Buffers are reused once the value in them is dead
/// (liveness by position in the stage). Values in `own` (read from or
/// written to whole copies on the device) get a buffer of their own that
/// takes no slot memory: the executor points it into the copy.
stage_layout layout_stage(const stage& s, const std::vector<call_node>& nodes, placement_mode mode,
                          const std::unordered_set<const value_state*>& needed_on_host,
                          const std::unordered_set<const value_state*>& own = {});

/// Values that must reach host storage: held by a handle, the caller's
/// storage (not superseded by a later mut), or read by a later stage.
/// `demanded`, when given, gets those wanted for their own sake (all but the
/// ones only read by a later stage, which may stay resident on the device).
std::unordered_set<const value_state*> values_needed_on_host(
    const std::vector<call_node>& nodes, const std::vector<bool>& live, const std::vector<stage>& stages,
    std::unordered_set<const value_state*>* demanded = nullptr);

struct chunk_plan {
  std::size_t chunk_units = 0;
  std::size_t chunks = 0;
  int streams = 0;
};

/// The device memory of one pipeline slot, as the device counts it: one
/// allocation per buffer (its bytes per unit times the chunk's units) plus one
/// of fixed size (reduction partials), each rounded up to the device's
/// allocation granularity.
struct slot_memory {
  std::vector<std::size_t> unit_bytes;  // per buffer
  std::size_t fixed = 0;                // one allocation of this size when nonzero
  std::size_t granularity = 1;
  std::vector<std::size_t> buffer_fixed;  // per buffer (or empty): bytes besides its units
  // What a unit moves through the slot when values live in whole copies
  // instead of its buffers (they take no slot memory): what OA_CHUNK_BYTES
  // caps then. 0: the buffers' bytes.
  std::size_t moved_bytes_per_unit = 0;

  /// Bytes the device counts for a slot holding `chunk_units` units.
  std::size_t bytes(std::size_t chunk_units) const noexcept;
  /// Bytes per unit, unrounded (what OA_CHUNK_BYTES caps).
  std::size_t bytes_per_unit() const noexcept;
};

/// What a chunk of a stage costs on a device with its own memory, for the
/// time model that sizes chunks: bytes over the link and through the
/// kernels per unit, operations per chunk, and the device's rates.
struct chunk_costs {
  std::size_t in_bytes_per_unit = 0;      // copied in per unit (pinned or staged)
  std::size_t out_bytes_per_unit = 0;     // copied out per unit
  std::size_t staged_in_per_unit = 0;     // of those, through the staging engine (pageable host memory)
  std::size_t staged_out_per_unit = 0;
  std::size_t kernel_bytes_per_unit = 0;  // device memory the chunk's kernels read and write
  std::size_t copies_in = 0, copies_out = 0, launches = 1;  // operations per chunk
  device_rates rates;

  /// Whether the rates say anything about the link (else chunks are sized by memory alone).
  bool known() const noexcept { return rates.h2d > 0 || rates.d2h > 0 || rates.both_ways > 0; }
};

/// Seconds to move `h2d_bytes` in and `d2h_bytes` out at once over a link
/// with `r`'s rates: each direction at its own rate until their sum passes
/// the shared cap, then both slowed in proportion (as measured on an H100:
/// 54.7 and 55.2 GB/s alone, 88.4 together). Unlimited rates cost nothing.
double link_seconds(const device_rates& r, double h2d_bytes, double d2h_bytes) noexcept;

/// Predicted seconds of a stage of `units` cut into `chunks` even chunks on
/// `slots` pipeline slots: the first chunk's copy in, kernels and copy out,
/// then one bottleneck time per further chunk (the busiest of copy in,
/// kernels, copy out, the link's shared cap, or a slot's whole round trip).
/// An estimate for planning, never reported as a measurement.
double pipeline_seconds(const chunk_costs& c, std::size_t units, std::size_t chunks, int slots);

/// Chooses the chunk size: every buffer live per chunk times the pipeline
/// depth (streams) must fit the budget. Fewer streams are tried before giving
/// up. Without `costs` (or with rates that say nothing of the link), as few
/// chunks as fit; with them, the count the time model predicts fastest
/// (more, smaller chunks shorten the pipeline's fill and drain at its edges
/// until per-operation costs outweigh them). Chunks are then evened out.
/// `chunk_bytes` (OA_CHUNK_BYTES) caps the chunk when nonzero. Throws
/// oa::plan_error naming the stage and the smallest budget that would hold
/// one unit on one stream when this one cannot.
chunk_plan plan_chunks(std::size_t units, const slot_memory& slot, std::size_t budget, int streams,
                       std::size_t chunk_bytes, const std::string& what, const chunk_costs* costs = nullptr);
/// The same for a slot of one buffer of `bytes_per_unit` plus
/// `fixed_bytes_per_slot`, counted exactly.
chunk_plan plan_chunks(std::size_t units, std::size_t bytes_per_unit, std::size_t fixed_bytes_per_slot,
                       std::size_t budget, int streams, std::size_t chunk_bytes, const std::string& what,
                       const chunk_costs* costs = nullptr);

/// "vm::add, vm::mul (+3 more)": names of a stage's calls for messages.
std::string describe(const stage& s, const std::vector<call_node>& nodes);

}  // namespace oa::detail
