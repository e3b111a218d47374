// Failure paths: every error reaches the caller, nothing is lost, a failed
// stage leaves the caller's objects as they were, and no memory that queued
// work may touch is freed early (run under AddressSanitizer by CI).

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <oa/annotations/eigen_array.hpp>
#include <oa/linalg/gemm.hpp>
#include <regex>
#include <thread>

#include "host/stream_worker.hpp"
#include "support.hpp"
#include "user_library/vecmath_oa.hpp"
#include "workloads.hpp"

using Eigen::ArrayXd;
using oa_test::config_scope;

using oa_test::contains;
using oa_test::message_of;

namespace {


using oa_test::checked_scale_oa;

// A reduction that throws on bad data.
double checked_total(std::span<const double> a) {
  double s = 0;
  for (double v : a) {
    if (v < 0) throw std::range_error("test::checked_total: negative element");
    s += v;
  }
  return s;
}
inline constexpr auto checked_total_oa = oa::annotate<"test::checked_total">(
    oa::cpu(&checked_total), oa::args(oa::in<oa::split::contiguous>("a"), oa::ret<oa::split::sum, double>),
    oa::device_fn(oa::elementwise(oa::ops::identity{})));

inline constexpr auto times_oa = oa::annotate<"test::times">(
    oa::cpu([](std::span<const double> a, double k, std::span<double> out) {
      for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] * k;
    }),
    oa::args(oa::in<oa::split::contiguous>("a"), oa::scalar<double>("k"),
             oa::out<oa::split::contiguous, std::vector<double>>("out")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));

oa::config sticky(std::size_t budget, std::uint64_t launch) {
  oa::config c = oa_test::emulated_config(budget);
  c.fail_launch = launch;
  c.fail_sticky = true;
  return c;
}

struct crime_inputs {
  ArrayXd total, adult, robberies;
  explicit crime_inputs(std::size_t n)
      : total(oa_test::random_array(n, 1e5, 1e6, 61)),
        adult(oa_test::random_array(n, 1e4, 5e5, 62)),
        robberies(oa_test::random_array(n, 0, 20, 63)) {}
  double run() const {
    return oa::lazy<double>(oa_workloads::crime_index(oa::ref(total), oa::ref(adult), oa::ref(robberies))).get();
  }
};

}  // namespace

TEST_CASE("a sticky fault in a stage that ends in a reduction: exact result, nothing freed under queued work") {
  const crime_inputs in(200000);
  double expected = 0;
  {
    config_scope cs(oa_test::emulated_config(1 << 20));
    expected = in.run();
  }
  for (std::uint64_t launch = 1; launch <= 8; ++launch) {
    CAPTURE(launch);
    config_scope cs(sticky(1 << 20, launch));
    CHECK(in.run() == expected);  // bit for bit: partials are merged in chunk order either way
    const auto r = oa_test::run_total();
    CHECK(r.device == "emulated");
    CHECK(contains(r.device_fault, "injected fault in launch #" + std::to_string(launch)));
    CHECK(r.host_reruns >= 1);
    CHECK(r.device_chunks + r.host_reruns == r.chunks);
  }
}

TEST_CASE("a sticky fault in a stage of in-place updates: each element updated once, later stages on the host") {
  std::vector<double> x = oa_test::random_vector(100000, -1, 1, 41);
  const auto x0 = x;
  config_scope cs(sticky(64 << 10, 3));
  for (int round = 0; round < 3; ++round) {
    vecmath::oa::scale(x, 3.0);
    oa::evaluate();
  }
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == x0[i] * 3.0 * 3.0 * 3.0);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 3);
  // The first stage: chunks before the fault ran on the device, the rest on the host.
  CHECK(reps[0].device == "emulated");
  CHECK(reps[0].device_chunks >= 2);
  CHECK(reps[0].host_reruns >= 1);
  CHECK(reps[0].device_chunks + reps[0].host_reruns == reps[0].chunks);
  CHECK(reps[0].h2d_bytes > 0);
  CHECK(contains(reps[0].device_fault, "injected fault"));
  // The device is given up on: later stages run on the host.
  CHECK(reps[1].device == "host");
  CHECK(contains(reps[1].placement_reason, "failed earlier"));
  CHECK(reps[2].device == "host");
}

