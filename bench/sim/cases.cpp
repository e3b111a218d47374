#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "sim/cases.hpp"
#include "sim/machine.hpp"

namespace oa_sim {

std::size_t streaming_case::in_bytes() const {
  return units * std::accumulate(in_unit_bytes.begin(), in_unit_bytes.end(), std::size_t{0});
}
std::size_t streaming_case::out_bytes() const {
  return units * std::accumulate(out_unit_bytes.begin(), out_unit_bytes.end(), std::size_t{0});
}

std::vector<std::size_t> even_chunks(std::size_t units, std::size_t chunks) {
  if (chunks == 0) throw std::invalid_argument("oa_sim::even_chunks: chunks must be > 0");
  const std::size_t per = (units + chunks - 1) / chunks;
  std::vector<std::size_t> out;
  for (std::size_t u = 0; u < units; u += per) out.push_back(std::min(per, units - u));
  return out;
}

double gemm_step_seconds(const profile& p, std::size_t elem_bytes, std::size_t m, std::size_t n, std::size_t k) {
  const double rate = p[elem_bytes == 4 ? "cublas_float_tflops" : "cublas_double_tflops"] * 1e12;
  const double smallest = static_cast<double>(std::min({m, n, k}));
  const double eff = p["gemm_tile_efficiency"] * smallest / (smallest + p["gemm_small_tile_dim"]);
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / (rate * eff);
}

oa::device_rates profile_rates(const profile& p) {
  oa::device_rates r;
  r.h2d = p["h2d_pinned_gbps"] * gb;
  r.d2h = p["d2h_pinned_gbps"] * gb;
  r.both_ways = p["both_ways_pinned_gbps"] * gb;
  // The ring: as many pieces in flight as slots (or threads), each filled at one thread's memcpy rate,
  // within the host memory's copy bandwidth (read and write).
  const double in_flight = std::min(p["new_ring_slots"], p["new_host_threads"]);
  r.staging = std::min(in_flight * p["new_memcpy_gbps_per_thread"], p["host_memcpy_cap_gbps"] / 2) * gb;
  r.op_latency = p["op_latency_us"] * 1e-6;
  r.kernel_bytes = p["device_memory_gbps"] * gb;
  r.gemm_flops[0] = p["cublas_float_tflops"] * 1e12;
  r.gemm_flops[1] = p["cublas_double_tflops"] * 1e12;
  r.gemm_unaligned = p["gemm_unaligned_factor"];
  return r;
}

std::shared_ptr<const oa::detail::product_curve> profile_shapes(const profile& p, std::size_t elem_bytes) {
  const std::string key = std::string("cublas_") + (elem_bytes >= 8 ? "double" : "float") + "_curve_";
  const auto at = [&](const std::string& name) {
    const auto it = p.params.find(key + name);
    return it == p.params.end() ? 0.0 : it->second.value;
  };
  auto c = std::make_shared<oa::detail::product_curve>();
  c->reference = static_cast<std::size_t>(at("reference"));
  c->flops = at("tflops") * 1e12;
  c->unaligned = at("unaligned");
  if (c->reference == 0 || c->flops <= 0 || c->unaligned <= 0) return nullptr;
  const char* axes[3] = {"m", "n", "k"};
  for (std::size_t axis = 0; axis < 3; ++axis)
    for (std::size_t e = 64; e < c->reference; e *= 2)
      if (const double f = at(std::string(axes[axis]) + "_" + std::to_string(e)); f > 0)
        c->fraction[axis].push_back({e, f});
  return c;
}

double new_gemm_step_seconds(const profile& p, std::size_t elem_bytes, std::size_t m, std::size_t n, std::size_t k,
                             bool reads_c_tile) {
  return oa::detail::predicted_step_seconds(profile_rates(p), elem_bytes, m, n, k, reads_c_tile,
                                            profile_shapes(p, elem_bytes).get());
}

double link_bound_seconds(const profile& p, double h2d_bytes, double d2h_bytes) {
  return std::max({h2d_bytes / (p["h2d_pinned_gbps"] * gb), d2h_bytes / (p["d2h_pinned_gbps"] * gb),
                   (h2d_bytes + d2h_bytes) / (p["both_ways_pinned_gbps"] * gb)});
}

double shared_link_bound_seconds(const profile& p, double h2d_bytes, double d2h_bytes) {
  const double rh = p["h2d_pinned_gbps"] * gb, rd = p["d2h_pinned_gbps"] * gb, cap = p["both_ways_pinned_gbps"] * gb;
  if (rh + rd <= cap) return std::max(h2d_bytes / rh, d2h_bytes / rd);
  const double ah = rh * cap / (rh + rd), ad = rd * cap / (rh + rd);  // each direction's rate while both run
  const double both = std::min(h2d_bytes / ah, d2h_bytes / ad);
  return both + (h2d_bytes - ah * both) / rh + (d2h_bytes - ad * both) / rd;
}

}  // namespace oa_sim
