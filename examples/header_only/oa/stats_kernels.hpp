#pragma once
// A GPU version of one of stats' functions, written for oa::kernel: it gets
// the stream oa gives it and the chunk's device views, and enqueues its
// kernel on that stream. stats is header-only: oa_annotate compiles this
// file's source (stats_kernels.cu, when the CUDA toolkit is found) into a
// static library of its own, with stats renamed stats_plain.

#include <span>

#include <oa/core/device.hpp>

namespace stats_oa::gpu {
void standardize(const oa::stream_view& s, std::span<double> x, double mean, double sd);
}  // namespace stats_oa::gpu