TEST_CASE("a sticky fault in a stage with in-place updates and a reduction, at every launch") {
  std::vector<double> x0 = oa_test::random_vector(150000, 0.5, 1.5, 43);
  for (std::uint64_t launch = 1; launch <= 6; ++launch) {
    CAPTURE(launch);
    std::vector<double> x = x0;
    config_scope cs(sticky(96 << 10, launch));
    vecmath::oa::scale(x, 2.0);
    oa::lazy<double> d = vecmath::oa::dot(x, x);  // reads the updated x, same stage
    const double got = d.get();
    std::vector<double> want = x0;
    for (double& v : want) v *= 2.0;
    CHECK(x == want);
    // The same chunks as the device used, folded in order.
    const auto r = oa::reports().at(0);
    double fold = 0;
    for (const auto& c : oa::split::chunks(want.size(), r.chunk_units))
      fold += vecmath::dot(std::span(want).subspan(c.begin, c.size()), std::span(want).subspan(c.begin, c.size()));
    CHECK(got == fold);
  }
}

TEST_CASE("evaluate() and the end of a scope rethrow errors of calls whose results nobody reads") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> x = oa_test::random_vector(50000, 0, 1, 7);
    x[43210] = -1;
    const auto x0 = x;
    checked_scale_oa(x, 2.0);
    CHECK_THROWS_AS(oa::evaluate(), std::domain_error);
    CHECK(x == x0);  // all or nothing
    oa::evaluate();  // the error was reported once
    // A later call does not run on half-updated data: x is as it was.
    std::vector<double> y = x;
    y[43210] = 1;
    checked_scale_oa(y, 2.0);
    CHECK_NOTHROW(oa::evaluate());
    CHECK(y[0] == x0[0] * 2.0);

    CHECK_THROWS_AS(
        [&] {
          oa::scope s;
          checked_scale_oa(x, 2.0);
        }(),
        std::domain_error);
    CHECK(x == x0);

    // An error already received through get() is not thrown again.
    std::vector<double> a = x;
    auto r = vecmath::oa::checked_sqrt(a);
    CHECK_THROWS_AS(r.get(), std::domain_error);
    CHECK_NOTHROW(oa::evaluate());
  }
}

TEST_CASE("several failed calls: evaluate() throws the first in program order, once") {
  config_scope cs(oa_test::host_config());
  std::vector<double> x = oa_test::random_vector(20000, 0, 1, 8), y = x;
  x[5] = -1;
  y[7] = -1;
  std::vector<double> bad = x;
  auto total = checked_total_oa(bad);  // fails with range_error (held, not read)
  checked_scale_oa(y, 2.0);            // fails with domain_error
  CHECK_THROWS_AS(oa::evaluate(), std::range_error);
  CHECK_NOTHROW(oa::evaluate());
  CHECK_THROWS_AS(total.get(), std::range_error);  // still there for whoever asks
}

TEST_CASE("an error nobody could receive is reported when its thread ends, and in the report") {
  const std::string path = "test_failures_unobserved.json";
  oa::config c = oa_test::host_config();
  c.report = path;
  config_scope cs(c);
  std::thread([] {
    std::vector<double> x(1000, 1.0);
    x[3] = -1;
    checked_scale_oa(x, 2.0);
    std::vector<double> ok(10, 4.0);
    (void)vecmath::oa::checked_sqrt(ok).get();  // evaluates everything, x's call fails unseen
  }).join();
  oa::write_outputs();
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f);
  REQUIRE(j["unobserved_errors"].size() == 1);
  CHECK(contains(j["unobserved_errors"][0].get<std::string>(), "test::checked_scale"));
  CHECK(contains(j["unobserved_errors"][0].get<std::string>(), "negative element"));
  std::remove(path.c_str());
}

