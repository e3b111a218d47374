// oa::overwrite: the caller's object written whole in place. On a device
// with its own memory its old values are not copied in (only what the call
// reads crosses the link), results are those of a mut argument, and a failed
// stage leaves the caller's object as it was.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <new>
#include <span>
#include <stdexcept>
#include <vector>

#include <oa/oa.hpp>

#include "support.hpp"

namespace {

using oa_test::config_scope;

/// out = in, out written whole: an overwrite argument (the device function
/// sees only `in`).
inline constexpr auto copy_into = oa::annotate<"copy into">(
    oa::cpu([](auto& out, const auto& in) { std::copy(in.begin(), in.end(), out.begin()); }),
    oa::args(oa::overwrite<oa::split::contiguous>("out"), oa::in<oa::split::contiguous>("in")),
    oa::device_fn(oa::elementwise(oa::ops::identity{})));
/// The same with a mut argument: its old values are an operand, then replaced.
inline constexpr auto copy_mut = oa::annotate<"copy (mut)">(
    oa::cpu([](auto& out, const auto& in) { std::copy(in.begin(), in.end(), out.begin()); }),
    oa::args(oa::mut<oa::split::contiguous>("out"), oa::in<oa::split::contiguous>("in")),
    oa::device_fn(oa::elementwise(oa::ops::second{})));

/// out = -in, out written whole; and the same with `in` first.
inline constexpr auto negate_into = oa::annotate<"negate into">(
    oa::cpu([](auto& out, const auto& in) { std::transform(in.begin(), in.end(), out.begin(), std::negate<>{}); }),
    oa::args(oa::overwrite<oa::split::contiguous>("out"), oa::in<oa::split::contiguous>("in")),
    oa::device_fn(oa::elementwise(oa::ops::negate{})));
inline constexpr auto negate_into_read_first = oa::annotate<"negate into (in first)">(
    oa::cpu([](const auto& in, auto& out) { std::transform(in.begin(), in.end(), out.begin(), std::negate<>{}); }),
    oa::args(oa::in<oa::split::contiguous>("in"), oa::overwrite<oa::split::contiguous>("out")),
    oa::device_fn(oa::elementwise(oa::ops::negate{})));

std::vector<double> ramp(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5 * static_cast<double>(i) - 7;
  return v;
}

}  // namespace

TEST_CASE("overwrite: only what the call reads is copied in; results as a mut's") {
  const std::size_t n = 300000;  // 2.4 MB an array through a 1 MiB device
  const std::vector<double> in = ramp(n);
  oa::config plain = oa_test::emulated_config(std::size_t{1} << 20);
  oa::config twins = plain;
  twins.emulated_device_functions = true;
  oa::config fused = plain;
  fused.emulated_fused = true;
  for (const oa::config& c : {plain, twins, fused}) {
    config_scope scope(c);
    std::vector<double> out(n, 99.0), ref(n, 99.0);
    oa::clear_reports();
    copy_into(out, in);
    oa::evaluate();
    const oa::stage_report over = oa_test::run_total();
    oa::clear_reports();
    copy_mut(ref, in);
    oa::evaluate();
    const oa::stage_report mut = oa_test::run_total();
    CHECK(out == ref);
    CHECK(out[n - 1] == in[n - 1]);
    CHECK(over.chunks > 1);
    CHECK(over.h2d_bytes == n * sizeof(double));      // the input only
    CHECK(mut.h2d_bytes == 2 * n * sizeof(double));   // the input and the old values
    CHECK(over.d2h_bytes == n * sizeof(double));
  }
}

TEST_CASE("overwrite and in of one object: the call reads its elements as they were, on every device") {
  const std::size_t n = 300001;
  const std::vector<double> want = [&] {
    std::vector<double> w = ramp(n);
    for (double& x : w) x = -x;
    return w;
  }();
  oa::config plain = oa_test::emulated_config(std::size_t{1} << 20);
  oa::config twins = plain;
  twins.emulated_device_functions = true;
  oa::config fused = plain;
  fused.emulated_fused = true;
  for (const oa::config& c : {oa_test::host_config(), plain, twins, fused}) {
    CAPTURE(c.device);
    config_scope scope(c);
    std::vector<double> a = ramp(n), b = ramp(n);
    negate_into(a, a);  // out overwritten, in read: the same vector (the plain call's a = -a)
    negate_into_read_first(b, b);  // the arguments the other way round
    oa::evaluate();
    CHECK(a == want);
    CHECK(b == want);
  }
}

