// Bad input, errors inside calls, planning errors and device faults: each
// comes back with a clear message where the value is asked for, and the
// caller's input data is never modified by a failure.

#include <doctest/doctest.h>

#include <oa/annotations/eigen_array.hpp>
#include <regex>
#include <string>

#include "stderr_capture.hpp"
#include "support.hpp"
#include "user_library/vecmath_oa.hpp"
#include "workloads.hpp"

using Eigen::ArrayXd;
using oa_test::config_scope;

using oa_test::contains;
using oa_test::message_of;

namespace {
inline constexpr auto wide_rows = oa::annotate<"test::wide_rows">(
    oa::cpu([](const auto& m, auto& out) { out = m.rowwise().sum().array(); }),
    oa::args(oa::in<oa::split::rows>("m"), oa::out<oa::split::contiguous, ArrayXd>("sums")),
    oa::device_fn(oa::elementwise(oa::ops::identity{})));
// The same with device code of its own (oa::kernel): its unit is the one its
// library chose, so a unit larger than the budget sends the stage to the
// host instead of failing it.
inline constexpr auto wide_rows_code = oa::annotate<"test::wide_rows (code)">(
    oa::cpu([](const auto& m, auto& out) { out = m.rowwise().sum().array(); }),
    oa::args(oa::in<oa::split::rows>("m"), oa::out<oa::split::contiguous, ArrayXd>("sums")),
    oa::device_fn(oa::kernel(nullptr)));

/// How many times `part` occurs in `s`.
std::size_t count_of(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE("arguments of different lengths in one split: the function and argument are named") {
  config_scope cs(oa_test::emulated_config(1 << 20));
  std::vector<double> a(100, 1.0), b(99, 2.0);
  const auto a0 = a, b0 = b;
  std::string msg;
  try {
    vecmath::oa::add(a, b);
    FAIL("no exception");
  } catch (const oa::invalid_argument& e) {
    msg = e.what();
    CHECK(e.function() == "vecmath::add");
    CHECK(contains(e.argument(), "argument 2 (b)"));
  }
  CHECK(contains(msg, "vecmath::add"));
  CHECK(contains(msg, "99"));
  CHECK(contains(msg, "100"));
  // Nothing recorded, nothing written.
  oa::evaluate();
  CHECK(oa::reports().empty());
  CHECK(a == a0);
  CHECK(b == b0);

  // A mut argument of the wrong length: the caller's object is untouched.
  std::vector<double> x(50, 3.0);
  const auto x0 = x;
  CHECK_THROWS_AS(vecmath::oa::dot(x, a), oa::invalid_argument);
  vecmath::oa::scale(x, 2.0);
  auto bad = vecmath::oa::add(a, b0.size() == 99 ? a : b);  // a valid call after the bad one still runs
  CHECK(bad.get()[0] == 2.0);
  CHECK(x[0] == 6.0);
  (void)x0;
}

TEST_CASE("a budget too small for one unit: the stage, function and argument are named at get()") {
  config_scope cs(oa_test::emulated_config(64 << 10));  // 64 KiB
  Eigen::MatrixXd m = Eigen::MatrixXd::Random(4, 20000);  // one row: 160 KB
  const Eigen::MatrixXd m0 = m;
  auto sums = wide_rows(m);
  const std::string msg = message_of([&] { sums.get(); });
  CHECK(contains(msg, "test::wide_rows"));
  CHECK(contains(msg, "argument 1 (m)"));
  CHECK(contains(msg, "cannot hold one unit"));
  CHECK_THROWS_AS(sums.get(), oa::plan_error);
  CHECK(m == m0);
}

TEST_CASE("a budget too small for one unit of device code: the host runs the stage, and stderr says so once") {
  const Eigen::MatrixXd m = Eigen::MatrixXd::Random(4, 20000);  // one row: 160 KB
  const ArrayXd want = m.rowwise().sum().array();
  std::size_t smallest = 0;
  {
    config_scope cs(oa_test::emulated_config(64 << 10));  // 64 KiB, set as set_config's device_memory
    oa_test::stderr_capture err;
    for (int i = 0; i < 3; ++i) CHECK(wide_rows_code(m).get().isApprox(want, 1e-12));
    const std::string said = err.text();
    CAPTURE(said);
    CHECK(count_of(said, "oa: the device budget") == 1);  // three evaluations, one line
    CHECK(contains(said, "the device budget of 65536 bytes (set_config: device_memory) cannot hold one unit of "
                         "stage [test::wide_rows (code)], which the host ran instead"));
    std::smatch found;
    REQUIRE(std::regex_search(said, found, std::regex("the smallest budget that runs it on emulated is ([0-9]+) bytes")));
    smallest = std::stoull(found[1]);
    CHECK(smallest > 160000);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 3);
    for (const auto& r : reps) {
      CHECK(r.device == "host");
      CHECK(contains(r.placement_reason, "one unit of the stage takes " + std::to_string(smallest) + " bytes"));
      CHECK(contains(r.placement_reason, "more than the device's budget of 65536 bytes"));
    }
  }
  // The budget named runs the stage on the device, silently; one byte less does not.
  for (const std::size_t budget : {smallest, smallest - 1}) {
    CAPTURE(budget);
    config_scope cs(oa_test::emulated_config(budget));
    oa_test::stderr_capture err;
    CHECK(wide_rows_code(m).get().isApprox(want, 1e-12));
    const std::string said = err.text();
    REQUIRE(oa::reports().size() == 1);
    CHECK(oa::reports()[0].device == (budget == smallest ? "emulated" : "host"));
    CHECK(count_of(said, "oa: the device budget") == (budget == smallest ? 0u : 1u));
  }
}

TEST_CASE("an exception thrown inside a call comes back at get(), with its type") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(1 << 20)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> a = oa_test::random_vector(40000, 0, 1, 5);
    a[31234] = -1;  // checked_sqrt throws on it
    const auto a0 = a;
    auto r = vecmath::oa::checked_sqrt(a);
    auto dependent = vecmath::oa::add(r, a);  // cancelled with the same error
    auto independent = vecmath::oa::mul(a, a);
    CHECK_THROWS_AS(r.get(), std::domain_error);
    CHECK(contains(message_of([&] { dependent.get(); }), "negative input"));
    CHECK(independent.get()[7] == a0[7] * a0[7]);
    CHECK(a == a0);
    // The runtime goes on working after the error.
    std::vector<double> ok(100, 4.0);
    CHECK(vecmath::oa::checked_sqrt(ok).get()[0] == 2.0);
  }
}

