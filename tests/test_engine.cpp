// The lazy runtime end to end: laziness, dependency inference, stages,
// placement, materialization, and host/emulated/CPU agreement on the workloads.

#include <doctest/doctest.h>

#include <thread>

#include <array>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include <oa/annotations/eigen_array.hpp>

#if defined(OA_HAS_CUDA)
#include <oa/cuda/device.hpp>
#endif

#include "bodies.hpp"
#include "support.hpp"
#include "user_library/vecmath_oa.hpp"
#include "workloads.hpp"

using Eigen::ArrayXd;
using oa_test::config_scope;

namespace {

// Row sums: a matrix split by rows and a vector split by elements, together.
inline constexpr auto row_sums = oa::annotate<"test::row_sums">(
    oa::cpu([](const auto& m, auto& out) { out = m.rowwise().sum().array(); }),
    oa::args(oa::in<oa::split::rows>("m"), oa::out<oa::split::contiguous, ArrayXd>("sums")));

// Column scaling: a matrix split by columns, updated in place.
inline constexpr auto scale_cols = oa::annotate<"test::scale_cols">(
    oa::cpu([](auto& m, double k) { m *= k; }),
    oa::args(oa::mut<oa::split::cols>("m"), oa::scalar<double>("k")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));

// Several results: each spec's lazy must be its own.
void split_sign_cpu(std::span<const double> x, std::span<double> pos, std::span<double> neg) {
  for (std::size_t i = 0; i < x.size(); ++i) pos[i] = x[i] > 0 ? x[i] : 0, neg[i] = x[i] < 0 ? x[i] : 0;
}
inline constexpr auto split_sign = oa::annotate<"test::split_sign">(
    oa::cpu(&split_sign_cpu),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<double>>("pos"),
             oa::out<oa::split::contiguous, std::vector<double>>("neg")));
double doubled_sum_cpu(std::span<const double> x, std::span<std::int64_t> rounded, std::span<double> twice) {
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) rounded[i] = std::llround(x[i] * 100), twice[i] = 2 * x[i], s += x[i];
  return s;
}
inline constexpr auto doubled_sum = oa::annotate<"test::doubled_sum">(
    oa::cpu(&doubled_sum_cpu),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::out<oa::split::contiguous, std::vector<std::int64_t>>("rounded"),
             oa::out<oa::split::contiguous, std::vector<double>>("twice"), oa::ret<oa::split::sum, double>));

// A library's maximum of magnitudes, 0 for no input (not the split type's identity, -inf).
double max_abs_cpu(std::span<const double> x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}
inline constexpr auto max_abs = oa::annotate<"test::max_abs">(
    oa::cpu(&max_abs_cpu), oa::args(oa::in<oa::split::contiguous>("x"), oa::ret<oa::split::max, double>),
    oa::device_fn(oa::elementwise(oa::ops::abs{})));

std::vector<oa::config> devices() {
  return {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 20)};
}

/// The emulated device taking each stage as one generated kernel, as the CUDA
/// device does (its description runs on the host).
oa::config emulated_fused(std::size_t budget) {
  oa::config c = oa_test::emulated_config(budget);
  c.emulated_fused = true;
  return c;
}

}  // namespace

TEST_CASE("several results: each out and ret spec gets its own value, in spec order") {
  const std::vector<double> x = oa_test::random_vector(100003, -1.0, 1.0, 11);
  std::vector<double> pos(x.size()), neg(x.size()), twice(x.size());
  std::vector<std::int64_t> rounded(x.size());
  split_sign_cpu(x, pos, neg);
  const double sum = doubled_sum_cpu(x, rounded, twice);
  for (const oa::config& c : {oa_test::host_config(), oa_test::emulated_config(std::size_t{64} << 10)}) {
    CAPTURE(c.device);
    config_scope scope(c);
    auto [p, n] = split_sign(x);
    static_assert(std::is_same_v<decltype(p), oa::lazy<std::vector<double>>>);
    auto [r, t, s] = doubled_sum(x);
    static_assert(std::is_same_v<decltype(r), oa::lazy<std::vector<std::int64_t>>>);
    static_assert(std::is_same_v<decltype(s), oa::lazy<double>>);
    CHECK(p.get() == pos);
    CHECK(n.get() == neg);
    CHECK(r.get() == rounded);
    CHECK(t.get() == twice);
    CHECK(s.get() == doctest::Approx(sum).epsilon(1e-12));
  }
}