TEST_CASE("a call that throws part-way through an in-place stage: the caller's objects as they were, on every device") {
  oa::config seq = oa_test::emulated_config(64 << 10);
  seq.sequential = true;
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10), seq}) {
    CAPTURE(cfg.device);
    CAPTURE(cfg.sequential);
    config_scope cs(cfg);
    for (const std::size_t bad : {std::size_t{0}, std::size_t{777}, std::size_t{60000}, std::size_t{99999}}) {
      CAPTURE(bad);
      std::vector<double> x = oa_test::random_vector(100000, 0, 1, 9), z = oa_test::random_vector(100000, 0, 1, 10);
      x[bad] = -1;
      const auto x0 = x, z0 = z;
      vecmath::oa::scale(z, 5.0);   // same stage as the failing call, independent of it
      checked_scale_oa(x, 2.0);
      vecmath::oa::scale(x, 3.0);   // after it, on the same object: cancelled
      CHECK_THROWS_AS(oa::evaluate(), std::domain_error);
      CHECK(x == x0);
      for (std::size_t i = 0; i < z.size(); ++i) REQUIRE(z[i] == z0[i] * 5.0);  // computed once, as plain code would
      const auto r = oa_test::run_total();
      // Kept chunk by chunk up to the failure: at most both objects whole.
      CHECK(r.rollback_bytes > 0);
      CHECK(r.rollback_bytes <= 2 * 100000 * sizeof(double));
      CHECK(contains(r.error, "negative element"));
    }
  }
}

TEST_CASE("every budget from 64 B to 8 KiB runs exactly or fails at planning naming the budget that works") {
  const std::size_t n = 300;
  const ArrayXd price = oa_test::random_array(n, 10, 50, 31), strike = oa_test::random_array(n, 10, 50, 32),
                t = oa_test::random_array(n, 0.1, 2, 33), rate = oa_test::random_array(n, 0.01, 0.05, 34),
                vol = oa_test::random_array(n, 0.1, 0.5, 35);
  auto run = [&](std::size_t budget, ArrayXd& call) {
    config_scope cs(oa_test::emulated_config(budget));
    oa::lazy<ArrayXd> c, p;
    oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), c, p);
    call = c.get();
  };
  ArrayXd expected;
  run(1 << 20, expected);
  std::size_t smallest = 0;
  std::size_t ran = 0, refused = 0;
  for (std::size_t budget = 64; budget <= 8192; budget += budget < 1200 ? 8 : 61) {
    CAPTURE(budget);
    ArrayXd call;
    try {
      run(budget, call);
      ++ran;
      CHECK((call - expected).abs().maxCoeff() == 0.0);
      if (smallest) CHECK(budget >= smallest);
    } catch (const oa::plan_error& e) {
      ++refused;
      std::smatch m;
      const std::string msg = e.what();
      REQUIRE(std::regex_search(msg, m, std::regex("the smallest budget that runs it is ([0-9]+) bytes")));
      const std::size_t named = std::stoull(m[1]);
      CHECK(named > budget);
      if (!smallest) smallest = named;
      CHECK(named == smallest);
    }
  }
  CHECK(ran > 0);
  CHECK(refused > 0);
  // The budget named is exactly the smallest that runs.
  ArrayXd call;
  CHECK_NOTHROW(run(smallest, call));
  CHECK((call - expected).abs().maxCoeff() == 0.0);
  CHECK_THROWS_AS(run(smallest - 1, call), oa::plan_error);
}

TEST_CASE("a tiny link bandwidth throttles instead of wrapping the clock around") {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  CHECK(oa::detail::link_deadline(now, 1e30) == clock::time_point::max());
  CHECK(oa::detail::link_deadline(now, 1e9) > now + std::chrono::hours(24 * 365 * 30));
  CHECK(oa::detail::link_deadline(now, 0.25) - now == std::chrono::milliseconds(250));
  CHECK(oa::detail::link_deadline(now, 0) == now);
  // A copy over a slow link takes its time: 1000 bytes at 10 kB/s.
  oa::emulated_options o;
  o.link_bytes_per_second = 1e4;
  auto dev = oa::make_emulated_device(o);
  std::vector<std::byte> host(1000);
  void* d = dev->allocate(host.size());
  const auto s = dev->create_stream();
  const auto t0 = clock::now();
  dev->copy_to_device_async({static_cast<std::byte*>(d), 1000, 1, 1000}, {host.data(), 1000, 1, 1000}, s);
  dev->synchronize(s);
  CHECK(clock::now() - t0 >= std::chrono::milliseconds(95));
  dev->destroy_stream(s);
  dev->deallocate(d, host.size());
  o.link_bytes_per_second = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(oa::make_emulated_device(o), oa::invalid_argument);
}

