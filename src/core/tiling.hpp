#pragma once
// Tile shapes for a contraction under a device memory budget. With the
// device's rates known, plans are chosen by a predicted wall time (steps at
// the product rate, copies on the link, the pipeline's edges); without them,
// by the fewest bytes moved between host and device.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oa/core/device.hpp"

namespace oa::detail {

struct product_curve;

struct tiling_problem {
  std::size_t m = 0, n = 0, k = 0;  // C is m x n, the inner loop k
  std::size_t elem_bytes = 8;
  bool reads_c = false;             // C's tiles are read as well as written
  std::size_t budget = 0;           // device bytes the plan may use
  std::size_t granularity = 1;      // allocations count rounded up to this
  bool c_resident = false;          // C lives whole on the device (its bytes are not in `budget`): no C tile buffers
  bool c_written = true;            // C's tiles are copied back to the host
  device_rates rates{};             // the device's costs; no product or link rate: plan for fewest bytes
  bool staged = false;              // host memory is pageable: copies run at rates.staging
  int lookahead = 0;                // piece buffers per streamed operand, at least 2; 0: the planner's choice
  int c_blocks = 0;                 // with one C buffer, most write-back blocks per tile; 0: default_c_blocks
  int c_buffers = 0;                // C tile buffers, 1 or 2 (not resident); 0: the planner's choice
  /// The device's product rates by step shape, measured (src/core/product_rates.hpp); null: rates.flops.
  std::shared_ptr<const product_curve> shapes{};
  /// Whether plans can be chosen by predicted time: a product rate (measured or the device's) and a link.
  bool timed() const noexcept;
};

/// Which operand's panel stays on the device across a line of C tiles.
enum class held_panel { none, a_rows, b_cols };

struct tile_plan {
  std::size_t mt = 0, nt = 0, kt = 0;  // C tile mt x nt; k in steps of kt
  held_panel hold = held_panel::none;
  int lookahead = 2;                   // piece buffers per streamed operand: loads run this many steps ahead
  int c_buffers = 1;                   // C tiles in flight: 2 lets a tile's copies overlap the next one's steps;
                                       // 0: C is resident, tiles are computed in place
  int c_blocks = 1;                    // with one C buffer: a tile's last step and the next tile's first run in
                                       // up to this many blocks of C's columns, so the write-back overlaps them
  std::size_t device_bytes = 0;        // memory the plan allocates
  std::size_t bytes_moved = 0;         // host <-> device, whole contraction
  double predicted_seconds = 0;        // the time model's wall time; 0: planned without rates
  double copy_per_compute = 0;         // link seconds over step seconds, whole contraction (predicted)
  std::size_t tiles_m() const noexcept { return (m + mt - 1) / mt; }
  std::size_t tiles_n() const noexcept { return (n + nt - 1) / nt; }
  std::size_t steps_k() const noexcept { return (k + kt - 1) / kt; }
  std::size_t m = 0, n = 0, k = 0;
  /// "C tiles 2048x2048 (8x8), k steps of 512 (32), A row panels held, 2 C tiles in flight"; a timed
  /// plan adds its lookahead and predicted copy/compute ratio.
  std::string describe() const;
};

/// Write-back blocks per tile with one C buffer, unless overridden.
constexpr int default_c_blocks = 8;

/// One block of a C tile: outer vectors [begin, end) of its storage (columns
/// of a column-major tile), contiguous in a packed tile buffer.
struct c_block {
  std::size_t begin, end;
};
/// A packed C tile of `outer` vectors of `inner` elements cut into at most
/// `blocks` blocks: offsets and widths in multiples of 64 (else 8), a short
/// tail joined to the block before, so that every element keeps the host
/// kernel's summation order; one block when the tile is too small for that.
std::vector<c_block> c_write_blocks(std::size_t outer, std::size_t inner, int blocks);

/// Device bytes of a plan's buffers (each rounded up to the granularity).
std::size_t tile_plan_bytes(const tiling_problem& p, std::size_t mt, std::size_t nt, std::size_t kt, held_panel h,
                            int c_buffers, int lookahead = 2);
/// Host <-> device bytes of a plan.
std::size_t tile_plan_traffic(const tiling_problem& p, std::size_t mt, std::size_t nt, held_panel h);

/// Seconds of one k step's product (m x n by k) on the device, launch cost
/// not included: its flops at the rate measured for its shape (`shapes`),
/// else at the in-core rate (less for extents not multiples of 8), plus C's
/// tile written, and read unless `first_step` of a
/// product that does not read C, through device memory. 0 without a rate.
double predicted_step_seconds(const device_rates& r, std::size_t elem_bytes, std::size_t m, std::size_t n,
                              std::size_t k, bool reads_c_tile, const product_curve* shapes = nullptr);

/// A plan's predicted wall time and the parts it comes from.
struct tile_prediction {
  double seconds = 0;      // wall time: edges plus every tile, line starts with their panels
  double compute = 0;      // every step's seconds (kernel and launch)
  double link = 0;         // every copy's seconds on the link, as if alone
  double copy_per_compute = 0;
};
/// The time model of a plan with `p.rates` (zeros without rates); the
/// simulator's new design uses the same step model.
tile_prediction predict_tile_plan(const tiling_problem& p, const tile_plan& t);

/// With rates: the fastest predicted plan among those whose copies take at
/// most 0.8 of their compute (all plans when none does), the fewest bytes
/// within 2% of it; extents and k steps in multiples of 64 (or 8) where the
/// budget allows. Without rates: the plan moving the fewest bytes. Throws
/// oa::plan_error naming the smallest budget that would do when even the
/// smallest tiles do not fit.
tile_plan plan_tiles(const tiling_problem& p);

/// What tiled contractions plan with in place of their device's own: tests
/// and what-if runs of the time-model planner on any device.
struct tiling_override {
  std::optional<device_rates> rates;  // nullopt: the device's
  int lookahead = 0;                  // forced piece buffers per streamed operand; 0: the planner's choice
  int c_blocks = 0;                   // forced write-back blocks with one C buffer (1: none); 0: the planner's
  int c_buffers = 0;                  // forced C tile buffers (1 or 2); 0: the planner's choice
};
/// Applies to every contraction planned until called with nullopt.
void override_tiling(std::optional<tiling_override> o);
/// Sets p's rates (and forced lookahead) for device `d`, overrides applied;
/// false when an override gave the rates (then nothing is measured).
bool set_tiling_device(tiling_problem& p, const device& d);

/// The I/O lower bound of an n x n x n product with fast memory of M bytes:
/// elem_bytes * (2 n^3 / sqrt(M / elem_bytes) + n^2).
double io_lower_bound_bytes(std::size_t n, std::size_t elem_bytes, std::size_t budget);

}  // namespace oa::detail