TEST_CASE("an empty input: the library's functions run once on empty views, a reduction is theirs") {
  oa::config forced = oa_test::emulated_config(std::size_t{64} << 10);
  forced.host_threshold = 0;
  oa::config fused = emulated_fused(std::size_t{64} << 10);
  fused.host_threshold = 0;
  for (const oa::config& c : {oa_test::host_config(), forced, fused}) {
    CAPTURE(c.device);
    CAPTURE(c.emulated_fused);
    config_scope scope(c);
    oa::clear_reports();
    const std::vector<double> none;
    CHECK(max_abs(none).get() == 0.0);  // -inf, the identity of max, were no function called
    auto [p, n] = split_sign(none);
    auto [r, t, s] = doubled_sum(none);
    CHECK(p.get().empty());
    CHECK(n.get().empty());
    CHECK(r.get().empty());
    CHECK(t.get().empty());
    CHECK(s.get() == 0.0);
    for (const oa::stage_report& rep : oa::reports()) {
      CHECK(rep.device == "host");
      if (c.device != "host") CHECK(rep.placement_reason.find("empty stage") != std::string::npos);
      CHECK(rep.h2d_bytes + rep.d2h_bytes == 0);
    }
    // Non-empty again on the same runtime: placed and paged as before.
    const std::vector<double> x = oa_test::random_vector(20000, -2.0, 1.0, 5);
    CHECK(max_abs(x).get() == max_abs_cpu(x));
  }
}

TEST_CASE("nothing runs until a value is asked for") {
  config_scope cs(oa_test::host_config());
  std::vector<double> a(1000, 1.0), b(1000, 2.0);
  auto c = vecmath::oa::add(a, b);
  CHECK_FALSE(c.ready());
  CHECK(oa::reports().empty());
  CHECK(c.get()[0] == 3.0);
  CHECK(c.ready());
  CHECK(oa::reports().size() == 1);
}

TEST_CASE("oa::scope and oa::evaluate run what is pending") {
  config_scope cs(oa_test::host_config());
  std::vector<double> a(100, 2.0);
  {
    oa::scope s;
    vecmath::oa::scale(a, 3.0);
    CHECK(a[0] == 2.0);
  }
  CHECK(a[0] == 6.0);
  vecmath::oa::scale(a, 0.5);
  oa::evaluate();
  CHECK(a[0] == 3.0);
}

TEST_CASE("dependencies follow what each call reads and writes") {
  // On the fused path the updated x of the middle calls is a temporary of
  // one generated kernel, between a buffer it is read from and one it is
  // written to.
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 20),
                          emulated_fused(std::size_t{1} << 20), emulated_fused(64 << 10)}) {
    CAPTURE(cfg.device);
    CAPTURE(cfg.emulated_fused);
    config_scope cs(cfg);
    const std::size_t n = 50000;
    std::vector<double> a = oa_test::random_vector(n, -1, 1, 1), b = oa_test::random_vector(n, -1, 1, 2);
    const std::vector<double> a0 = a;
    auto before = vecmath::oa::add(a, b);  // reads a before it is scaled
    vecmath::oa::scale(a, 2.0);            // writes a in place
    auto after = vecmath::oa::mul(a, b);   // reads the scaled a
    vecmath::oa::scale(a, 0.25);           // and a second version
    auto dot = vecmath::oa::dot(a, b);
    const auto& x = before.get();
    const auto& y = after.get();
    double ref_dot = 0;
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(x[i] == a0[i] + b[i]);
      REQUIRE(y[i] == (a0[i] * 2.0) * b[i]);
      REQUIRE(a[i] == a0[i] * 2.0 * 0.25);
      ref_dot += a[i] * b[i];
    }
    CHECK(dot.get() == doctest::Approx(ref_dot).epsilon(1e-12));
  }
}