TEST_CASE("reports stay bounded over many evaluations; the total still counts every stage") {
  const std::string path = "test_failures_bounded.json";
  oa::config c = oa_test::host_config();
  c.report = path;
  config_scope cs(c);
  std::vector<double> a(64, 1.0);
  const std::size_t runs = 2500;
  for (std::size_t i = 0; i < runs; ++i) (void)vecmath::oa::add(a, a).get();
  CHECK(oa::reports().size() <= oa::run_log::kept_stages);
  oa::write_outputs();
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f);
  CHECK(j["stages"].size() + j["dropped_stages"].get<std::size_t>() == runs);
  CHECK(j["total"]["chunks"].get<std::size_t>() == runs);
  std::remove(path.c_str());
}

TEST_CASE("a caller's object resized after the call was recorded: a clear error, nothing read out of bounds") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> a(10000, 2.0), b(10000, 3.0);
    auto r = vecmath::oa::add(a, b);
    a.resize(10);
    const std::string msg = message_of([&] { r.get(); });
    CHECK(contains(msg, "vecmath::add"));
    CHECK(contains(msg, "argument 1 (a)"));
    CHECK(contains(msg, "10 units"));
    CHECK(contains(msg, "10000"));
    CHECK_THROWS_AS(r.get(), oa::invalid_argument);

    ArrayXd x = ArrayXd::Constant(5000, 1.0);
    oa::lazy<ArrayXd> y = exp(oa::ref(x));
    x.resize(20000);  // reallocates: the recorded storage is gone
    CHECK_THROWS_AS(y.get(), oa::invalid_argument);
  }
}

TEST_CASE("reductions are bit-identical for 1, 2, 4 and 8 streams and across devices, folded in chunk order") {
  // Values whose sum depends on the order of addition.
  const std::size_t n = 100000;
  std::vector<double> a(n);
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> d(-1, 1);
  for (std::size_t i = 0; i < n; ++i) a[i] = d(g) * (i % 97 == 0 ? 1e12 : 1.0);
  const std::vector<double> ones(n, 1.0);
  std::vector<double> results;
  std::size_t chunk_units = 0;
  for (const bool emulated : {false, true})
    for (const int streams : {1, 2, 4, 8}) {
      CAPTURE(emulated);
      CAPTURE(streams);
      oa::config c = emulated ? oa_test::emulated_config(4 << 20) : oa_test::host_config();
      c.streams = streams;
      c.chunk_bytes = 16 << 10;  // the same chunks everywhere
      config_scope cs(c);
      results.push_back(vecmath::oa::dot(a, ones).get());
      const auto r = oa::reports().at(0);
      CHECK(r.chunks > 8);
      CHECK(r.streams == streams);
      if (!chunk_units) chunk_units = r.chunk_units;
      CHECK(r.chunk_units == chunk_units);
    }
  std::vector<double> partials;
  for (const auto& c : oa::split::chunks(n, chunk_units))
    partials.push_back(vecmath::dot(std::span(a).subspan(c.begin, c.size()), std::span(ones).subspan(c.begin, c.size())));
  double forward = 0, reverse = 0;
  for (double p : partials) forward += p;
  for (auto it = partials.rbegin(); it != partials.rend(); ++it) reverse += *it;
  REQUIRE(forward != reverse);  // the data tells the orders apart
  for (double r : results) CHECK(r == forward);
}

TEST_CASE("a chunk of a reduction re-run on the host after a device fault keeps its partial") {
  const std::vector<double> a = oa_test::random_vector(200000, -1, 1, 12), b = oa_test::random_vector(200000, -1, 1, 13);
  double expected = 0;
  {
    config_scope cs(oa_test::emulated_config(256 << 10));
    expected = vecmath::oa::dot(a, b).get();
  }
  for (std::uint64_t launch : {1, 2, 5}) {
    CAPTURE(launch);
    oa::config c = oa_test::emulated_config(256 << 10);
    c.fail_launch = launch;
    config_scope cs(c);
    CHECK(vecmath::oa::dot(a, b).get() == expected);
    CHECK(oa_test::run_total().host_reruns == 1);
  }
}