TEST_CASE("a later stage's calls cancelled by an earlier error: its report names them, not an empty error") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(1 << 20)}) {
    CAPTURE(cfg.device);
    config_scope cs(cfg);
    std::vector<double> a = oa_test::random_vector(40000, 0, 1, 6), y(40000, 2.0);
    a[123] = -1;  // checked_sqrt throws on it
    auto r = vecmath::oa::checked_sqrt(a);
    oa::lazy<double> d = vecmath::oa::dot(r, a);
    vecmath::oa::scale(y, d);  // reads the whole of d: a stage after, cancelled
    CHECK_THROWS_AS(oa::evaluate(), std::domain_error);
    CHECK(contains(message_of([&] { d.get(); }), "negative input"));
    CHECK(y[5] == 2.0);
    bool named = false;
    for (const auto& rep : oa::reports()) {
      if (rep.calls != std::vector<std::string>{"vecmath::scale"}) continue;
      CHECK(contains(rep.error, "vecmath::scale: not run: what they read failed: "));
      CHECK(contains(rep.error, "negative input"));
      named = true;
    }
    CHECK(named);
    oa::clear_reports();
  }
}

TEST_CASE("an injected device fault on chunk k: the chunk re-runs on the host, results exact") {
  const std::size_t n = 200000;
  const ArrayXd price = oa_test::random_array(n, 10, 50, 31), strike = oa_test::random_array(n, 10, 50, 32),
                t = oa_test::random_array(n, 0.1, 2, 33), rate = oa_test::random_array(n, 0.01, 0.05, 34),
                vol = oa_test::random_array(n, 0.1, 0.5, 35);
  const ArrayXd price0 = price;
  ArrayXd call_ref, put_ref;  // what the host device computes: the re-run must give the same bits
  {
    config_scope hs(oa_test::host_config());
    oa::lazy<ArrayXd> c, p;
    oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), c, p);
    call_ref = c.get();
    put_ref = p.get();
  }
  struct fault_case {
    std::uint64_t launch, copy;
  };
  for (const fault_case f : {fault_case{3, 0}, fault_case{0, 7}, fault_case{0, 12}, fault_case{1, 0}}) {
    CAPTURE(f.launch);
    CAPTURE(f.copy);
    oa::config c = oa_test::emulated_config(1 << 20);
    c.fail_launch = f.launch;
    c.fail_copy = f.copy;
    config_scope cs(c);
    oa::lazy<ArrayXd> call, put;
    oa_workloads::blackscholes(oa::ref(price), oa::ref(strike), oa::ref(t), oa::ref(rate), oa::ref(vol), call, put);
    CHECK((call.get() - call_ref).abs().maxCoeff() == 0.0);
    CHECK((put.get() - put_ref).abs().maxCoeff() == 0.0);
    const auto r = oa_test::run_total();
    CHECK(r.host_reruns == 1);
    CHECK(r.chunks >= 8);
    CHECK((price - price0).abs().maxCoeff() == 0.0);
  }
}