TEST_CASE("calls over different lengths form separate stages, in program order") {
  config_scope cs(oa_test::emulated_config(1 << 20));
  std::vector<double> a(3000, 1.0), b(3000, 2.0), c(700, 5.0);
  auto ab = vecmath::oa::add(a, b);
  auto cc = vecmath::oa::mul(c, c);
  auto abb = vecmath::oa::mul(ab, b);
  CHECK(abb.get()[2999] == 6.0);
  CHECK(cc.get()[699] == 25.0);
  const auto r = oa::reports();
  REQUIRE(r.size() == 2);
  CHECK(r[0].calls == std::vector<std::string>{"vecmath::add", "vecmath::mul"});
  CHECK(r[1].calls == std::vector<std::string>{"vecmath::mul"});
}

TEST_CASE("temporaries stay on the device; only held values come back") {
  config_scope cs(oa_test::emulated_config(1 << 20));
  const std::size_t n = 100000;
  ArrayXd x = oa_test::random_array(n, 0.5, 2.0, 3);
  oa::lazy<ArrayXd> lx = oa::ref(x);
  oa::lazy<ArrayXd> y = lx * 2.0;  // a temporary once y is reassigned
  y = exp(y);
  y = y + lx;
  oa::lazy<ArrayXd> unused = lx * 7.0;  // held: computed and copied back
  const ArrayXd& got = y.get();
  CHECK(oa_test::max_rel_error(got, ((x * 2.0).exp() + x).eval()) <= 1e-15);
  const auto t = oa_test::run_total();
  CHECK(t.h2d_bytes == n * 8);      // x, once
  CHECK(t.d2h_bytes == 2 * n * 8);  // y and unused
  CHECK(unused.get()[0] == x[0] * 7.0);
}

TEST_CASE("calls nobody needs do not run") {
  config_scope cs(oa_test::host_config());
  std::vector<double> a(1000, 1.0);
  {
    auto dropped = vecmath::oa::mul(a, a);  // handle gone before evaluation
  }
  auto kept = vecmath::oa::add(a, a);
  kept.get();
  const auto r = oa::reports();
  REQUIRE(r.size() == 1);
  CHECK(r[0].calls == std::vector<std::string>{"vecmath::add"});
}

TEST_CASE("a reduction feeding a later call is a stage boundary") {
  for (const auto& cfg : devices()) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    ArrayXd x = oa_test::random_array(20000, 1, 2, 4);
    auto lx = oa::ref(x);
    oa::lazy<double> total = oa::sum(lx);
    auto normalized = oa::eigen::detail::div_as<double>(lx, total);  // x / sum(x), sum still pending
    CHECK(oa_test::max_rel_error(normalized.get(), (x / x.sum()).eval()) <= 1e-12);
    CHECK(oa::reports().size() == 2);
  }
}

TEST_CASE("a call without a device function runs on the host; small stages too") {
  config_scope cs(oa_test::emulated_config(1 << 20));
  std::vector<double> a(50000, 4.0);
  auto r = vecmath::oa::checked_sqrt(a);
  CHECK(r.get()[0] == 2.0);
  auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "host");
  CHECK(reps[0].placement_reason.find("vecmath::checked_sqrt") != std::string::npos);

  oa::config c = oa_test::emulated_config(1 << 20);
  c.host_threshold = 1 << 20;
  config_scope small(c);
  std::vector<double> b(100, 1.0);
  CHECK(vecmath::oa::add(b, b).get()[99] == 2.0);
  reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "host");
  CHECK(reps[0].placement_reason.find("small") != std::string::npos);
}

