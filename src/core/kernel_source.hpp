#pragma once
// CUDA C++ source for one fused kernel per stage: every element-wise call of
// the stage in one grid-stride loop, temporaries in registers, inputs loaded
// from and outputs stored to the chunk's device buffers, reductions combined
// per thread and per block (CUB) into one partial per block.
//
// Generating the source needs no GPU; compiling it needs NVRTC; running it
// needs the CUDA device.

#include <functional>
#include <string>
#include <vector>

#include "core/planner.hpp"

namespace oa::detail {

/// One kernel parameter, in order.
struct kernel_param {
  enum class kind : std::uint8_t {
    elements,  // unsigned long long: elements in this chunk
    buffer,    // void*: the slot's device buffer `index`
    scalar,    // a lazy broadcast of call `call` (stage position), scalar `index`, of C++ type `type`
    partials,  // void*: block partials of reduction `index`, of C++ type `type`
  };
  kind what;
  int index = -1;
  int call = -1;
  std::string type;
};

struct kernel_source {
  std::string name;  // the kernel's extern "C" name
  std::string code;  // complete translation unit (oa::ops included)
  std::vector<kernel_param> params;
  bool uses_cub = false;
  static constexpr int block_size = 256;
};

/// Whether every call of the stage can be generated (all are element-wise).
bool fusable(const stage& s, const std::vector<call_node>& nodes);

/// The fused kernel of a stage laid out with placement_mode::fused.
kernel_source generate_kernel(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L);

/// Tests: `f` sees every kernel generated from now on (empty: none), so that
/// kernels of stages recorded and run at once can be compiled by a test.
void set_kernel_observer(std::function<void(const kernel_source&)> f);

/// The text of oa/core/ops.hpp, compiled into generated kernels.
const char* ops_header_source();

}  // namespace oa::detail
