#pragma once
// What a simulated run does, in the terms both designs are built from: a
// streaming stage's chunks and arrays, or a product's tile plan.

#include <cstddef>
#include <string>
#include <vector>

#include "core/tiling.hpp"
#include "sim/engine.hpp"
#include "sim/profile.hpp"

namespace oa_sim {

/// How host arrays reach the DMA engines.
enum class staging { registered, pinned_buffers, pinned_host };  // pinned_host: --host-memory pinned, direct DMA

struct streaming_case {
  std::string workload;
  std::size_t units = 0;
  std::vector<std::size_t> chunk_units;    // per chunk
  int streams = 1;                         // pipeline slots (1: sequential)
  std::vector<std::size_t> in_unit_bytes;  // per array copied in
  std::vector<std::size_t> out_unit_bytes; // per array copied back
  double kernel_seconds_per_unit = 0;
  std::size_t in_bytes() const;
  std::size_t out_bytes() const;
};

struct gemm_case {
  std::size_t n = 0, elem_bytes = 8;
  oa::detail::tile_plan plan;
  bool sequential = false;
  double flops() const { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n); }
};

/// Chunks of `units` as the planner evens them: `chunks` of ceil(units / chunks), the last shorter.
std::vector<std::size_t> even_chunks(std::size_t units, std::size_t chunks);

/// The seconds of one cuBLAS call on an m x n x k tile: in-core rate times
/// the tile efficiency, less for a tile whose smallest side is small.
double gemm_step_seconds(const profile& p, std::size_t elem_bytes, std::size_t m, std::size_t n, std::size_t k);

/// Seconds the link needs at least for these bytes (per-direction peaks, both-ways cap).
double link_bound_seconds(const profile& p, double h2d_bytes, double d2h_bytes);

/// The least seconds when the both-ways cap is shared as the engine shares
/// it (each direction slowed in proportion while both run): the lighter
/// direction wholly under the heavier one, the rest of the heavier alone.
/// Above link_bound_seconds when the cap binds: reaching that bound needs a
/// link that favours the heavier direction.
double shared_link_bound_seconds(const profile& p, double h2d_bytes, double d2h_bytes);

/// The op graphs of the design measured on the H100 (b10d541): staging
/// `registered` (arrays pinned with cudaHostRegister before the stage) or
/// `pinned_buffers` (one staging buffer per stream, filled and drained by
/// host functions on CUDA's single callback thread).
graph old_streaming(const profile& p, const streaming_case& c, staging s);
graph old_gemm(const profile& p, const gemm_case& c, staging s);

/// The staging engine being built: a device-wide ring of pinned slots per
/// direction filled and drained by oa's host threads ahead of the streams,
/// outputs pre-faulted off the critical path, GEMM loads ahead on their own
/// stream. `pinned_host`: the arrays are pinned by the caller, DMA direct.
graph new_streaming(const profile& p, const streaming_case& c, staging s);
graph new_gemm(const profile& p, const gemm_case& c, staging s);

}  // namespace oa_sim