TEST_CASE("matrices split by rows and by columns page through the device") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    Eigen::MatrixXd m = Eigen::MatrixXd::Random(3000, 7);
    auto sums = row_sums(m);
    CHECK(oa_test::max_rel_error(sums.get(), m.rowwise().sum().array().eval()) <= 1e-12);
    Eigen::MatrixXd w = Eigen::MatrixXd::Random(9, 4000);
    const Eigen::MatrixXd w0 = w;
    scale_cols(w, -3.0);
    oa::evaluate();
    CHECK((w - w0 * -3.0).cwiseAbs().maxCoeff() == 0.0);
    if (cfg.device == "emulated") CHECK(oa_test::run_total().chunks >= 2 * 2);
  }
}

TEST_CASE("Black-Scholes: constant inputs give the published values") {
  for (const auto& cfg : devices()) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    const ArrayXd four = ArrayXd::Constant(40000, 4.0);
    auto in = oa::ref(four);
    oa::lazy<ArrayXd> call, put;
    oa_workloads::blackscholes(in, in, in, in, in, call, put);
    CHECK((call.get() - 24.0).abs().maxCoeff() <= 1e-5);
    CHECK((put.get() - 18.0).abs().maxCoeff() <= 1e-5);
    CHECK(oa::reports().at(0).calls.size() == 32);
  }
}

TEST_CASE("Haversine and the crime index: constant inputs give the published values") {
  for (const auto& cfg : devices()) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    const std::size_t n = 30000;
    const ArrayXd p = ArrayXd::Constant(n, 0.0698132);
    auto lp = oa::ref(p);
    oa::lazy<ArrayXd> a;
    oa_workloads::haversine(lp, lp, a);
    CHECK((a.get() - 4839.95983063).abs().maxCoeff() <= 1e-6);

    const ArrayXd total = ArrayXd::Constant(n, 500000), adults = ArrayXd::Constant(n, 250000),
                  robberies = ArrayXd::Constant(n, 1000);
    auto ci = oa_workloads::crime_index(oa::ref(total), oa::ref(adults), oa::ref(robberies));
    CHECK(ci.get() == doctest::Approx(0.005 * n).epsilon(1e-12));
  }
}

TEST_CASE("differential: host and emulated devices agree with plain Eigen on random inputs") {
  for (const auto& cfg : devices()) {
    CAPTURE(cfg.device);
    oa_test::workloads_match_eigen(cfg, oa_test::host_tolerance());  // both run the CPU functions
    oa_test::library_calls(cfg, 0.0);
  }
  oa::config twins = oa_test::emulated_config(std::size_t{1} << 20);
  twins.emulated_device_functions = true;
  oa_test::workloads_match_eigen(twins, 1e-12);
}

TEST_CASE("the fused path without a GPU: the emulated device takes generated kernels and runs their description") {
  oa::config fused = oa_test::emulated_config(std::size_t{1} << 20);
  fused.emulated_fused = true;
  oa_test::workloads_match_eigen(fused, 1e-12);
  oa_test::library_calls(fused, 1e-12);
  // A kernel that faults: its chunk runs again on the host.
  oa::config faulty = fused;
  faulty.fail_launch = 3;
  oa_test::workloads_match_eigen(faulty, std::max(1e-12, oa_test::host_tolerance()));
  {
    // As on a GPU: one kernel per chunk, temporaries in registers (no device
    // buffer), reduction partials one per block, merged in order.
    oa_test::config_scope cs(fused);
    const std::size_t n = 200000;
    const Eigen::ArrayXd x = oa_test::random_array(n, 0.5, 2, 301), y = oa_test::random_array(n, 0.5, 2, 302);
    oa::lazy<Eigen::ArrayXd> r = sqrt(exp(oa::ref(x)) * oa::ref(y) + 1.0);
    oa::lazy<double> total = oa::sum(r);
    const Eigen::ArrayXd ref = (x.exp() * y + 1.0).sqrt();
    CHECK(oa_test::mixed_error(r.get(), ref) <= 1e-12);
    CHECK(std::abs(total.get() - ref.sum()) <= 1e-9 * std::abs(ref.sum()));
    const auto reps = oa::reports();
    REQUIRE(reps.size() >= 1);
    // Buffers for x and y only: r is written where x was read, and the
    // temporaries exp(x), exp(x) y and + 1 take no device memory.
    CHECK(reps.front().bytes_per_unit == 2 * sizeof(double));
    CHECK(reps.front().device == "emulated");
  }
}

