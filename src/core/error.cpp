#include "oa/core/error.hpp"

#include <cstring>

#include "oa/core/device.hpp"

namespace oa {

namespace detail {
void throw_invalid_argument(const char* function, const char* argument, const std::string& what) {
  throw invalid_argument(function, argument, what);
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace detail

void copy_region(const region& dst, const region& src) noexcept {
  if (src.bytes() == 0) return;  // empty chunks may have no storage behind them
  if (dst.contiguous() && src.contiguous()) {
    std::memcpy(dst.data, src.data, src.bytes());
    return;
  }
  for (std::size_t r = 0; r < src.rows; ++r)
    std::memcpy(dst.data + r * dst.pitch, src.data + r * src.pitch, src.width);
}

const char* to_string(device_kind k) noexcept {
  switch (k) {
    case device_kind::host: return "host";
    case device_kind::emulated: return "emulated";
    case device_kind::cuda: return "cuda";
  }
  return "?";
}

const char* to_string(phase p) noexcept {
  switch (p) {
    case phase::h2d: return "h2d";
    case phase::compute: return "compute";
    case phase::d2h: return "d2h";
    case phase::fill: return "fill";
    case phase::drain: return "drain";
    case phase::prefault: return "prefault";
    case phase::pin: return "pin";
  }
  return "?";
}

}  // namespace oa
