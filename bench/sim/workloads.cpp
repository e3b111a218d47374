#include "sim/workloads.hpp"

#include "sim/machine.hpp"

#include <Eigen/Core>
#include <oa/annotations/eigen_array.hpp>
#include <oa/oa.hpp>
#include <algorithm>
#include <optional>
#include <regex>
#include <stdexcept>
#include <vector>

#include "core/planner.hpp"
#include "../workloads.hpp"  // bench/workloads.hpp: the workloads as oa-bench runs them

namespace oa_sim {

namespace {

using lazy_array = oa::lazy<Eigen::ArrayXd>;

/// Records the workload's calls over `inputs` arrays of a few elements.
std::vector<lazy_array> record(const std::string& workload, std::vector<Eigen::ArrayXd>& in) {
  std::vector<lazy_array> h;
  for (auto& x : in) h.push_back(oa::ref(x));
  std::vector<lazy_array> out;
  if (workload == "blackscholes") {
    out.resize(2);
    oa_workloads::blackscholes(h[0], h[1], h[2], h[3], h[4], out[0], out[1]);
  } else if (workload == "haversine") {
    out.resize(1);
    oa_workloads::haversine(h[0], h[1], out[0]);
  } else {
    throw std::invalid_argument("oa_sim::streaming_shape: workload '" + workload +
                                "' is not modelled (blackscholes, haversine, gemm)");
  }
  return out;
}

}  // namespace

stage_shape streaming_shape(const std::string& workload) {
  const std::size_t inputs = workload == "blackscholes" ? 5 : 2;
  std::vector<Eigen::ArrayXd> in(inputs, Eigen::ArrayXd::Constant(64, 0.5));
  auto& graph = *oa::detail::current_graph();
  if (!graph.empty()) throw std::logic_error("oa_sim::streaming_shape: calls pending before recording");
  std::vector<lazy_array> held = record(workload, in);  // the outputs are held: written back
  std::vector<oa::detail::call_node> nodes = graph.take_pending();
  const auto live = oa::detail::live_calls(nodes);
  const auto stages = oa::detail::form_stages(nodes, live);
  if (stages.size() != 1) throw std::logic_error("oa_sim::streaming_shape: " + workload + " is not one stage");
  const auto needed = oa::detail::values_needed_on_host(nodes, live, stages);
  const auto L = oa::detail::layout_stage(stages[0], nodes, oa::detail::placement_mode::fused, needed);
  stage_shape s;
  for (const auto& v : L.values) {
    if (v.cls == oa::detail::value_class::input) s.in_unit_bytes.push_back(v.v->shape.unit_bytes());
    if (v.cls == oa::detail::value_class::output) s.out_unit_bytes.push_back(v.v->shape.unit_bytes());
  }
  s.buffer_unit_bytes = L.buffer_unit_bytes;
  return s;
}

double kernel_seconds_per_unit(const profile& p, const std::string& workload) {
  return p[workload + "_kernel_ns_per_element"] * 1e-9;
}

oa::device_rates planner_rates(const profile& p, bool pageable) {
  oa::device_rates r;
  r.h2d = p["h2d_pinned_gbps"] * gb;
  r.d2h = p["d2h_pinned_gbps"] * gb;
  r.both_ways = p["both_ways_pinned_gbps"] * gb;
  r.op_latency = p["op_latency_us"] * 1e-6;
  // Fill (or drain) threads each way, within half the host's copy bandwidth.
  if (pageable)
    r.staging = std::min(p["new_host_threads"] * p["new_memcpy_gbps_per_thread"], p["host_memcpy_cap_gbps"] / 2) * gb;
  return r;
}

namespace {

/// As stage_plan.cpp's costs_of for the fused stage of `shape`, with the
/// kernel's rate taken from the profile's time per element.
oa::detail::chunk_costs costs_of(const profile& p, const std::string& workload, const stage_shape& shape,
                                 const oa::device_rates& rates) {
  oa::detail::chunk_costs c;
  c.rates = rates;
  for (std::size_t b : shape.in_unit_bytes) c.in_bytes_per_unit += b, ++c.copies_in;
  for (std::size_t b : shape.out_unit_bytes) c.out_bytes_per_unit += b, ++c.copies_out;
  if (rates.staging > 0) c.staged_in_per_unit = c.in_bytes_per_unit, c.staged_out_per_unit = c.out_bytes_per_unit;
  c.kernel_bytes_per_unit = c.in_bytes_per_unit + c.out_bytes_per_unit;
  c.rates.kernel_bytes = static_cast<double>(c.kernel_bytes_per_unit) / kernel_seconds_per_unit(p, workload);
  return c;
}

}  // namespace

streaming_case plan_streaming(const profile& p, const std::string& workload, std::size_t elements,
                              std::size_t budget, int streams, bool sequential, std::size_t chunk_bytes,
                              const oa::device_rates* rates) {
  const stage_shape shape = streaming_shape(workload);
  oa::detail::slot_memory slot{shape.buffer_unit_bytes, 0, 1, {}};
  // As stage_plan.cpp: no --streams is the device's preferred count, planned for even when sequential.
  const int want = streams > 0 ? streams : cuda_preferred_streams;
  const std::optional<oa::detail::chunk_costs> costs =
      rates ? std::optional(costs_of(p, workload, shape, *rates)) : std::nullopt;
  const oa::detail::chunk_plan plan = oa::detail::plan_chunks(elements, slot, budget, want, chunk_bytes,
                                                              "oa-sim " + workload, costs ? &*costs : nullptr);
  streaming_case c;
  c.workload = workload;
  c.units = elements;
  c.chunk_units = even_chunks(elements, plan.chunks);
  c.streams = sequential ? 1 : std::max(plan.streams, 1);
  c.in_unit_bytes = shape.in_unit_bytes;
  c.out_unit_bytes = shape.out_unit_bytes;
  c.kernel_seconds_per_unit = kernel_seconds_per_unit(p, workload);
  return c;
}

gemm_case plan_gemm(std::size_t n, std::size_t elem_bytes, std::size_t budget, bool sequential,
                    std::size_t chunk_bytes, const oa::device_rates& rates, bool staged,
                    std::shared_ptr<const oa::detail::product_curve> shapes) {
  oa::detail::tiling_problem prob{n, n, n, elem_bytes, false, budget, 1};
  if (chunk_bytes) prob.budget = std::min(prob.budget, chunk_bytes);
  prob.rates = rates;
  prob.staged = staged;
  prob.shapes = std::move(shapes);
  gemm_case c;
  c.n = n;
  c.elem_bytes = elem_bytes;
  c.plan = oa::detail::plan_tiles(prob);
  c.sequential = sequential;
  return c;
}

streaming_case recorded_streaming(const profile& p, const nlohmann::json& r) {
  streaming_case c;
  c.workload = r.at("workload").get<std::string>();
  c.units = r.at("elements").get<std::size_t>();
  c.chunk_units = even_chunks(c.units, std::max<std::size_t>(r.at("chunks").get<std::size_t>(), 1));
  c.streams = r.at("mode") == "sequential" ? 1 : std::max(r.at("streams").get<int>(), 1);
  // The arrays' element sizes from the planner's layout; their count from the record's bytes.
  const stage_shape shape = streaming_shape(c.workload);
  c.in_unit_bytes = shape.in_unit_bytes;
  c.out_unit_bytes = shape.out_unit_bytes;
  if (c.in_bytes() != r.at("h2d_bytes").get<std::size_t>() || c.out_bytes() != r.at("d2h_bytes").get<std::size_t>())
    throw std::runtime_error("oa_sim::recorded_streaming: " + c.workload + " at " + std::to_string(c.units) +
                             " elements moved other bytes than the planner's layout says");
  c.kernel_seconds_per_unit = kernel_seconds_per_unit(p, c.workload);
  return c;
}

gemm_case recorded_gemm(const nlohmann::json& r) {
  const std::string tiling = r.at("tiling").get<std::string>();
  std::smatch m;
  if (!std::regex_search(tiling, m, std::regex(R"(^C tiles (\d+)x(\d+) \((\d+)x(\d+)\), k steps of (\d+) \((\d+)\))")))
    throw std::runtime_error("oa_sim::recorded_gemm: tiling '" + tiling +
                             "' names no 'C tiles MxN (..), k steps of K (..)'");
  gemm_case c;
  c.n = r.at("n").get<std::size_t>();
  c.elem_bytes = r.value("type", std::string("double")) == "float" ? 4 : 8;
  c.sequential = r.at("mode") == "sequential";
  oa::detail::tile_plan& pl = c.plan;
  pl.m = pl.n = pl.k = c.n;
  pl.mt = std::stoul(m[1]), pl.nt = std::stoul(m[2]), pl.kt = std::stoul(m[5]);
  const std::size_t tiles_m = std::stoul(m[3]), tiles_n = std::stoul(m[4]), steps_k = std::stoul(m[6]);
  const auto has = [&](const char* what) { return tiling.find(what) != std::string::npos; };
  pl.hold = has("A row panels held")     ? oa::detail::held_panel::a_rows
            : has("B column panels held") ? oa::detail::held_panel::b_cols
                                          : oa::detail::held_panel::none;
  pl.c_buffers = has("C resident") ? 0 : has("2 C tiles in flight") ? 2 : 1;
  if (std::regex_search(tiling, m, std::regex(R"(loads (\d+) steps ahead)"))) pl.lookahead = std::stoi(m[1]);
  pl.c_blocks = std::regex_search(tiling, m, std::regex(R"(C written back in (\d+) blocks)")) ? std::stoi(m[1]) : 1;
  if (pl.mt == 0 || pl.nt == 0 || pl.kt == 0 || pl.mt > c.n || pl.nt > c.n || pl.kt > c.n ||
      pl.tiles_m() != tiles_m || pl.tiles_n() != tiles_n || pl.steps_k() != steps_k)
    throw std::runtime_error("oa_sim::recorded_gemm: tiling '" + tiling + "' does not fit n=" + std::to_string(c.n));
  oa::detail::tiling_problem prob{c.n, c.n, c.n, c.elem_bytes, false, r.at("device_memory_budget").get<std::size_t>(), 1};
  if (oa::detail::tile_plan_bytes(prob, pl.mt, pl.nt, pl.kt, pl.hold, pl.c_buffers, pl.lookahead) > prob.budget)
    throw std::runtime_error("oa_sim::recorded_gemm: tiling '" + tiling + "' does not fit the record's budget of " +
                             std::to_string(prob.budget) + " bytes");
  pl.bytes_moved = oa::detail::tile_plan_traffic(prob, pl.mt, pl.nt, pl.hold);
  return c;
}

}  // namespace oa_sim