TEST_CASE("overwrite: a value small enough for a whole copy on the device is written there, not read") {
  // 240 KB arrays fit in half a 1 MiB budget: the stage makes whole copies
  // of its values (kept for later stages), the output's included.
  const std::size_t n = 30000;
  const std::vector<double> in = ramp(n);
  config_scope scope(oa_test::emulated_config(std::size_t{1} << 20));
  std::vector<double> out(n, 99.0);
  oa::clear_reports();
  copy_into(out, in);
  oa::evaluate();
  CHECK(out == in);
  CHECK(oa_test::run_total().h2d_bytes == n * sizeof(double));
  // Read again by a later stage: the kept copy holds the new values.
  std::vector<double> again(n, -1.0);
  copy_into(again, out);
  oa::evaluate();
  CHECK(again == in);
}

TEST_CASE("overwrite: after a device fault the chunk re-runs on the host; results exact") {
  const std::size_t n = 300000;
  const std::vector<double> in = ramp(n);
  for (std::uint64_t at : {1, 2, 5}) {
    CAPTURE(at);
    oa::config c = oa_test::emulated_config(std::size_t{1} << 20);
    c.fail_launch = at;
    config_scope scope(c);
    std::vector<double> out(n, 99.0);
    oa::clear_reports();
    copy_into(out, in);
    oa::evaluate();
    CHECK(oa_test::run_total().host_reruns == 1);
    CHECK(out == in);
  }
}

namespace {
/// out = 2 in, failing on a negative element: the stage's error.
inline constexpr auto twice_checked = oa::annotate<"twice into (checked)">(
    oa::cpu([](auto& out, const auto& in) {
      for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] < -1e9) throw std::range_error("twice into: a negative element");
        out[i] = 2 * in[i];
      }
    }),
    oa::args(oa::overwrite<oa::split::contiguous>("out"), oa::in<oa::split::contiguous>("in")));
}  // namespace

TEST_CASE("overwrite: a failed stage leaves the caller's object as it was") {
  const std::size_t n = 300000;
  std::vector<double> in = ramp(n);
  in[n - 10] = -2e9;  // the last chunk fails, after the others wrote theirs
  for (const oa::config& c : {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 20)}) {
    CAPTURE(c.device);
    config_scope scope(c);
    std::vector<double> out(n, 99.0);
    twice_checked(out, in);
    CHECK_THROWS_AS(oa::evaluate(), std::range_error);
    CHECK(std::all_of(out.begin(), out.end(), [](double x) { return x == 99.0; }));
  }
}

namespace {
inline constexpr auto scale2 = oa::annotate<"scale by 2">(
    oa::cpu([](auto& x) {
      for (auto& e : x) e *= 2;
    }),
    oa::args(oa::mut<oa::split::contiguous>("x")), oa::device_fn(oa::elementwise([](auto x) { return x * 2.0; })));
inline constexpr auto twice = oa::annotate<"twice">(
    oa::cpu([](const auto& in, auto& out) {
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = 2 * in[i];
    }),
    oa::args(oa::in<oa::split::contiguous>("in"), oa::out<oa::split::contiguous, std::vector<double>>("out")),
    oa::device_fn(oa::elementwise([](auto x) { return x * 2.0; })));
}  // namespace

TEST_CASE("a temporary std::span is the storage it views: read and updated in program order") {
  static_assert(oa::borrowed_view<std::span<double>> && oa::borrowed_view<std::span<const double>> &&
                !oa::borrowed_view<std::vector<double>>);
  const std::size_t n = 300000;
  const std::vector<double> r = ramp(n);
  oa::config fused = oa_test::emulated_config(std::size_t{1} << 20);
  fused.emulated_fused = true;
  for (const oa::config& c : {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 20), fused}) {
    CAPTURE(c.device);
    CAPTURE(c.emulated_fused);
    config_scope scope(c);
    std::vector<double> a = r, b(n, 99.0);
    auto before = twice(a);            // reads a as it was
    scale2(std::span<double>(a));      // a *= 2, through a view that is gone after this line
    auto after = twice(a);             // reads a updated
    copy_into(std::span<double>(b), a);  // b = a, through another
    scale2(std::span<double>(a).subspan(0, n / 2));  // a's first half again
    auto read = twice(std::span<const double>(a));   // a read through a view, after both
    scale2(a);
    auto last = twice(std::span<const double>(a).subspan(n / 2));
    oa::evaluate();
    REQUIRE(last.get().size() == n - n / 2);
    // Reads through views of one vector need no order among them: one evaluation.
    oa::clear_reports();
    auto whole = twice(std::span<const double>(a));
    auto half = twice(std::span<const double>(a).subspan(0, n / 2));
    oa::evaluate();
    const auto reads = oa::reports();
    REQUIRE(reads.size() == 2);
    CHECK(reads[0].evaluation == reads[1].evaluation);
    CHECK(half.get()[n / 2 - 1] == whole.get()[n / 2 - 1]);
    for (std::size_t i = 0; i < n; i += 997) {
      CAPTURE(i);
      const double k = i < n / 2 ? 4 : 2;
      REQUIRE(before.get()[i] == 2 * r[i]);
      REQUIRE(after.get()[i] == 4 * r[i]);
      REQUIRE(b[i] == 2 * r[i]);
      REQUIRE(read.get()[i] == 2 * k * r[i]);
      REQUIRE(a[i] == 2 * k * r[i]);
      if (i >= n / 2) REQUIRE(last.get()[i - n / 2] == 4 * k * r[i]);
    }
  }
}

