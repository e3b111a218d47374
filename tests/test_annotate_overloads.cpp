// Annotations of a library's overloaded names: oa::cpu<R(Args...)>(&f)
// picks the overload of that signature (its default arguments restated by
// the specs), and the annotated overload runs paged through a device as any
// other. Compile errors for a missing or wrong signature: tests/compile_fail.

#include <doctest/doctest.h>

#include <oa/oa.hpp>
#include <span>
#include <vector>

#include "support.hpp"

namespace lib {  // one name, four overloads, default arguments
inline double scale(double x, double k = 2.0) { return x * k; }
inline void scale(std::span<double> x, double k = 2.0) {
  for (double& v : x) v *= k;
}
inline void scale(std::span<float> x, float k = 2.0f) {
  for (float& v : x) v *= k;
}
inline void scale(std::span<const double> x, std::span<double> out, double k = 2.0) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * k;
}
inline void negate(std::span<double> x) noexcept {
  for (double& v : x) v = -v;
}
}  // namespace lib

namespace {

using oa::split::contiguous;
using in_place = void(std::span<double>, double);
using into = void(std::span<const double>, std::span<double>, double);

// The overload of each signature, as a static_cast would pick it.
static_assert(oa::cpu<in_place>(&lib::scale).f == static_cast<in_place*>(&lib::scale));
static_assert(oa::cpu<into>(&lib::scale).f == static_cast<into*>(&lib::scale));
static_assert(std::is_same_v<decltype(oa::cpu<in_place>(&lib::scale)), oa::cpu_part<in_place*>>);
// A name with one function: deduced as before, or converted to the signature
// given (noexcept dropped).
static_assert(std::is_same_v<decltype(oa::cpu(&lib::negate)), oa::cpu_part<void (*)(std::span<double>) noexcept>>);
static_assert(oa::cpu<void(std::span<double>)>(&lib::negate).f == &lib::negate);

inline constexpr auto scale_in_place = oa::annotate<"lib::scale">(
    oa::cpu<in_place>(&lib::scale), oa::args(oa::mut<contiguous>("x"), oa::scalar<double>("k")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));
inline constexpr auto scale_into = oa::annotate<"lib::scale">(
    oa::cpu<into>(&lib::scale),
    oa::args(oa::in<contiguous>("x"), oa::out<contiguous, std::vector<double>>("out"), oa::scalar<double>("k")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));
inline constexpr auto scale_floats = oa::annotate<"lib::scale">(
    oa::cpu<void(std::span<float>, float)>(&lib::scale), oa::args(oa::mut<contiguous>("x"), oa::scalar<float>("k")));

}  // namespace

TEST_CASE("oa::cpu<R(Args...)>: each overload of one name annotated, run paged, as the library computes it") {
  const std::vector<double> x = oa_test::random_vector(100000, -1.0, 1.0, 7);
  std::vector<double> expected_into(x.size());
  lib::scale(x, expected_into, 3.0);
  std::vector<double> expected_in_place = x;
  lib::scale(expected_in_place, 3.0);
  std::vector<float> floats(x.begin(), x.end());
  std::vector<float> expected_floats = floats;
  lib::scale(expected_floats, 3.0f);

  for (const oa::config& c : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
    CAPTURE(c.device);
    oa_test::config_scope scope(c);
    CHECK(scale_into(x, 3.0).get() == expected_into);
    std::vector<double> y = x;
    scale_in_place(y, 3.0);
    std::vector<float> f = floats;
    scale_floats(f, 3.0f);
    oa::evaluate();
    CHECK(y == expected_in_place);
    CHECK(f == expected_floats);
    if (c.device == "emulated") {
      const oa::stage_report t = oa_test::run_total();
      CHECK(t.chunks > 3);  // 800 KB through 64 KiB
    }
  }
  CHECK(lib::scale(1.5) == 3.0);  // the scalar overload, untouched
}