TEST_CASE("host math: within a few ULP of libm, position-independent, the same bits on every device and stream count") {
  using oa::host_math::fn;
  struct fn_case {
    fn f;
    double (*ref)(double);
    double lo, hi;
  };
  const fn_case cases[] = {{fn::sin, [](double x) { return std::sin(x); }, -10, 10},
                           {fn::cos, [](double x) { return std::cos(x); }, -10, 10},
                           {fn::asin, [](double x) { return std::asin(x); }, -1, 1},
                           {fn::erf, [](double x) { return std::erf(x); }, -6, 6},
                           {fn::exp, [](double x) { return std::exp(x); }, -700, 700},
                           {fn::log2, [](double x) { return std::log2(x); }, 1e-300, 1e300}};
  const std::size_t n = 100003;
  for (const fn_case& c : cases) {
    CAPTURE(static_cast<int>(c.f));
    const std::vector<double> x = oa_test::random_vector(n, c.lo, c.hi, 61);
    std::vector<double> y(n);
    if (!oa::host_math::apply(c.f, x.data(), y.data(), n)) {
      CHECK(std::string(oa::host_math::implementation()) == "eigen");
      continue;
    }
    double worst_ulp = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double r = c.ref(x[i]);
      const double ulp = std::nextafter(std::abs(r), INFINITY) - std::abs(r);
      worst_ulp = std::max(worst_ulp, std::abs(y[i] - r) / std::max(ulp, std::numeric_limits<double>::denorm_min()));
    }
    CHECK(worst_ulp <= 2.0);
    // Any start, any length, in place: the same bits as over the whole array.
    for (const std::size_t begin : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
      for (const std::size_t len : {std::size_t{1}, std::size_t{5}, std::size_t{8}, std::size_t{13}, std::size_t{999}}) {
        std::vector<double> part(x.begin() + static_cast<std::ptrdiff_t>(begin),
                                 x.begin() + static_cast<std::ptrdiff_t>(begin + len));
        REQUIRE(oa::host_math::apply(c.f, part.data(), part.data(), len));
        for (std::size_t i = 0; i < len; ++i) REQUIRE(part[i] == y[begin + i]);
      }
    }
  }
  // The workloads: bit for bit the same on 1, 2, 4 and 8 streams of the host
  // device and on the emulated device, whatever the chunks.
  const std::size_t m = 77777;
  const ArrayXd lat = oa_test::random_array(m, -1.5, 1.5, 62), lon = oa_test::random_array(m, -1.5, 1.5, 63);
  const ArrayXd price = oa_test::random_array(m, 10, 50, 64), strike = oa_test::random_array(m, 10, 50, 65),
                t = oa_test::random_array(m, 0.1, 2, 66), rate = oa_test::random_array(m, 0.01, 0.05, 67),
                vol = oa_test::random_array(m, 0.1, 0.5, 68);
  std::vector<std::array<ArrayXd, 3>> runs;
  std::vector<oa::config> cfgs;
  for (const int streams : {1, 2, 4, 8}) {
    oa::config c = oa_test::host_config();
    c.streams = streams;
    c.chunk_bytes = 256 << 10;
    cfgs.push_back(c);
  }
  cfgs.push_back(oa_test::emulated_config(1 << 20));
  for (const oa::config& c : cfgs) {
    config_scope cs(c);
    oa::lazy<ArrayXd> hav, call, put;
    oa_workloads::haversine(oa::ref(lat), oa::ref(lon), hav);
    oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);
    runs.push_back({hav.get(), call.get(), put.get()});
    CHECK(oa_test::run_total().chunks >= 2);
  }
  for (std::size_t k = 1; k < runs.size(); ++k) {
    CAPTURE(k);
    for (std::size_t j = 0; j < 3; ++j) CHECK((runs[k][j] == runs[0][j]).all());
  }
}

