#pragma once
// The resources of a GPU and its host, shared by both designs' op graphs.

#include <cstddef>
#include <vector>

#include "sim/engine.hpp"
#include "sim/profile.hpp"

namespace oa_sim {

constexpr double gb = 1e9;
constexpr double gib = 1073741824.0;

struct machine {
  graph g;
  int h2d = -1, d2h = -1, gpu = -1;  // copy engines (one cap both ways), the GPU's compute
  int host = -1;                     // the thread that issues work (registration runs there)
  int callback = -1;                 // CUDA's host-function thread: one at a time, every stream
  int fill = -1, drain = -1, prefault = -1;  // new design: oa's fill, drain and pre-faulting threads
  double us = 1e-6;

  explicit machine(const profile& p);
  /// The stage's fixed cost (allocation, kernel lookup, synchronisation): an op every chunk follows.
  int setup(const profile& p);
};

/// Byte counts of the pieces a copy of `bytes` is cut into for a staging buffer of `cap` bytes.
std::vector<std::size_t> pieces(std::size_t bytes, std::size_t cap);

}  // namespace oa_sim
