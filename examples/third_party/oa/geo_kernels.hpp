#pragma once
// GPU versions of geo's functions, written for oa::kernel: each gets the
// stream oa gives it and the chunk's device views, and enqueues its kernel
// on that stream. Built (geo_kernels.cu) when the CUDA toolkit is found;
// geo itself is renamed geo_plain in the annotated build (see geo_oa.hpp).

#include <cstddef>

#include <oa/core/device.hpp>

namespace geo_plain {
struct Polynomial;
}

namespace geo_oa {

/// A chunk of a Series in device memory: its samples and the series' scale.
template <class E>
struct device_series {
  E* data = nullptr;
  std::size_t size = 0;
  double scale = 1.0;
};

namespace gpu {
void calibrate(const oa::stream_view& s, device_series<const double> in, const geo_plain::Polynomial& p,
               device_series<double> out);
void clamp(const oa::stream_view& s, device_series<double> x, double lo, double hi);
}  // namespace gpu

}  // namespace geo_oa
