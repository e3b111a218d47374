#pragma once
// The rates a device's products reach by tile shape, measured on the device
// with the contraction's own step function (cuBLAS on a GPU, the host kernel
// on the emulated device). Libraries run thin or odd-sized tiles well below
// their in-core rate (cuBLAS picks other kernels under about 128 in a side
// and off multiples of 8); the tile planner's steps use these measurements
// in place of one rate, so plans avoid the shapes the library runs slowly.

#include <array>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "oa/core/contraction.hpp"

namespace oa::detail {

/// A product's rate by extent: the rate of a reference step (each extent
/// `reference`), and per extent of m, n and k the fraction of it a step
/// reaches with that extent alone below the reference.
struct product_curve {
  double flops = 0;           // the reference step's flops per second
  std::size_t reference = 0;  // its m, n and k
  double unaligned = 1;       // fraction for a step whose extents are not all multiples of 8
  /// m, n, k: (extent, fraction of `flops`), extents ascending, below `reference`.
  std::array<std::vector<std::pair<std::size_t, double>>, 3> fraction;

  /// Flops per second of an m x n x k step: `flops` times each extent's
  /// fraction (linear in the extent's logarithm between measured points,
  /// the first point's below them, 1 from the reference up), times
  /// `unaligned` off multiples of 8.
  double rate(std::size_t m, std::size_t n, std::size_t k) const noexcept;
};

/// The step function's curve on `dev` for the contraction's element size
/// and transposes, measured on scratch device memory (at most half of
/// `budget`, zero-filled) the first time it is asked for in the process,
/// then kept per device name, element size and transposes. The reference
/// extent is the largest multiple of 64 up to 4096 whose three operands fit
/// and whose step takes about 2 ms at `nominal_flops` (0: measured on a
/// 256-cubed step first). nullptr when the budget holds no 256-cubed step or
/// the measurement fails (its error does not reach the stage: planning then
/// uses the device's rates).
std::shared_ptr<const product_curve> product_rates(device& dev, const contraction_desc& d,
                                                   const contraction_desc::step_fn& step, std::size_t budget,
                                                   double nominal_flops);

/// Forgets every kept curve (tests).
void forget_product_rates();

}  // namespace oa::detail