TEST_CASE("a failed lazy scalar fails the calls that read it") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> a = oa_test::random_vector(30000, 0, 1, 14);
    a[20000] = -1;
    const auto a0 = a;
    oa::lazy<double> k = checked_total_oa(a);  // fails
    auto scaled = times_oa(a, k);              // reads it while pending
    std::vector<double> x(30000, 1.0);
    vecmath::oa::scale(x, k);
    CHECK_THROWS_AS(oa::evaluate(), std::range_error);
    CHECK_THROWS_AS(scaled.get(), std::range_error);
    CHECK(x == std::vector<double>(30000, 1.0));
    // Already failed when the call is recorded: the call fails the same way.
    auto later = times_oa(a0, k);
    CHECK_THROWS_AS(later.get(), std::range_error);
  }
}

TEST_CASE("a value beside a failed call in its stage is computed, and the error goes to the call's readers") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(64 << 10)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> x = oa_test::random_vector(50000, 0, 1, 21), y = oa_test::random_vector(50000, 0, 1, 22);
    x[30000] = -1;
    const auto x0 = x;
    auto r = vecmath::oa::mul(y, y);  // independent, earlier in program order
    checked_scale_oa(x, 2.0);         // throws
    auto after = vecmath::oa::add(x, y);  // reads the failed version of x: cancelled
    CHECK(r.get()[5] == y[5] * y[5]);
    CHECK_THROWS_AS(after.get(), std::domain_error);
    CHECK(x == x0);
    CHECK_NOTHROW(oa::evaluate());  // received through after.get()
  }
}

TEST_CASE("an object split two ways after a failed in-place call: the reader fails too, never reads stale data") {
  config_scope cs(oa_test::host_config());
  using cmap = Eigen::Map<const Eigen::MatrixXd, 0, Eigen::OuterStride<>>;
  using mmap = Eigen::Map<Eigen::MatrixXd, 0, Eigen::OuterStride<>>;
  static constexpr auto scale_cols = oa::annotate<"test::scale_cols">(
      oa::cpu([](mmap m, double k) {
        if ((m.array() < 0).any()) throw std::domain_error("test::scale_cols: negative entry");
        m *= k;
      }),
      oa::args(oa::mut<oa::split::cols>("m"), oa::scalar<double>("k")));
  static constexpr auto row_sums = oa::annotate<"test::row_sums">(
      oa::cpu([](cmap m, std::span<double> out) {
        for (Eigen::Index i = 0; i < m.rows(); ++i) out[static_cast<std::size_t>(i)] = m.row(i).sum();
      }),
      oa::args(oa::in<oa::split::rows>("m"), oa::out<oa::split::contiguous, std::vector<double>>("sums")));
  Eigen::MatrixXd m = Eigen::MatrixXd::Constant(4, 4, 1.0);
  m(3, 3) = -1;
  scale_cols(m, 2.0);
  auto s = row_sums(m);  // another split of m: the pending update is evaluated first, and fails
  CHECK_THROWS_AS(s.get(), std::domain_error);
  CHECK_NOTHROW(oa::evaluate());
}

TEST_CASE("a temporary passed to a call is kept by the call") {
  config_scope cs(oa_test::host_config());
  auto load = [] { return std::vector<double>(1 << 16, 4.0); };
  auto r = vecmath::oa::checked_sqrt(load());
  CHECK(r.get()[100] == 2.0);
}

TEST_CASE("calls left unevaluated when their thread ends are reported, not silently dropped") {
  const std::string path = "test_failures_dropped.json";
  oa::config c = oa_test::host_config();
  c.report = path;
  config_scope cs(c);
  std::vector<double> z(1000, 0.0);
  std::thread([&] { vecmath::oa::scale(z, 2.0); }).join();
  oa::write_outputs();
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f);
  REQUIRE(j["unobserved_errors"].size() == 1);
  CHECK(contains(j["unobserved_errors"][0].get<std::string>(), "vecmath::scale"));
  CHECK(contains(j["unobserved_errors"][0].get<std::string>(), "never ran"));
  std::remove(path.c_str());
}

