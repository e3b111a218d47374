#include "core/product_rates.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace oa::detail {

double product_curve::rate(std::size_t m, std::size_t n, std::size_t k) const noexcept {
  const auto at = [this](const std::vector<std::pair<std::size_t, double>>& pts, std::size_t e) {
    if (e >= reference || pts.empty()) return 1.0;
    // Below the smallest measured extent a step does at most in proportion.
    if (e <= pts.front().first) return pts.front().second * static_cast<double>(e) / static_cast<double>(pts.front().first);
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const auto [x1, y1] = i + 1 < pts.size() ? pts[i + 1] : std::pair<std::size_t, double>{reference, 1.0};
      if (e >= x1) continue;
      const auto [x0, y0] = pts[i];
      const double t = std::log(static_cast<double>(e) / static_cast<double>(x0)) /
                       std::log(static_cast<double>(x1) / static_cast<double>(x0));
      return y0 + t * (y1 - y0);
    }
    return 1.0;
  };
  const bool aligned = m % 8 == 0 && n % 8 == 0 && k % 8 == 0;
  return flops * at(fraction[0], m) * at(fraction[1], n) * at(fraction[2], k) * (aligned ? 1.0 : unaligned);
}

namespace {

constexpr std::size_t largest_reference = 4096, smallest_reference = 256, step_quantum = 64;
constexpr double reference_step_seconds = 2e-3;

/// The scratch operands, each `side` x `side` at most, zero-filled, and the
/// stream the steps run on (destroyed first: it waits for its work).
struct scratch {
  scratch(device& dev, std::size_t side, std::size_t elem_bytes)
      : bytes(side * side * elem_bytes), a(dev, bytes), b(dev, bytes), c(dev, bytes), s(dev) {
    const std::vector<std::byte> zeros(bytes);
    const region from{const_cast<std::byte*>(zeros.data()), bytes, 1, bytes};
    for (const device_buffer* buf : {&a, &b, &c}) dev.copy_to_device_async({buf->data(), bytes, 1, bytes}, from, s.id());
    dev.synchronize(s.id());
  }
  std::size_t bytes;
  device_buffer a, b, c;
  oa::stream s;
};

/// Seconds per m x n x k step: one to warm up, then enough back to back for about 4 ms.
double step_seconds(device& dev, scratch& sc, const contraction_desc& d, const contraction_desc::step_fn& step,
                    std::size_t m, std::size_t n, std::size_t k) {
  const std::size_t eb = d.elem_bytes;
  const std::size_t ar = d.trans_a ? k : m, ac = d.trans_a ? m : k, br = d.trans_b ? n : k, bc = d.trans_b ? k : n;
  const matrix_block a{sc.a.data(), ar, ac, ar, false, eb}, b{sc.b.data(), br, bc, br, false, eb},
      c{sc.c.data(), m, n, m, false, eb};
  const auto run = [&](int times) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < times; ++i)
      dev.launch_async({"product rate", [&step, a, b, c](const stream_view& v) { step(a, b, c, false, v); }, {}},
                       sc.s.id());
    dev.synchronize(sc.s.id());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double warm = run(1);
  const int reps = std::clamp(static_cast<int>(std::ceil(4e-3 / std::max(warm, 1e-6))), 2, 16);
  return run(reps) / reps;
}

double flops_of(std::size_t m, std::size_t n, std::size_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

product_curve measure(device& dev, const contraction_desc& d, const contraction_desc::step_fn& step,
                      std::size_t budget, double nominal) {
  const std::size_t eb = d.elem_bytes, grain = std::max<std::size_t>(dev.allocation_granularity(), 1);
  const auto fits = [&](std::size_t side) { return 3 * (side * side * eb + grain) <= budget / 2; };
  std::size_t cap = largest_reference;
  while (cap >= smallest_reference && !fits(cap)) cap -= step_quantum;
  product_curve pc;
  if (cap < smallest_reference) return pc;
  scratch sc(dev, cap, eb);
  if (nominal <= 0) {
    const std::size_t e = smallest_reference;
    nominal = flops_of(e, e, e) / step_seconds(dev, sc, d, step, e, e, e);
  }
  // The side whose cube takes reference_step_seconds at the nominal rate.
  const auto by_time = static_cast<std::size_t>(std::cbrt(reference_step_seconds * nominal / 2));
  const std::size_t ref = std::clamp(by_time / step_quantum * step_quantum, smallest_reference, cap);
  pc.reference = ref;
  pc.flops = flops_of(ref, ref, ref) / step_seconds(dev, sc, d, step, ref, ref, ref);
  const std::size_t odd = ref - 1;
  pc.unaligned = std::min(1.0, flops_of(odd, odd, odd) / step_seconds(dev, sc, d, step, odd, odd, odd) / pc.flops);
  for (std::size_t axis = 0; axis < 3; ++axis)
    for (std::size_t e = step_quantum; e < ref; e *= 2) {
      std::array<std::size_t, 3> x{ref, ref, ref};
      x[axis] = e;
      const double r = flops_of(x[0], x[1], x[2]) / step_seconds(dev, sc, d, step, x[0], x[1], x[2]);
      pc.fraction[axis].push_back({e, std::min(1.0, r / pc.flops)});
    }
  return pc;
}

std::mutex kept_mutex;
std::map<std::tuple<std::string, std::size_t, bool, bool>, std::shared_ptr<const product_curve>> kept;

}  // namespace

std::shared_ptr<const product_curve> product_rates(device& dev, const contraction_desc& d,
                                                   const contraction_desc::step_fn& step, std::size_t budget,
                                                   double nominal_flops) {
  if (!step) return nullptr;
  std::lock_guard lock(kept_mutex);
  const auto key = std::make_tuple(dev.name(), d.elem_bytes, d.trans_a, d.trans_b);
  if (auto it = kept.find(key); it != kept.end()) return it->second;
  std::shared_ptr<const product_curve> pc;
  try {
    auto m = std::make_shared<product_curve>(measure(dev, d, step, budget, nominal_flops));
    if (m->flops > 0 && std::isfinite(m->flops)) pc = std::move(m);
  } catch (...) {
    // A measurement that fails (memory, a faulty device) leaves planning to
    // the device's rates; the stage's own work reports any lasting fault.
  }
  // Too small a budget is not kept: a later stage may have a larger one.
  if (pc || budget / 2 >= 3 * smallest_reference * smallest_reference * d.elem_bytes) kept[key] = pc;
  return pc;
}

void forget_product_rates() {
  std::lock_guard lock(kept_mutex);
  kept.clear();
}

}  // namespace oa::detail
