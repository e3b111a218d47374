// Device functions given as code (oa::kernel): stages of them are planned
// like any other (paged, pipelined, never fused with generated kernels), the
// emulated device runs their twins over its own memory, and their errors
// reach the caller. Chunks presented as a library's own type: functions that
// take and return it are annotated as they are.

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

#include "support.hpp"
#include "user_library/vecmath_oa.hpp"

namespace {

std::atomic<int> cpu_calls{0}, twin_calls{0}, gpu_calls{0};

void reset_counts() { cpu_calls = twin_calls = gpu_calls = 0; }

// y = 2 x + 1, three ways: the CPU function, its twin, a GPU version that
// no device here runs (it would enqueue a kernel on the stream).
void affine_cpu(std::span<const double> x, std::span<double> y) {
  ++cpu_calls;
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = 2 * x[i] + 1;
}
void affine_twin(std::span<const double> x, std::span<double> y) {
  ++twin_calls;
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = 2 * x[i] + 1;
}
void affine_gpu(const oa::stream_view&, std::span<const double>, std::span<double>) { ++gpu_calls; }

inline constexpr auto affine = oa::annotate<"test::affine">(
    oa::cpu(&affine_cpu),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<double>>("y")),
    oa::device_fn(oa::kernel(&affine_gpu, &affine_twin)));

// No GPU version in this build: the CPU function is the twin.
inline constexpr auto affine_host_only = oa::annotate<"test::affine_host_only">(
    oa::cpu(&affine_cpu),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<double>>("y")),
    oa::device_fn(oa::kernel(nullptr)));

// A reduction: the GPU version writes the chunk's partial at a device address.
double sum_squares_cpu(std::span<const double> x) {
  ++cpu_calls;
  double s = 0;
  for (double v : x) s += v * v;
  return s;
}
void sum_squares_gpu(const oa::stream_view&, std::span<const double>, double* partial) {
  ++gpu_calls;
  (void)partial;
}
inline constexpr auto sum_squares = oa::annotate<"test::sum_squares">(
    oa::cpu(&sum_squares_cpu), oa::args(oa::in<oa::split::contiguous>("x"), oa::ret<oa::split::sum, double>),
    oa::device_fn(oa::kernel(&sum_squares_gpu, [](std::span<const double> x) {
      ++twin_calls;
      double s = 0;
      for (double v : x) s += v * v;
      return s;
    })));

// With scratch memory for its GPU function: planned with the stage's buffers.
void affine_gpu_scratch(const oa::stream_view&, std::span<const double>, std::span<double>, std::span<std::byte>) {
  ++gpu_calls;
}
inline constexpr auto affine_scratch = oa::annotate<"test::affine_scratch">(
    oa::cpu(&affine_cpu),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<double>>("y")),
    oa::device_fn(oa::kernel(&affine_gpu_scratch).scratch(8, 4096)));

// Updates in place, and fails on a negative value.
void checked_halve(std::span<double> x) {
  for (double& v : x) {
    if (v < 0) throw std::domain_error("checked_halve: negative sample");
    v /= 2;
  }
}
inline constexpr auto halve = oa::annotate<"test::halve">(
    oa::cpu(&checked_halve), oa::args(oa::mut<oa::split::contiguous>("x")),
    oa::device_fn(oa::kernel(nullptr, &checked_halve)));

std::vector<double> ramp(std::size_t n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), -3.0);
  return v;
}

oa::config paged(bool device_functions) {
  oa::config c = oa_test::emulated_config(std::size_t{64} << 10);
  c.emulated_device_functions = device_functions;
  return c;
}

// A library type that owns its storage, and functions over it.
struct samples {
  std::vector<double> v;
};
samples twice(const samples& s) {
  samples o{s.v};
  for (double& x : o.v) x *= 2;
  return o;
}
samples drop_last(const samples& s) { return {std::vector<double>(s.v.begin(), s.v.end() - (s.v.empty() ? 0 : 1))}; }
void negate(samples& s) {
  for (double& x : s.v) {
    if (std::isnan(x)) throw std::invalid_argument("negate: NaN sample");
    x = -x;
  }
}