TEST_CASE("a stage refused at planning is in the report with its error") {
  config_scope cs(oa_test::emulated_config(100));
  std::vector<double> a(100000, 1.0);
  auto r = vecmath::oa::add(a, a);
  CHECK_THROWS_AS(r.get(), oa::plan_error);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(contains(reps[0].error, "the smallest budget that runs it"));
  CHECK(reps[0].calls.at(0) == "vecmath::add");
}

namespace {

oa::config faulty(std::size_t budget, std::uint64_t launch, std::uint64_t copy, bool sticky_fault, bool fused = false) {
  oa::config c = oa_test::emulated_config(budget);
  c.fail_launch = launch;
  c.fail_copy = copy;
  c.fail_sticky = sticky_fault;
  c.emulated_fused = fused;
  return c;
}

struct fault_at {
  std::uint64_t launch, copy;
};

/// A product, then a product of its result: the second is a later stage.
struct product_chain {
  Eigen::MatrixXd a = oa_test::random_matrix<Eigen::MatrixXd>(256, 256, 71),
                  b = oa_test::random_matrix<Eigen::MatrixXd>(256, 256, 72),
                  d = oa_test::random_matrix<Eigen::MatrixXd>(256, 96, 73);
  std::pair<Eigen::MatrixXd, Eigen::MatrixXd> run() const {
    oa::lazy<Eigen::MatrixXd> ab = oa::linalg::product(a, b);
    oa::lazy<Eigen::MatrixXd> abd = oa::linalg::product(ab, d);
    return {ab.get(), abd.get()};
  }
};

/// Haversine then a sum of its result with a Black-Scholes-like chain of
/// transcendental functions: math where host and device functions differ.
struct fused_chain {
  ArrayXd lat = oa_test::random_array(100000, -1.5, 1.5, 81), lon = oa_test::random_array(100000, -1.5, 1.5, 82);
  std::pair<ArrayXd, double> run() const {
    oa::lazy<ArrayXd> hav;
    oa_workloads::haversine(oa::ref(lat), oa::ref(lon), hav);
    const ArrayXd h = hav.get();  // one evaluation; the next is a later stage
    oa::lazy<ArrayXd> e = exp(oa::ref(lat) * -0.5) * erf(oa::ref(lon)) + log(oa::ref(lat) + 2.0);
    return {h, oa::sum(e).get()};
  }
};

}  // namespace

TEST_CASE("a non-sticky fault in a product: the failed tiles re-run to the same bits, the device keeps the next stage") {
  const product_chain in;
  const std::size_t budget = 256 << 10;
  std::pair<Eigen::MatrixXd, Eigen::MatrixXd> expected;
  {
    config_scope cs(oa_test::emulated_config(budget));
    expected = in.run();
    REQUIRE(oa::reports().size() == 2);
    REQUIRE(oa::reports()[0].chunks > 4);
  }
  for (const fault_at f : {fault_at{1, 0}, fault_at{2, 0}, fault_at{7, 0}, fault_at{0, 1}, fault_at{0, 3},
                           fault_at{0, 11}}) {
    CAPTURE(f.launch);
    CAPTURE(f.copy);
    config_scope cs(faulty(budget, f.launch, f.copy, false));
    const auto got = in.run();
    CHECK((got.first - expected.first).cwiseAbs().maxCoeff() == 0.0);
    CHECK((got.second - expected.second).cwiseAbs().maxCoeff() == 0.0);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 2);
    CHECK(reps[0].device == "emulated");
    CHECK(reps[0].host_reruns >= 1);
    CHECK(reps[0].host_reruns < reps[0].chunks);  // only the failed tiles
    CHECK(reps[0].device_chunks + reps[0].host_reruns == reps[0].chunks);
    CHECK(reps[0].device_fault.empty());  // transient: the device is not lost
    CHECK(reps[1].device == "emulated");
    CHECK(reps[1].host_reruns == 0);
  }
}

