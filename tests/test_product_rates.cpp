// Product rates by tile shape: the curve's interpolation, tile plans that
// step at measured rates, and the measurement itself on the emulated device
// (the host kernel; on a GPU the same code times cuBLAS).

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <oa/linalg/gemm.hpp>

#include "core/product_rates.hpp"
#include "core/tiling.hpp"
#include "support.hpp"

namespace {

using oa::detail::plan_tiles;
using oa::detail::predict_tile_plan;
using oa::detail::product_curve;
using oa::detail::tiling_problem;
using oa_test::h100_rates;

/// A curve like cuBLAS's: thin extents slow, k thinner than 1024 slower still.
std::shared_ptr<const product_curve> thin_k_slow() {
  auto c = std::make_shared<product_curve>();
  c->flops = 55e12, c->reference = 4096, c->unaligned = 0.8;
  for (std::size_t axis = 0; axis < 3; ++axis)
    for (std::size_t e = 64; e < 4096; e *= 2) {
      const double f = e >= 1024 ? 0.97 : axis == 2 ? 0.15 * static_cast<double>(e) / 64 : 0.6;
      c->fraction[axis].push_back({e, std::min(f, 0.97)});
    }
  return c;
}

oa::detail::contraction_desc product_of(std::size_t elem_bytes, bool ta, bool tb) {
  oa::detail::contraction_desc d;
  d.elem_bytes = elem_bytes;
  d.trans_a = ta, d.trans_b = tb;
  d.cpu = elem_bytes == 8 ? oa::linalg::detail::cpu_step<double>(1.0, 0.0, ta, tb)
                          : oa::linalg::detail::cpu_step<float>(1.0f, 0.0f, ta, tb);
  return d;
}

}  // namespace

TEST_CASE("a product curve: the measured points, log-linear between them, 1 from the reference up") {
  product_curve c;
  c.flops = 100, c.reference = 1024, c.unaligned = 0.5;
  c.fraction[0] = {{64, 0.2}, {256, 0.6}};
  CHECK(c.rate(1024, 1024, 1024) == doctest::Approx(100));
  CHECK(c.rate(8192, 4096, 2048) == doctest::Approx(100));
  CHECK(c.rate(256, 1024, 1024) == doctest::Approx(60));
  CHECK(c.rate(128, 1024, 1024) == doctest::Approx(40));  // halfway in log between 64 and 256
  CHECK(c.rate(512, 1024, 1024) == doctest::Approx(80));  // halfway between 256 and the reference
  CHECK(c.rate(32, 1024, 1024) == doctest::Approx(10));   // below the first point: in proportion
  CHECK(c.rate(1023, 1024, 1024) < 51);                   // not a multiple of 8: `unaligned`
  CHECK(c.rate(256, 8, 1024) == doctest::Approx(60));     // no points for n: 1
}

TEST_CASE("tile plans with measured shapes step at those rates and are never predicted slower for it") {
  const auto shapes = thin_k_slow();
  for (std::size_t budget : {std::size_t{96} << 20, std::size_t{384} << 20, std::size_t{1536} << 20})
    for (std::size_t n : {std::size_t{8192}, std::size_t{16384}}) {
      tiling_problem flat{n, n, n, 8, false, budget, 1};
      flat.rates = h100_rates();
      tiling_problem measured = flat;
      measured.shapes = shapes;
      CHECK(measured.timed());
      const auto by_flat = plan_tiles(flat), by_shapes = plan_tiles(measured);
      CAPTURE(budget);
      CAPTURE(by_flat.describe());
      CAPTURE(by_shapes.describe());
      CHECK(by_shapes.device_bytes <= budget);
      // Judged by the measured rates, the plan made with them is at least as fast.
      CHECK(predict_tile_plan(measured, by_shapes).seconds <= predict_tile_plan(measured, by_flat).seconds * 1.0001);
      // And its steps are what the curve says: k = 256 at 0.6 of the curve's rate, C through device memory.
      CHECK(oa::detail::predicted_step_seconds(flat.rates, 8, 4096, 4096, 256, true, shapes.get()) ==
            doctest::Approx(2.0 * 4096 * 4096 * 256 / (55e12 * 0.6) + 2.0 * 4096 * 4096 * 8 / 3003e9));
    }
  // Measured shapes alone (no in-core rate from the device) are enough to time plans.
  tiling_problem only{8192, 8192, 8192, 8, false, std::size_t{96} << 20, 1};
  only.rates.h2d = only.rates.d2h = 50e9;
  CHECK_FALSE(only.timed());
  only.shapes = shapes;
  CHECK(only.timed());
  CHECK(plan_tiles(only).predicted_seconds > 0);
}

TEST_CASE("product rates measured on the emulated device: the host kernel by shape, kept, or none") {
  oa::detail::forget_product_rates();
  oa::emulated_options o;
  o.memory_budget = std::size_t{64} << 20;
  auto dev = oa::make_emulated_device(o);
  for (bool ta : {false, true}) {
    const auto d = product_of(8, ta, false);
    const auto c = oa::detail::product_rates(*dev, d, d.cpu, dev->memory_budget(), 0);
    REQUIRE(c);
    CAPTURE(c->reference);
    CHECK(c->flops > 1e8);  // any host does a 256-cubed product faster than 0.3 s
    CHECK(c->reference >= 256);
    CHECK(c->reference % 64 == 0);
    CHECK(3 * c->reference * c->reference * 8 <= dev->memory_budget() / 2);
    CHECK(c->unaligned > 0);
    CHECK(c->unaligned <= 1);
    for (const auto& axis : c->fraction) {
      CHECK(!axis.empty());
      for (const auto& [e, f] : axis) {
        CHECK(e < c->reference);
        CHECK(f > 0);
        CHECK(f <= 1);
      }
    }
    // Kept per device, element size and transposes: the same curve again.
    CHECK(oa::detail::product_rates(*dev, d, d.cpu, dev->memory_budget(), 0) == c);
  }
  CHECK(dev->bytes_in_use() == 0);
  // A budget that holds no 256-cubed step: none, and nothing allocated.
  oa::detail::forget_product_rates();
  const auto f = product_of(4, false, false);
  CHECK_FALSE(oa::detail::product_rates(*dev, f, f.cpu, std::size_t{1} << 20, 0));
  CHECK(dev->bytes_in_use() == 0);
}

TEST_CASE("a product-rate measurement that fails leaves no error and nothing allocated") {
  for (std::uint64_t n : {1, 2, 5}) {
    oa::detail::forget_product_rates();
    oa::emulated_options o;
    o.memory_budget = std::size_t{16} << 20;
    o.fail_launch = n;
    auto dev = oa::make_emulated_device(o);
    const auto d = product_of(8, false, true);
    std::shared_ptr<const product_curve> c;
    CHECK_NOTHROW(c = oa::detail::product_rates(*dev, d, d.cpu, dev->memory_budget(), 0));
    CHECK_FALSE(c);
    CHECK(dev->bytes_in_use() == 0);
  }
  oa::detail::forget_product_rates();
}
