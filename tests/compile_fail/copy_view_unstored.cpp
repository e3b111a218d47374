// Must not compile: a mut argument's chunk view is a copy of the chunk (the
// library's own type), and the split type cannot store it back: the update
// would be lost.
#include <oa/oa.hpp>
#include <vector>

namespace lib {
struct samples {
  std::vector<double> v;
};
inline void negate(samples& s) {
  for (double& x : s.v) x = -x;
}
}  // namespace lib

struct samples_split {
  static constexpr oa::split::split_kind kind = oa::split::split_kind::partitioned;
  static constexpr const char* name = "samples";
  template <class T>
  static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, lib::samples>;
  template <class T>
  static constexpr bool makeable = accepts<T>;
  template <class T>
  using element = double;
  template <class T>
  using view = lib::samples;
  static oa::split::shape shape_of(const lib::samples& s) { return {s.v.size(), 1, sizeof(double)}; }
  static oa::region host_region(const lib::samples& s, oa::split::range r) {
    auto* p = reinterpret_cast<std::byte*>(const_cast<double*>(s.v.data() + r.begin));
    return {p, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  static oa::region packed_region(std::byte* b, const oa::split::shape&, oa::split::range r) {
    return {b, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  template <class T>
  static lib::samples make_view(const oa::region& g, const oa::split::shape&, oa::split::range r) {
    const auto* p = reinterpret_cast<const double*>(g.data);
    return {std::vector<double>(p, p + r.size())};
  }
  // No store: a chunk's copy cannot go back.
};

inline constexpr auto negate = oa::annotate<"lib::negate">(
    oa::cpu(&lib::negate), oa::args(oa::mut<samples_split, lib::samples>("s")));

int main() {}
