// Must not compile: the GPU function of oa::kernel takes the chunk's views
// without the stream it must enqueue its work on.
#include <oa/oa.hpp>
#include <span>
#include <vector>

namespace lib {
inline void scale(std::span<double> x, double k) {
  for (double& v : x) v *= k;
}
inline void scale_gpu(std::span<double>, double) {}  // should take const oa::stream_view& first
}  // namespace lib

inline constexpr auto scale = oa::annotate<"lib::scale">(
    oa::cpu(&lib::scale), oa::args(oa::mut<oa::split::contiguous>("x"), oa::scalar<double>("k")),
    oa::device_fn(oa::kernel(&lib::scale_gpu)));

int main() {
  std::vector<double> x(10);
  scale(x, 2.0);
}
