// Must not compile: the split type has no host_region, and the first error
// names that member, the function and the argument.
#include <oa/oa.hpp>
#include <span>
#include <vector>

namespace lib {
struct samples {
  std::vector<double> v;
};
inline double total(std::span<const double> x) {
  double s = 0;
  for (double e : x) s += e;
  return s;
}
}  // namespace lib

struct samples_split {
  static constexpr oa::split::split_kind kind = oa::split::split_kind::partitioned;
  static constexpr const char* name = "samples";
  template <class T>
  static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, lib::samples>;
  template <class T>
  static constexpr bool makeable = false;
  template <class T>
  using element = double;
  template <class T>
  using view = std::span<const double>;
  static oa::split::shape shape_of(const lib::samples& s) { return {s.v.size(), 1, sizeof(double)}; }
  static oa::region packed_region(std::byte* b, const oa::split::shape&, oa::split::range r) {
    return {b, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  template <class T>
  static view<T> make_view(const oa::region& g, const oa::split::shape&, oa::split::range r) {
    return {reinterpret_cast<const double*>(g.data), r.size()};
  }
};

inline constexpr auto total = oa::annotate<"lib::total">(
    oa::cpu(&lib::total), oa::args(oa::in<samples_split, lib::samples>("x"), oa::ret<oa::split::sum, double>));

int main() {
  lib::samples s{{1.0, 2.0}};
  return static_cast<int>(total(s).get());
}