TEST_CASE("a sticky fault in a product: its unfinished tiles re-run on the host to the same bits, later stages there") {
  const product_chain in;
  const std::size_t budget = 256 << 10;
  std::pair<Eigen::MatrixXd, Eigen::MatrixXd> expected;
  {
    config_scope cs(oa_test::emulated_config(budget));
    expected = in.run();
  }
  for (const fault_at f : {fault_at{2, 0}, fault_at{7, 0}, fault_at{0, 3}}) {
    CAPTURE(f.launch);
    CAPTURE(f.copy);
    config_scope cs(faulty(budget, f.launch, f.copy, true));
    const auto got = in.run();
    CHECK((got.first - expected.first).cwiseAbs().maxCoeff() == 0.0);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 2);
    CHECK(reps[0].host_reruns >= 1);
    CHECK(contains(reps[0].device_fault, "injected fault"));
    CHECK(reps[1].device == "host");
    CHECK(contains(reps[1].placement_reason, "failed earlier"));
    // The later product ran on the host in one piece: within its tolerance.
    const double scale = expected.second.cwiseAbs().maxCoeff();
    CHECK((got.second - expected.second).cwiseAbs().maxCoeff() <= 1e-12 * scale);
  }
}

TEST_CASE("a fault in a fused chunk: re-run through the kernel's description, the same bits, the device kept") {
  const fused_chain in;
  const std::size_t budget = 256 << 10;
  std::pair<ArrayXd, double> expected;
  std::size_t stages = 0;
  {
    config_scope cs(faulty(budget, 0, 0, false, true));
    expected = in.run();
    stages = oa::reports().size();
    REQUIRE(stages >= 2);
    REQUIRE(oa::reports().at(0).chunks > 4);
  }
  for (const bool sticky_fault : {false, true})
    for (const fault_at f : {fault_at{1, 0}, fault_at{3, 0}, fault_at{0, 2}, fault_at{0, 9}}) {
      CAPTURE(sticky_fault);
      CAPTURE(f.launch);
      CAPTURE(f.copy);
      config_scope cs(faulty(budget, f.launch, f.copy, sticky_fault, true));
      const auto got = in.run();
      CHECK((got.first - expected.first).abs().maxCoeff() == 0.0);
      const auto reps = oa::reports();
      REQUIRE(reps.size() == stages);
      CHECK(reps[0].host_reruns >= 1);
      CHECK(reps[0].device_fault.empty() == !sticky_fault);
      for (std::size_t i = 1; i < reps.size(); ++i) CHECK(reps[i].device == (sticky_fault ? "host" : "emulated"));
      if (sticky_fault)  // the later stage ran on the host, with the CPU functions
        CHECK(std::abs(got.second - expected.second) <= 1e-12 * std::abs(expected.second));
      else
        CHECK(got.second == expected.second);
    }
}

TEST_CASE("a fault in a staging fill or drain: the chunk re-runs on the host, results exact, the device kept") {
  // Pageable arrays cross the emulated link through the staging engine: a
  // failed fill or drain fails its stream's copy, like a failed DMA.
  const fused_chain in;
  const std::size_t budget = 256 << 10;
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    std::pair<ArrayXd, double> expected;
    {
      config_scope cs(faulty(budget, 0, 0, false, fused));
      expected = in.run();
    }
    for (const bool drain : {false, true})
      for (const std::uint64_t n : {1u, 4u, 11u}) {
        CAPTURE(drain);
        CAPTURE(n);
        oa::config c = faulty(budget, 0, 0, false, fused);
        (drain ? c.fail_drain : c.fail_fill) = n;
        config_scope cs(c);
        const auto got = in.run();
        CHECK((got.first - expected.first).abs().maxCoeff() == 0.0);
        CHECK(got.second == expected.second);
        const auto reps = oa::reports();
        REQUIRE(!reps.empty());
        CHECK(reps[0].host_reruns >= 1);
        CHECK(reps[0].device_fault.empty());  // transient: the device stays
        for (const auto& r : reps) CHECK(r.device == "emulated");
      }
  }
}