TEST_CASE("a device fault while updating the caller's data in place: each element updated once") {
  oa::config c = oa_test::emulated_config(64 << 10);
  c.fail_launch = 2;
  config_scope cs(c);
  std::vector<double> x = oa_test::random_vector(100000, -1, 1, 41);
  const auto x0 = x;
  vecmath::oa::scale(x, 3.0);
  oa::evaluate();
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == x0[i] * 3.0);
  CHECK(oa_test::run_total().host_reruns == 1);
}

#if !defined(OA_HAS_CUDA)  // with CUDA, the device is in the build (test_cuda runs it)
TEST_CASE("a device that is not in this build: a clear error at get()") {
  oa::config c = oa_test::host_config();
  c.device = "cuda";
  config_scope cs(c);
  std::vector<double> a(10, 1.0);
  auto r = vecmath::oa::add(a, a);
  const std::string msg = message_of([&] { r.get(); });
  CHECK(contains(msg, "cuda"));
  CHECK_THROWS_AS(r.get(), oa::config_error);
}
#endif

TEST_CASE("an empty handle says so") {
  oa::lazy<ArrayXd> empty;
  CHECK_THROWS_AS(empty.get(), oa::error);
  config_scope cs(oa_test::host_config());
  CHECK_THROWS_AS(vecmath::oa::add(oa::lazy<std::vector<double>>{}, oa::lazy<std::vector<double>>{}), oa::invalid_argument);
}

TEST_CASE("a device lost for good: the stage's unfinished chunks re-run on the host, later stages stay there") {
  const std::size_t n = 200000;
  const ArrayXd x = oa_test::random_array(n, 0.5, 2.0, 51), y = oa_test::random_array(n, 0.5, 2.0, 52);
  const ArrayXd z = oa_test::random_array(n / 2, 0.5, 2.0, 53);
  oa::config c = oa_test::emulated_config(256 << 10);
  c.fail_launch = 3;
  c.fail_sticky = true;
  c.serial_stages = true;  // q's stage after r's (run together, both meet the loss: test_dag_streams)
  config_scope cs(c);
  oa::lazy<ArrayXd> r = exp(oa::ref(x)) * oa::ref(y);
  oa::lazy<ArrayXd> q = sqrt(oa::ref(z));  // another stage (other length), after the loss
  CHECK(oa_test::max_rel_error(r.get(), (x.exp() * y).eval()) <= oa_test::host_tolerance());
  CHECK((q.get() - z.sqrt()).abs().maxCoeff() == 0.0);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 2);
  CHECK(reps[0].device == "emulated");  // chunks before the fault ran there
  CHECK(reps[0].device_chunks >= 1);
  CHECK(reps[0].host_reruns >= 1);
  CHECK(reps[0].device_fault.find("launch #3") != std::string::npos);
  CHECK(reps[1].device == "host");
  CHECK(reps[1].placement_reason.find("failed earlier") != std::string::npos);
  // A new configuration gives a working device again.
  oa::config fresh = oa_test::emulated_config(256 << 10);
  config_scope again(fresh);
  CHECK((sqrt(oa::ref(z)).get() - z.sqrt()).abs().maxCoeff() == 0.0);
  CHECK(oa::reports().at(0).device == "emulated");
}

TEST_CASE("a sticky fault in a stage whose call throws: the loss is that stage's, said once, later stages on the host") {
  std::vector<double> x = oa_test::random_vector(1 << 18, 0.5, 2.0, 61);
  x[x.size() - 3] = -1;  // the call throws in its last chunk
  const std::vector<double> before = x;
  oa::config c = oa_test::emulated_config(256 << 10);
  c.fail_launch = 2;
  c.fail_sticky = true;
  config_scope cs(c);
  oa_test::checked_scale_oa(x, 2.0);
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative element"), std::domain_error);
  CHECK(x == before);
  auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(contains(reps[0].device_fault, "lost after an injected fault in launch #2"));
  CHECK(reps[0].host_reruns >= 1);
  oa::clear_reports();
  std::vector<double> y = before;
  y[y.size() - 3] = 1;
  oa_test::checked_scale_oa(y, 2.0);
  oa::evaluate();
  reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "host");
  CHECK(reps[0].device_fault.empty());
  CHECK(contains(reps[0].placement_reason, "failed earlier"));
  for (std::size_t i = 0; i < y.size(); i += 997) REQUIRE(y[i] == (i == y.size() - 3 ? 1.0 : before[i]) * 2.0);
}