/// A chunk is a `samples` holding a copy of its values; stored back after.
struct samples_split {
  static constexpr oa::split::split_kind kind = oa::split::split_kind::partitioned;
  static constexpr const char* name = "samples";
  template <class T>
  static constexpr bool accepts = std::is_same_v<std::remove_cvref_t<T>, samples>;
  template <class T>
  static constexpr bool makeable = accepts<T>;
  template <class T>
  using element = double;
  template <class T>
  using view = samples;
  static oa::split::shape shape_of(const samples& s) { return {s.v.size(), 1, sizeof(double)}; }
  static oa::region host_region(const samples& s, oa::split::range r) {
    auto* p = reinterpret_cast<std::byte*>(const_cast<double*>(s.v.data() + r.begin));
    return {p, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  static oa::region packed_region(std::byte* b, const oa::split::shape&, oa::split::range r) {
    return {b, r.size() * sizeof(double), 1, r.size() * sizeof(double)};
  }
  template <class T>
  static samples make_view(const oa::region& g, const oa::split::shape&, oa::split::range r) {
    const auto* p = reinterpret_cast<const double*>(g.data);
    return {std::vector<double>(p, p + r.size())};
  }
  static void store(const samples& s, const oa::region& g, const oa::split::shape&, oa::split::range) {
    std::memcpy(g.data, s.v.data(), s.v.size() * sizeof(double));
  }
  template <class T>
  static T make(const oa::split::shape& s) {
    return samples{std::vector<double>(s.units)};
  }
};

// kernel(nullptr): on the emulated device the CPU function runs over device
// memory, so chunks are copied from and stored to device buffers.
inline constexpr auto twice_oa = oa::annotate<"lib::twice">(
    oa::cpu(&twice), oa::args(oa::in<samples_split>("s"), oa::ret<samples_split, samples>),
    oa::device_fn(oa::kernel(nullptr)));
// An element-wise device function writing the returned value.
samples scaled(const samples& s, double k) {
  samples o{s.v};
  for (double& x : o.v) x *= k;
  return o;
}
inline constexpr auto scaled_oa = oa::annotate<"lib::scaled">(
    oa::cpu(&scaled), oa::args(oa::in<samples_split>("s"), oa::scalar<double>("k"), oa::ret<samples_split, samples>),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));
inline constexpr auto drop_last_oa = oa::annotate<"lib::drop_last">(
    oa::cpu(&drop_last), oa::args(oa::in<samples_split>("s"), oa::ret<samples_split, samples>));
inline constexpr auto negate_oa = oa::annotate<"lib::negate">(
    oa::cpu(&negate), oa::args(oa::mut<samples_split>("s")), oa::device_fn(oa::kernel(nullptr)));

samples ramp_samples(std::size_t n) { return {ramp(n)}; }

}  // namespace

TEST_CASE("chunks as the library's type: a function returning its chunk, and one updating a copy in place") {
  for (const oa::config& c : {oa_test::host_config(), paged(false), paged(true)}) {
    oa_test::config_scope cs(c);
    const samples x = ramp_samples(40001);
    const samples y = twice_oa(x).get();
    REQUIRE(y.v.size() == x.v.size());
    for (std::size_t i = 0; i < x.v.size(); ++i) REQUIRE(y.v[i] == 2 * x.v[i]);
    samples z = x;
    negate_oa(z);
    oa::evaluate();
    for (std::size_t i = 0; i < x.v.size(); ++i) REQUIRE(z.v[i] == -x.v[i]);
    if (c.device == "emulated")
      for (const auto& rep : oa::reports()) {
        CHECK(rep.device == "emulated");
        CHECK(rep.chunks > 1);
        CHECK(rep.peak_device_bytes <= c.device_memory);
      }
  }
}

TEST_CASE("chunks as the library's type: element-wise device functions write the returned value, fused too") {
  for (bool fused : {false, true}) {
    oa::config c = paged(true);
    c.emulated_fused = fused;
    oa_test::config_scope cs(c);
    const samples x = ramp_samples(30000);
    // x * 2 through the element-wise twin, or a generated kernel's description.
    const samples y = scaled_oa(x, 2.0).get();
    for (std::size_t i = 0; i < x.v.size(); ++i) REQUIRE(y.v[i] == 2 * x.v[i]);
  }
}

// Updates in place, but changes the chunk's length: an error, not an overflow.
void grow(samples& s) { s.v.push_back(0.0); }
inline constexpr auto grow_oa = oa::annotate<"lib::grow">(oa::cpu(&grow), oa::args(oa::mut<samples_split>("s")));

TEST_CASE("chunks as the library's type: an update that changes the chunk's length is an error; the data is as it was") {
  oa_test::config_scope cs(paged(false));
  samples x = ramp_samples(30000);
  const samples before = x;
  grow_oa(x);
  CHECK_THROWS_WITH(oa::evaluate(), doctest::Contains("must keep its length"));
  CHECK(x.v == before.v);
}

TEST_CASE("lazy::take moves a result out only when nothing else holds it") {
  oa_test::config_scope cs(paged(false));
  const samples x = ramp_samples(20000);
  {
    // Nothing else holds it: moved (no copy of its samples).
    oa::lazy<samples> y = twice_oa(x);
    const double* data = y.get().v.data();
    const samples got = std::move(y).take();
    CHECK(got.v.data() == data);
    CHECK(!y.valid());
  }
  {
    // A pending call reads it: copied, and the call still sees the samples.
    oa::lazy<samples> y = twice_oa(x);
    (void)y.get();
    oa::lazy<samples> z = twice_oa(y);
    const samples got = std::move(y).take();
    CHECK(got.v.size() == x.v.size());
    const samples& zz = z.get();
    REQUIRE(zz.v.size() == x.v.size());
    for (std::size_t i = 0; i < x.v.size(); i += 999) CHECK(zz.v[i] == 4 * x.v[i]);
  }
}

