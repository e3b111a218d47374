#pragma once
// Cases from oa's own planner (predict) and from a run's records (replay).

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <oa/core/device.hpp>

#include "core/product_rates.hpp"
#include <string>

#include "sim/cases.hpp"

namespace oa_sim {

/// Bytes per element of a streaming workload's stage as the CUDA device lays
/// it out (fused kernel): its lazy calls recorded on a tiny array, taken
/// before they run, laid out by oa's planner (layout_stage).
struct stage_shape {
  std::vector<std::size_t> in_unit_bytes, out_unit_bytes, buffer_unit_bytes;
};
stage_shape streaming_shape(const std::string& workload);

/// cuda_device::preferred_streams(): the streams a stage gets when --streams is not given.
constexpr int cuda_preferred_streams = 4;

/// The rates the new design's planner would see on the profile's machine
/// (`pageable`: arrays go through the staging threads).
oa::device_rates planner_rates(const profile& p, bool pageable);

/// A streaming case chunked by oa's planner (plan_chunks) under `budget`;
/// `streams` 0 is the CUDA device's preferred count. With `rates` the
/// planner's time model sizes the chunks (the new design), without them the
/// fewest chunks that fit (the design the committed runs measured).
streaming_case plan_streaming(const profile& p, const std::string& workload, std::size_t elements,
                              std::size_t budget, int streams, bool sequential, std::size_t chunk_bytes,
                              const oa::device_rates* rates = nullptr);

/// A product's case tiled by oa's planner (plan_tiles) under `budget`: by
/// predicted time with `rates` and the measured `shapes` (`staged`:
/// pageable host memory), by fewest bytes without (the design the H100 ran).
gemm_case plan_gemm(std::size_t n, std::size_t elem_bytes, std::size_t budget, bool sequential,
                    std::size_t chunk_bytes, const oa::device_rates& rates = {}, bool staged = false,
                    std::shared_ptr<const oa::detail::product_curve> shapes = nullptr);

/// A streaming case as a record ran it: its chunks, streams and bytes.
streaming_case recorded_streaming(const profile& p, const nlohmann::json& record);

/// A product's case as a record ran it: the plan its `tiling` text names
/// (tile_plan::describe, and the write-back blocks the report adds), under
/// the record's budget. Throws std::runtime_error naming the text when it
/// is not one.
gemm_case recorded_gemm(const nlohmann::json& record);

/// The kernel seconds per element a profile gives a workload.
double kernel_seconds_per_unit(const profile& p, const std::string& workload);

}  // namespace oa_sim
