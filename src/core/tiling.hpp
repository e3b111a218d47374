#pragma once
// Tile shapes for a contraction under a device memory budget, chosen to move
// as few bytes between host and device as the budget allows.

#include <cstddef>
#include <string>

namespace oa::detail {

struct tiling_problem {
  std::size_t m = 0, n = 0, k = 0;  // C is m x n, the inner loop k
  std::size_t elem_bytes = 8;
  bool reads_c = false;             // C's tiles are read as well as written
  std::size_t budget = 0;           // device bytes the plan may use
  std::size_t granularity = 1;      // allocations count rounded up to this
  bool c_resident = false;          // C lives whole on the device (its bytes are not in `budget`): no C tile buffers
  bool c_written = true;            // C's tiles are copied back to the host
};

/// Which operand's panel stays on the device across a line of C tiles.
enum class held_panel { none, a_rows, b_cols };

struct tile_plan {
  std::size_t mt = 0, nt = 0, kt = 0;  // C tile mt x nt; k in steps of kt
  held_panel hold = held_panel::none;
  int c_buffers = 1;                   // C tiles in flight: 2 lets a tile's copies overlap the next one's steps;
                                       // 0: C is resident, tiles are computed in place
  std::size_t device_bytes = 0;        // memory the plan allocates
  std::size_t bytes_moved = 0;         // host <-> device, whole contraction
  std::size_t tiles_m() const noexcept { return (m + mt - 1) / mt; }
  std::size_t tiles_n() const noexcept { return (n + nt - 1) / nt; }
  std::size_t steps_k() const noexcept { return (k + kt - 1) / kt; }
  std::size_t m = 0, n = 0, k = 0;
  std::string describe() const;        // "C tiles 2048x2048, k steps of 512, A row panels held"
};

/// Device bytes of a plan's buffers (each rounded up to the granularity).
std::size_t tile_plan_bytes(const tiling_problem& p, std::size_t mt, std::size_t nt, std::size_t kt, held_panel h,
                            int c_buffers);
/// Host <-> device bytes of a plan.
std::size_t tile_plan_traffic(const tiling_problem& p, std::size_t mt, std::size_t nt, held_panel h);

/// The plan moving the fewest bytes within the budget; throws oa::plan_error
/// naming the smallest budget that would do when even the smallest tiles do
/// not fit.
tile_plan plan_tiles(const tiling_problem& p);

/// The I/O lower bound of an n x n x n product with fast memory of M bytes:
/// elem_bytes * (2 n^3 / sqrt(M / elem_bytes) + n^2).
double io_lower_bound_bytes(std::size_t n, std::size_t elem_bytes, std::size_t budget);

}  // namespace oa::detail
