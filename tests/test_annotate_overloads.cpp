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

// ---- OA_ANNOTATED_NAME: a name as programs call it after annotation -------------

namespace names_plain {  // a library, as compiled under its renamed namespace
struct sample {
  double v;
};
inline int f(double, double = 2.0) { return 1; }
inline int f(std::span<double>, double = 2.0) { return 2; }
inline int f(std::vector<double>&, double = 2.0) { return 3; }
inline int f(std::span<const double>, std::span<double>, double = 2.0) { return 4; }
inline int g(const sample&) { return 5; }
inline int g(sample&) { return 6; }
}  // namespace names_plain

namespace names_calls {  // the annotated overloads, redeclared: each counts its calls
inline int redeclared = 0;
inline int f(std::span<double>, double = 2.0) { return ++redeclared, 2; }
inline int g(const names_plain::sample&) { return ++redeclared, 5; }
}  // namespace names_calls

namespace names {  // what the program calls
using namespace ::names_plain;
OA_ANNOTATED_NAME(::names_plain, ::names_calls, f)
OA_ANNOTATED_NAME(::names_plain, ::names_calls, g)
}  // namespace names

namespace scaled_calls {  // lib::scale's in-place overload through oa
inline void scale(std::span<double> x, double k = 2.0) {
  scale_in_place(x, k);
  oa::evaluate();
}
}  // namespace scaled_calls
namespace scaled {
using namespace ::lib;
OA_ANNOTATED_NAME(::lib, ::scaled_calls, scale)
}  // namespace scaled

TEST_CASE("OA_ANNOTATED_NAME: the redeclared overload exactly where the library's resolution picks it") {
  std::vector<double> v(3, 1.0), out(3);
  const std::vector<double> cv(3, 1.0);
  std::span<double> s(v);
  names::sample a{1};
  const names::sample ca{2};
  struct call {
    const char* what;
    int result;     // which overload of the library's the call resolves to
    bool redeclared;  // whether it ran the redeclared one
  };
  const auto check = [](const call& c, int result, int before) {
    CAPTURE(c.what);
    CHECK(result == c.result);
    CHECK((names_calls::redeclared > before) == c.redeclared);
  };
  int before = names_calls::redeclared;
  // One value: the library's own overload, with its default argument or not.
  check({"f(1.0)", 1, false}, names::f(1.0), before);
  check({"f(1.0, 3.0)", 1, false}, names::f(1.0, 3.0), before);
  // A span: the annotated overload, with its default argument or not.
  before = names_calls::redeclared;
  check({"f(span)", 2, true}, names::f(s), before);
  before = names_calls::redeclared;
  check({"f(span, 3.0)", 2, true}, names::f(s, 3.0), before);
  before = names_calls::redeclared;
  check({"f(span temporary)", 2, true}, names::f(std::span<double>(v)), before);
  // A vector lvalue: the library's exact match, not the annotated span.
  before = names_calls::redeclared;
  check({"f(vector&)", 3, false}, names::f(v), before);
  check({"f(const vector&, vector&)", 4, false}, names::f(cv, out), before);
  // References: a non-const lvalue binds the library's sample&, a const
  // one or a temporary the annotated const sample&.
  check({"g(sample&)", 6, false}, names::g(a), before);
  check({"g(const sample&)", 5, true}, names::g(ca), before);
  before = names_calls::redeclared;
  check({"g(sample{})", 5, true}, names::g(names::sample{3}), before);

  // Through oa: the scalar overload as the library computes it, the span
  // one recorded and run as lib::scale.
  oa_test::config_scope scope(oa_test::emulated_config(64 << 10));
  CHECK(scaled::scale(1.5) == 3.0);
  CHECK(scaled::scale(1.5, 3.0) == 4.5);
  std::vector<double> x = oa_test::random_vector(100000, -1.0, 1.0, 11);
  std::vector<double> expected = x;
  lib::scale(expected);
  scaled::scale(x);  // std::vector<double> converts to the annotated std::span<double>
  CHECK(x == expected);
  REQUIRE(oa::reports().size() == 1);
  CHECK(oa::reports()[0].calls == std::vector<std::string>{"lib::scale"});
  CHECK(oa::reports()[0].device == "emulated");
}
