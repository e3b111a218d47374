#pragma once
// Which GPU a rank takes when its launcher did not say (no
// CUDA_VISIBLE_DEVICES): its rank among the ranks on its node, modulo the
// node's GPUs, counted from the driver's entries without starting CUDA.

#include <optional>
#include <string>

namespace oa::dist::detail {

/// The node's GPUs: the entries of `driver_dir` (the NVIDIA driver lists
/// one per GPU in /proc/driver/nvidia/gpus); 0 where it does not exist.
int gpus_listed(const std::string& driver_dir = "/proc/driver/nvidia/gpus");

/// The GPU for the rank `local_rank` of `local_size` on its node with
/// `gpus` GPUs: none when there is one rank or no GPU.
std::optional<int> gpu_for(int local_rank, int local_size, int gpus);

}  // namespace oa::dist::detail
