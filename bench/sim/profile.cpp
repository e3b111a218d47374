#include "sim/profile.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace oa_sim {

const std::vector<std::string>& required_parameters() {
  static const std::vector<std::string> keys{
      "h2d_pinned_gbps", "d2h_pinned_gbps", "both_ways_pinned_gbps", "h2d_pageable_gbps", "d2h_pageable_gbps",
      "h2d_registered_gbps", "d2h_registered_gbps", "h2d_registered_2d_gbps", "d2h_registered_2d_gbps",
      "cublas_double_tflops", "cublas_float_tflops", "gemm_tile_efficiency", "gemm_small_tile_dim",
      "blackscholes_kernel_ns_per_element", "haversine_kernel_ns_per_element", "crime_index_kernel_ns_per_element",
      "op_latency_us", "host_function_resume_us", "copy_pool_threads", "host_cores", "stage_fixed_seconds",
      "stage_fixed_seconds_if_per_stage",
      "register_touched_seconds_per_gib",
      "register_untouched_seconds_per_gib", "register_fixed_seconds_per_array", "staging_fill_gbps", "untouched_memcpy_ratio", "new_ring_slots",
      "new_slot_mib", "new_host_threads", "new_memcpy_gbps_per_thread", "new_prefault_threads", "new_prefault_gbps_per_thread",
      "new_prefault_huge", "new_prefault_huge_gbps_per_thread", "new_drains_in_parallel",
      "host_memcpy_cap_gbps", "new_wait_latency_us", "device_memory_gbps", "gemm_unaligned_factor",
      "dma_host_memory_weight", "dma_segment_us"};
  return keys;
}

double profile::operator[](const std::string& key) const {
  auto it = params.find(key);
  if (it == params.end())
    throw std::invalid_argument("oa_sim::profile: '" + path + "' has no parameter '" + key + "'");
  return it->second.value;
}

void profile::set(const std::string& key, double value, const std::string& provenance, const std::string& source) {
  parameter& p = params[key];
  p.value = value;
  p.provenance = provenance;
  p.source = source;
}

profile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("oa_sim::load_profile: cannot open '" + path + "'");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw std::runtime_error("oa_sim::load_profile: '" + path + "' is not JSON: " + e.what());
  }
  profile p;
  p.path = path;
  p.name = j.value("name", path);
  if (!j.contains("parameters") || !j["parameters"].is_object())
    throw std::runtime_error("oa_sim::load_profile: '" + path + "' has no object 'parameters'");
  for (const auto& [key, v] : j["parameters"].items()) {
    if (!v.is_object() || !v.contains("value") || !v["value"].is_number())
      throw std::runtime_error("oa_sim::load_profile: '" + path + "': parameter '" + key + "' has no numeric value");
    parameter q;
    q.value = v["value"].get<double>();
    q.unit = v.value("unit", "");
    q.provenance = v.value("provenance", "");
    q.source = v.value("source", "");
    if (q.provenance != "measured" && q.provenance != "fitted" && q.provenance != "assumed")
      throw std::runtime_error("oa_sim::load_profile: '" + path + "': parameter '" + key +
                               "' has provenance '" + q.provenance + "' (measured, fitted or assumed)");
    p.params[key] = q;
  }
  for (const auto& key : required_parameters())
    if (!p.params.count(key)) throw std::runtime_error("oa_sim::load_profile: '" + path + "' lacks parameter '" + key + "'");
  return p;
}

void save_profile(const profile& p, const std::string& path) {
  nlohmann::ordered_json j;
  j["name"] = p.name;
  for (const auto& [key, q] : p.params)
    j["parameters"][key] = {{"value", q.value}, {"unit", q.unit}, {"provenance", q.provenance}, {"source", q.source}};
  std::ofstream out(path);
  if (!out) throw std::runtime_error("oa_sim::save_profile: cannot write '" + path + "'");
  out << j.dump(2) << '\n';
}

}  // namespace oa_sim
