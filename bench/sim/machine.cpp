#include "sim/machine.hpp"

#include <algorithm>

namespace oa_sim {

machine::machine(const profile& p) {
  const int link = g.add_group({"link both ways", p["both_ways_pinned_gbps"] * gb});
  // Host memory in bytes read plus written: the probe's ceiling of memcpy
  // (bytes copied by every thread at once) moves each byte twice. A copy
  // weighs 2, faulting a page in 1 (it is zeroed), a DMA
  // dma_host_memory_weight: the GPU reads or writes the DRAM without the
  // cores, whose load and store rates set that ceiling, so its bytes weigh
  // less against it (fitted on the H100 runs' pageable records).
  const int memory = g.add_group({"host memory traffic", 2 * p["host_memcpy_cap_gbps"] * gb});
  const double dma = p["dma_host_memory_weight"];
  h2d = g.add_resource({"h2d engine", p["h2d_pinned_gbps"] * gb, 1, link, {{memory, dma}}});
  d2h = g.add_resource({"d2h engine", p["d2h_pinned_gbps"] * gb, 1, link, {{memory, dma}}});
  gpu = g.add_resource({"gpu compute", 0, 1, -1});
  host = g.add_resource({"issuing thread", 0, 1, -1});
  callback = g.add_resource({"cuda callback thread", 0, 1, -1});
  const int threads = std::max(1, static_cast<int>(p["new_host_threads"]));
  fill = g.add_resource({"fill threads", p["new_memcpy_gbps_per_thread"] * gb, threads, -1, {{memory, 2}}});
  drain = g.add_resource({"drain threads", p["new_memcpy_gbps_per_thread"] * gb, threads, -1, {{memory, 2}}});
  // The engine asks for huge pages before faulting a destination in (new_prefault_huge).
  const double populate = p["new_prefault_huge"] > 0 ? p["new_prefault_huge_gbps_per_thread"] : p["new_prefault_gbps_per_thread"];
  prefault = g.add_resource({"prefault threads", populate * gb,
                             std::max(1, static_cast<int>(p["new_prefault_threads"])), -1, {{memory, 1}}});
}

int machine::setup(const profile& p) { return g.add({"stage setup", -1, 0, 0, p["stage_fixed_seconds"], {}}); }

std::vector<std::size_t> pieces(std::size_t bytes, std::size_t cap) {
  std::vector<std::size_t> out;
  for (std::size_t b = 0; b < bytes; b += cap) out.push_back(std::min(cap, bytes - b));
  return out;
}

}  // namespace oa_sim
