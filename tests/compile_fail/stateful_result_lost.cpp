// Must not compile: the value has unsplit state (a name) but the split type
// can only make a result without it, so the out result would lose it.
#include <oa/oa.hpp>
#include <span>
#include <string>
#include <vector>

namespace lib {
struct named {
  std::vector<double> v;
  std::string name;
};
inline void twice(std::span<const double> x, std::span<double> out) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = 2 * x[i];
}
}  // namespace lib

struct named_split {
  static constexpr oa::split::split_kind kind = oa::split::split_kind::partitioned;
  static constexpr const char* name = "named";
  template <class T>
  static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, lib::named>;
  template <class T>
  static constexpr bool makeable = accepts<T>;
  template <class T>
  using element = double;
  template <class T>
  using view = std::span<std::conditional_t<std::is_const_v<T>, const double, double>>;
  template <class T>
  using state = std::string;
  static std::string state_of(const lib::named& x) { return x.name; }
  static oa::split::shape shape_of(const lib::named& x) { return {x.v.size(), 1, sizeof(double)}; }
  static oa::region host_region(const lib::named& x, oa::split::range r) {
    auto* p = reinterpret_cast<std::byte*>(const_cast<double*>(x.v.data() + r.begin));
    return {p, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  static oa::region packed_region(std::byte* b, const oa::split::shape&, oa::split::range r) {
    return {b, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  template <class T>
  static view<T> make_view(const oa::region& g, const oa::split::shape&, oa::split::range r, const std::string&) {
    using E = typename view<T>::element_type;
    return {reinterpret_cast<E*>(g.data), r.size()};
  }
  // No prototype: a result made here has an empty name.
  template <class T>
  static T make(const oa::split::shape& s) {
    return T{std::vector<double>(s.units), {}};
  }
};

inline constexpr auto twice = oa::annotate<"lib::twice">(
    oa::cpu(&lib::twice), oa::args(oa::in<named_split>("x"), oa::out<named_split, lib::named>("out")));

int main() {
  lib::named x{{1.0, 2.0}, "x"};
  return static_cast<int>(twice(x).get().v[0]);
}