namespace {
/// out += in, the written argument second.
inline constexpr auto add_into = oa::annotate<"add into">(
    oa::cpu([](const auto& in, auto& out) {
      for (std::size_t i = 0; i < in.size(); ++i) out[i] += in[i];
    }),
    oa::args(oa::in<oa::split::contiguous>("in"), oa::mut<oa::split::contiguous>("out")),
    oa::device_fn(oa::elementwise(oa::ops::add{})));
}  // namespace

TEST_CASE("a call that writes elements another of its arguments covers in part is refused, the data untouched") {
  const std::size_t n = 4000;
  const std::vector<double> r = ramp(n);
  for (const oa::config& c : {oa_test::host_config(), oa_test::emulated_config(std::size_t{64} << 10)}) {
    CAPTURE(c.device);
    config_scope scope(c);
    std::vector<double> a = r;
    const std::span<double> all(a);
    CHECK_THROWS_WITH_AS(copy_into(all.subspan(0, n / 2), std::span<const double>(all.subspan(n / 4, n / 2))),
                         "oa: copy into: argument 2 (in): its elements overlap those of argument 1 (out) in part, and "
                         "the call writes one of them: the chunks would read elements already written (pass ranges "
                         "that do not overlap, or the same range)",
                         oa::invalid_argument);
    CHECK_THROWS_AS(copy_mut(all.subspan(n / 4, n / 2), std::span<const double>(all.subspan(0, n / 2))),
                    oa::invalid_argument);
    oa::evaluate();
    CHECK(a == r);
    // Refused with the written argument second, from a span that is then
    // gone: the next call binding its address is refused for its own reason.
    for (const std::size_t len : {n / 2, n / 3}) {
      std::span<double> out = all.subspan(0, len);
      CHECK_THROWS_WITH_AS(add_into(std::span<const double>(all.subspan(len / 2, len)), out),
                           doctest::Contains("overlap those of argument 1 (in) in part"), oa::invalid_argument);
    }
    // The same range, and ranges side by side, are taken.
    copy_mut(a, a);
    copy_into(all.subspan(0, n / 2), std::span<const double>(all.subspan(n / 2)));
    oa::evaluate();
    for (std::size_t i = 0; i < n; i += 7) CHECK(a[i] == r[i < n / 2 ? i + n / 2 : i]);
  }
}

TEST_CASE("a binding a refused call leaves answers for no other object: one gone is not read, one at its address is bound afresh") {
  const std::size_t n = 3000;
  const std::vector<double> r = ramp(n);
  for (const oa::config& c : {oa_test::host_config(), oa_test::emulated_config(std::size_t{64} << 10)}) {
    CAPTURE(c.device);
    config_scope scope(c);
    std::vector<double> a = r;
    {
      const std::span<const double> gone(a.data(), n / 2);
      std::vector<double> shorter(n / 2 - 1, 1.0);
      CHECK_THROWS_AS(add_into(gone, shorter), oa::invalid_argument);  // both bound, then refused
    }
    // Writes a's elements, which the bindings of `gone` and `shorter` cover:
    // the check of this binding against them must not read either object
    // (AddressSanitizer: stack-use-after-scope, heap-use-after-free).
    scale2(a);
    // Another span in the first one's place, of another length.
    alignas(std::span<const double>) std::byte slot[sizeof(std::span<const double>)];
    auto* s = new (slot) std::span<const double>(a.data(), n / 3);
    std::vector<double> shorter(n / 3 + 1, 1.0);
    CHECK_THROWS_AS(add_into(*s, shorter), oa::invalid_argument);
    s = new (slot) std::span<const double>(a.data(), n);
    auto doubled = twice(*s);
    oa::evaluate();
    REQUIRE(doubled.get().size() == n);
    for (std::size_t i = 0; i < n; i += 7) {
      CAPTURE(i);
      REQUIRE(a[i] == 2 * r[i]);
      REQUIRE(doubled.get()[i] == 4 * r[i]);
    }
  }
}