TEST_CASE("chunks as the library's type: a chunk of the wrong length, and a failed update, are errors; nothing is lost") {
  oa_test::config_scope cs(paged(false));
  const samples x = ramp_samples(30000);
  CHECK_THROWS_WITH(drop_last_oa(x).get(), doctest::Contains("lib::drop_last returned a chunk of"));
  samples z = x;
  z.v[20000] = std::nan("");
  const samples before = z;
  negate_oa(z);
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("NaN sample"), std::invalid_argument);
  for (std::size_t i = 0; i < z.v.size(); ++i) REQUIRE((z.v[i] == before.v[i] || (i == 20000 && std::isnan(z.v[i]))));
}

TEST_CASE("oa::kernel: the emulated device runs the twin over its own memory, chunk by chunk, within the budget") {
  oa_test::config_scope cs(paged(true));
  reset_counts();
  const std::vector<double> x = ramp(50001);
  const std::vector<double> y = affine(x).get();
  REQUIRE(y.size() == x.size());
  for (std::size_t i = 0; i < x.size(); i += 997) CHECK(y[i] == 2 * x[i] + 1);
  CHECK(y.back() == 2 * x.back() + 1);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "emulated");
  CHECK(reps[0].chunks > 1);
  CHECK(reps[0].peak_device_bytes <= std::size_t{64} << 10);
  CHECK(reps[0].h2d_bytes >= x.size() * sizeof(double));
  CHECK(twin_calls == static_cast<int>(reps[0].chunks));
  CHECK(cpu_calls == 0);
  CHECK(gpu_calls == 0);  // only a CUDA device calls the GPU version
}

TEST_CASE("oa::kernel: without device functions the emulated device runs the CPU function; kernel(nullptr) runs it too") {
  {
    oa_test::config_scope cs(paged(false));
    reset_counts();
    const std::vector<double> x = ramp(30000);
    CHECK(affine(x).get()[29999] == 2 * x[29999] + 1);
    CHECK(cpu_calls > 1);
    CHECK(twin_calls == 0);
  }
  oa_test::config_scope cs(paged(true));
  reset_counts();
  const std::vector<double> x = ramp(30000);
  CHECK(affine_host_only(x).get()[12345] == 2 * x[12345] + 1);
  CHECK(cpu_calls > 1);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "emulated");
}

TEST_CASE("oa::kernel: reductions merge the twins' partials in order; on the host device the CPU function runs") {
  const std::vector<double> x = ramp(40000);
  const double expect = sum_squares_cpu(x);
  for (bool host : {false, true}) {
    oa_test::config_scope cs(host ? oa_test::host_config() : paged(true));
    reset_counts();
    const double got = sum_squares(x).get();
    CHECK(std::abs(got - expect) <= 1e-12 * expect);
    CHECK((host ? cpu_calls.load() : twin_calls.load()) > 0);
    CHECK((host ? twin_calls.load() : cpu_calls.load()) == 0);
  }
}

TEST_CASE("oa::kernel: a stage of its own between element-wise stages, also where the device fuses kernels") {
  for (bool fused : {false, true}) {
    oa::config c = paged(true);
    c.emulated_fused = fused;
    oa_test::config_scope cs(c);
    const std::vector<double> a = ramp(20000), b(20000, 0.5);
    auto s = vecmath::oa::add(a, b);   // element-wise
    auto t = affine(s);                // code
    auto u = vecmath::oa::mul(t, b);   // element-wise
    const std::vector<double> r = u.get();
    for (std::size_t i = 0; i < r.size(); i += 501) CHECK(r[i] == (2 * (a[i] + 0.5) + 1) * 0.5);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 3);
    for (const auto& rep : reps) CHECK(rep.device == "emulated");
    CHECK(reps[1].calls == std::vector<std::string>{"test::affine"});
  }
}

TEST_CASE("oa::kernel: scratch memory of a GPU function is planned within the budget, per unit and fixed") {
  oa_test::config_scope cs(paged(false));
  const std::vector<double> x = ramp(50000);
  const std::vector<double> y = affine_scratch(x).get();
  CHECK(y[49999] == 2 * x[49999] + 1);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "emulated");
  // x and y, and the scratch's 8 bytes per unit.
  CHECK(reps[0].bytes_per_unit == 2 * sizeof(double) + 8);
  CHECK(reps[0].chunks > 1);
  CHECK(reps[0].peak_device_bytes <= std::size_t{64} << 10);
  // Every slot holds the scratch's fixed 4096 bytes too: the chunk is smaller than without it.
  oa::clear_reports();
  (void)affine(x).get();
  CHECK(oa::reports().at(0).chunk_units > reps[0].chunk_units);
}

TEST_CASE("oa::kernel: an error of the device function reaches the caller; the caller's data is as it was") {
  oa_test::config_scope cs(paged(true));
  std::vector<double> x(30000, 8.0);
  x[25000] = -1.0;
  const std::vector<double> before = x;
  {
    oa::scope s;
    halve(x);
    CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative sample"), std::domain_error);
  }
  CHECK(x == before);
  x[25000] = 1.0;
  halve(x);
  oa::evaluate();
  CHECK(x[0] == 4.0);
  CHECK(x[25000] == 0.5);
}