TEST_CASE("differential: the device functions' host twins agree with the CPU functions") {
  // The emulated device can run the annotations' device functions (the code a
  // GPU runs) instead of the CPU functions; libm and Eigen's vectorized
  // functions differ in the last bits, so results agree to a tolerance.
  oa::config c = oa_test::emulated_config(std::size_t{1} << 20);
  c.emulated_device_functions = true;
  config_scope cs(c);
  const std::size_t n = 54321;
  const ArrayXd price = oa_test::random_array(n, 10, 50, 21), strike = oa_test::random_array(n, 10, 50, 22),
                t = oa_test::random_array(n, 0.1, 2, 23), rate = oa_test::random_array(n, 0.01, 0.05, 24),
                vol = oa_test::random_array(n, 0.1, 0.5, 25);
  ArrayXd call_ref, put_ref;
  oa_workloads::blackscholes(price, strike, t, rate, vol, call_ref, put_ref);
  oa::lazy<ArrayXd> call, put;
  oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);
  // Mixed tolerance: outputs are differences of values around 100.
  CHECK(((call.get() - call_ref).abs() / call_ref.abs().max(1.0)).maxCoeff() <= 1e-12);
  CHECK(((put.get() - put_ref).abs() / put_ref.abs().max(1.0)).maxCoeff() <= 1e-12);
  CHECK(oa_test::run_total().chunks >= 2);
}

TEST_CASE("OA_REPORT and OA_TRACE: the run report and the trace are written as JSON") {
  const std::string report = "test_engine_report.json", trace = "test_engine_trace.json";
  oa::config c = oa_test::emulated_config(256 << 10);
  c.report = report;
  c.trace = trace;
  config_scope cs(c);
  std::vector<double> a = oa_test::random_vector(100000, 0, 1, 9), b = a;
  auto d = vecmath::oa::dot(vecmath::oa::add(a, b), b);
  d.get();
  oa::write_outputs();
  std::ifstream rf(report), tf(trace);
  REQUIRE(rf);
  REQUIRE(tf);
  const auto r = nlohmann::json::parse(rf);
  REQUIRE(r.at("stages").size() == 1);
  const auto& s = r["stages"][0];
  CHECK(s.at("calls") == nlohmann::json({"vecmath::add", "vecmath::dot"}));
  CHECK(s.at("device") == "emulated");
  CHECK(s.at("chunks").get<int>() >= 4);
  CHECK(s.at("h2d_bytes") == 2 * 100000 * 8);
  CHECK(s.at("peak_device_bytes").get<std::size_t>() <= std::size_t{256} << 10);
  for (const char* k : {"h2d_seconds", "compute_seconds", "d2h_seconds", "seconds"}) CHECK(s.at(k).get<double>() >= 0);
  const auto t = nlohmann::json::parse(tf);
  std::set<std::string> tracks;
  std::size_t slices = 0, fills = 0;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e.at("ph") == "X") ++slices;
    if (e.at("ph") == "X" && e.at("name") == "fill") ++fills;
  }
  CHECK(tracks.count("h2d copy engine") == 1);
  CHECK(tracks.count("d2h copy engine") == 1);
  CHECK(tracks.count("stream 0") == 1);
  // The vectors are pageable: their bytes went through the staging engine's
  // threads, whose work is on the timeline too.
  CHECK(tracks.count("staging fill threads") == 1);
  CHECK(fills >= 2 * s.at("chunks").get<std::size_t>());
  CHECK(slices >= 3 * s.at("chunks").get<std::size_t>());  // copies in, a launch, the partial out
  std::remove(report.c_str());
  std::remove(trace.c_str());
}

TEST_CASE("runtimes of their own: each with its devices and reports, side by side in one program") {
  config_scope cs(oa_test::host_config());  // the default runtime
  oa::runtime on_host(oa_test::host_config());
  oa::runtime paged(oa_test::emulated_config(std::size_t{64} << 10));
  std::vector<double> a(100000, 1.0), b(100000, 2.0);
  oa::lazy<std::vector<double>> x, y;
  {
    oa::runtime::use u(paged);
    CHECK(&oa::runtime::current() == &paged);
    CHECK(oa::current_config().device == "emulated");
    x = vecmath::oa::add(a, b);
    {
      oa::runtime::use v(on_host);  // nests
      y = vecmath::oa::mul(a, b);
      CHECK(oa::current_device().name() == "host");
    }
    CHECK(y.ready());  // evaluated when its use ended
    CHECK_FALSE(x.ready());
  }
  CHECK(&oa::runtime::current() == &oa::runtime::default_instance());
  CHECK(x.get()[7] == 3.0);
  CHECK(y.get()[7] == 2.0);
  REQUIRE(paged.reports().size() == 1);
  CHECK(paged.reports()[0].device == "emulated");
  CHECK(paged.reports()[0].chunks > 1);  // paged through 64 KiB
  REQUIRE(on_host.reports().size() == 1);
  CHECK(on_host.reports()[0].device == "host");
  CHECK(oa::reports().empty());  // the default runtime ran nothing
  REQUIRE(paged.devices().size() == 1);
  CHECK(paged.devices().front() == &paged.main_device());
  CHECK(paged.devices().front() != on_host.devices().front());
}

TEST_CASE("a runtime checks its configuration, and its use throws what its calls threw") {
  oa::config bad = oa_test::host_config();
  bad.streams = 1000;
  CHECK_THROWS_AS(oa::runtime{bad}, oa::config_error);
  oa::runtime rt(oa_test::host_config());
  std::vector<double> v{4.0, -1.0};
  oa::lazy<std::vector<double>> r;  // held past the use: its call must run
  auto run = [&] {
    oa::runtime::use u(rt);
    r = vecmath::oa::checked_sqrt(v);
  };
  CHECK_THROWS_WITH_AS(run(), doctest::Contains("checked_sqrt"), std::exception);
}

TEST_CASE("runtimes on two threads run at the same time, each on its own devices") {
  oa::runtime first(oa_test::emulated_config(std::size_t{1} << 20)), second(oa_test::emulated_config(std::size_t{1} << 20));
  std::vector<double> a(200000, 1.5);
  std::vector<double> out1, out2;
  auto work = [&](oa::runtime& rt, std::vector<double>& out, double k) {
    oa::runtime::use u(rt);
    out = vecmath::oa::mul(a, std::vector<double>(a.size(), k)).get();
  };
  std::thread t1(work, std::ref(first), std::ref(out1), 2.0), t2(work, std::ref(second), std::ref(out2), 3.0);
  t1.join();
  t2.join();
  CHECK(out1[123] == 3.0);
  CHECK(out2[123] == 4.5);
  CHECK(first.reports().size() == 1);
  CHECK(second.reports().size() == 1);
  CHECK(&first.main_device() != &second.main_device());
}

TEST_CASE("evaluations reuse the device's engine threads: none is started per get()") {
  for (const auto& cfg : devices()) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> a(1000, 1.0), b(1000, 2.0);
    CHECK(vecmath::oa::add(a, b).get()[0] == 3.0);  // the devices are made, their streams used once
    const std::uint64_t before = oa::detail::engine_threads_started();
    bool right = true;
    for (int i = 0; i < 1000; ++i) right = right && vecmath::oa::add(a, b).get()[999] == 3.0;
    CHECK(right);
    CHECK(oa::detail::engine_threads_started() - before == 0);
  }
}

TEST_CASE("a device that cannot be made: each stage fails with one error, and a caller who received it is not told again") {
  std::string why;
#if defined(OA_HAS_CUDA)
  if (oa::cuda::usable_devices(&why) > 0) {
    MESSAGE("a GPU is usable here: device 'cuda' is made, nothing to check");
    return;
  }
#endif
  oa::config c = oa_test::host_config();
  c.device = "cuda";
  c.host_threshold = 0;
  oa::runtime rt(c);
  std::vector<double> a(1000, 1.0), b(2000, 2.0);
  bool thrown_again = false;
  try {
    oa::runtime::use u(rt);
    auto x = vecmath::oa::add(a, a);
    auto y = vecmath::oa::add(b, b);  // another length: a stage of its own, whose result nobody asks for
    CHECK_THROWS_AS(x.get(), oa::device_unavailable);
  } catch (const std::exception& e) {
    thrown_again = true;
    MESSAGE(std::string(e.what()));
  }
  CHECK_FALSE(thrown_again);
  // The next evaluation fails the same way, without trying to make the device again.
  oa::runtime::use u(rt);
  auto z = vecmath::oa::add(a, a);
  CHECK_THROWS_WITH_AS(z.get(), doctest::Contains("device 'cuda' cannot be used"), oa::device_unavailable);
}

namespace {
/// out = m * 2, row by row: a row-major input beside a column-major result.
using row_major = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
inline constexpr auto doubled_rows = oa::annotate<"test::doubled_rows">(
    oa::cpu([](const auto& m, auto& out) { out = m * 2.0; }),
    oa::args(oa::in<oa::split::rows>("m"), oa::out<oa::split::rows, Eigen::MatrixXd>("out")),
    oa::device_fn(oa::elementwise([](auto x) { return x * 2.0; })));
}  // namespace

TEST_CASE("operands laying a unit's elements in different orders: a generated kernel is not given them") {
  row_major m(3001, 29);
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) m(i, j) = static_cast<double>(i * 100 + j);
  const Eigen::MatrixXd want = m * 2.0;
  oa::config fused = oa_test::emulated_config(std::size_t{1} << 20);
  fused.emulated_fused = true;  // generated kernels, as on a GPU
  for (const oa::config& c : {oa_test::emulated_config(std::size_t{1} << 20), fused}) {
    CAPTURE(c.emulated_fused);
    config_scope cs(c);
    oa::clear_reports();
    const Eigen::MatrixXd got = doubled_rows(m).get();
    CHECK(got == want);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 1);
    if (c.emulated_fused) {
      CHECK(reps[0].device == "host");
      CHECK(oa_test::contains(reps[0].placement_reason, "in different orders"));
    } else {
      CHECK(reps[0].device == "emulated");  // its twins read each value through its own view
    }
  }
}

TEST_CASE("get() of a temporary handle gives the value itself, not a reference into the handle") {
  using V = std::vector<double>;
  static_assert(std::is_same_v<decltype(std::declval<oa::lazy<V>>().get()), V>);
  static_assert(std::is_same_v<decltype(std::declval<const oa::lazy<V>&>().get()), const V&>);
  config_scope cs(oa_test::emulated_config(std::size_t{1} << 20));
  const V a(100000, 2.0);
  const V& r = vecmath::oa::add(a, a).get();  // the value, kept alive by the reference
  REQUIRE(r.size() == a.size());
  CHECK(r[99999] == 4.0);
  oa::lazy<V> kept = vecmath::oa::add(a, a);
  CHECK(kept.get()[5] == 4.0);  // a handle's get(): a reference, the handle still holds it
  CHECK(kept.valid());
}
