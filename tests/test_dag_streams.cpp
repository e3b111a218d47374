// Stages that conflict with no stage not yet run run together on one
// device's streams, each in a share of its memory: results bit for bit
// those of one stage at a time (OA_SERIAL_STAGES), each stage's records its
// own, budgets kept, and errors, faults and rollback as when run alone.

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>
#include <oa/annotations/stl.hpp>
#include <oa/linalg/gemm.hpp>
#include <oa/oa.hpp>

#include "core/perf_model.hpp"
#include "core/scheduler.hpp"
#include "support.hpp"

using oa_test::checked_scale_oa;
using oa_test::config_scope;
using oa_test::contains;

namespace {

/// A library sum that throws on bad data part-way, as plain code would.
double checked_total(std::span<const double> x) {
  double t = 0;
  for (double v : x) {
    if (v < 0) throw std::domain_error("test::checked_total: negative element");
    t += v;
  }
  return t;
}
inline constexpr auto checked_total_oa = oa::annotate<"test::checked_total">(
    oa::cpu(&checked_total),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::ret<oa::split::sum, double>),
    oa::device_fn(oa::elementwise(oa::ops::identity{})));

/// out = a * s, column by column: element-wise work on a product's result.
inline constexpr auto scale_matrix_oa = oa::annotate<"test::scale_matrix">(
    oa::cpu([](const auto& a, const double& s, auto& out) { out = a * s; }),
    oa::args(oa::in<oa::split::cols>("a"), oa::scalar<double>("s"), oa::out<oa::split::cols, Eigen::MatrixXd>("out")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));

constexpr std::size_t budget = std::size_t{1} << 20;

std::vector<double> ramp(std::size_t n, double step) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5 + static_cast<double>(i % 1013) * step;
  return v;
}

/// The link bounds these stages: the scheduler predicts them faster together.
/// It also adds up the kernels' busy times it measured, and under
/// ThreadSanitizer the emulated device's kernels (host code) run some 100
/// times slower: a slower link keeps the link the bound there.
#if defined(__SANITIZE_THREAD__)
constexpr double link_bound_gbps = 0.025;
#else
constexpr double link_bound_gbps = 0.25;
#endif

oa::config device(bool serial, double link_gbps = link_bound_gbps) {
  oa::config c = oa_test::emulated_config(budget, link_gbps);
  c.serial_stages = serial;
  return c;
}

/// Four branches over arrays of different lengths (separate stages, none
/// touching another's data): sums of squares, which only copy in, and
/// pairs of results of one array (-x and x + x), which copy out twice what
/// they copy in. Together they use both of the link's directions; one at a
/// time, one of them idles.
struct branches {
  std::vector<double> sums;
  std::vector<std::vector<double>> results;
};

/// -x and x + x: one stage, x copied in once, two arrays out.
std::pair<oa::lazy<std::vector<double>>, oa::lazy<std::vector<double>>> two_of(const std::vector<double>& x) {
  return {oa::stl::transform(x, std::negate<>{}), oa::stl::transform(x, x, std::plus<>{})};
}

branches run_branches(const std::vector<std::vector<double>>& xs) {
  std::vector<oa::lazy<double>> ss;
  std::vector<oa::lazy<std::vector<double>>> rs;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    if (k % 2 == 0) {
      ss.push_back(oa::stl::transform_reduce(xs[k], xs[k], 0.0));
    } else {
      auto [neg, twice] = two_of(xs[k]);
      rs.push_back(std::move(neg));
      rs.push_back(std::move(twice));
    }
  }
  branches b;
  for (auto& s : ss) b.sums.push_back(s.get());
  for (auto& r : rs) b.results.push_back(r.get());
  return b;
}

std::vector<std::vector<double>> inputs() {
  const std::size_t n = std::size_t{1} << 18;  // 2 MiB each, twice the budget
  return {ramp(n, 0.25), ramp(n + 1001, 0.5), ramp(n + 2002, 0.125), ramp(n + 3003, 1.0)};
}

std::vector<oa::stage_report> large_stages() {
  std::vector<oa::stage_report> out;
  for (const auto& r : oa::reports())
    if (r.units > 1) out.push_back(r);
  return out;
}

bool together(const oa::stage_report& r) { return contains(r.placement_reason, "together with stages"); }

}  // namespace

TEST_CASE("independent stages run together on one device: results and bytes those of one stage at a time") {
  const auto xs = inputs();
  branches serial, dag;
  std::vector<oa::stage_report> one, many;
  {
    config_scope cs(device(true));
    serial = run_branches(xs);
    one = large_stages();
  }
  {
    config_scope cs(device(false));
    dag = run_branches(xs);
    many = large_stages();
  }
  CHECK(dag.results == serial.results);
  // A reduction's bits follow its chunks, smaller in a share of the budget.
  REQUIRE(dag.sums.size() == serial.sums.size());
  for (std::size_t k = 0; k < dag.sums.size(); ++k) CHECK(dag.sums[k] == doctest::Approx(serial.sums[k]).epsilon(1e-14));
  REQUIRE(one.size() == many.size());
  std::size_t joined = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(!together(one[i]));
    joined += together(many[i]) ? 1 : 0;
    // Each stage's records are its own: the bytes it moved, whoever ran beside it.
    CHECK(many[i].h2d_bytes == one[i].h2d_bytes);
    // (Smaller shares mean more chunks: a reduction's partial per chunk.)
    const std::size_t partials = contains(one[i].calls.front(), "reduce") ? sizeof(double) : 0;
    CHECK(many[i].d2h_bytes - one[i].d2h_bytes == (many[i].chunks - one[i].chunks) * partials);
    CHECK(many[i].calls == one[i].calls);
    CHECK(many[i].device == one[i].device);
    if (together(many[i])) CHECK(many[i].peak_device_bytes <= budget / 2);
    CHECK(many[i].peak_device_bytes <= budget);
  }
  // Each sum with the pair of results beside it (its copies in fill the link's
  // way the pair leaves idle); stages 2 and 5, the sums' initial values, on the host.
  CHECK(joined == one.size());
  CHECK(contains(many[0].placement_reason, "together with stages 1, 3 on its streams"));
  CHECK(contains(many[2].placement_reason, "together with stages 4, 6 on its streams"));
}

TEST_CASE("a stage that reads what another writes waits for it; a later independent one goes ahead") {
  const auto xs = inputs();
  config_scope cs(device(false));
  oa::lazy<double> s = oa::stl::transform_reduce(xs[0], xs[0], 0.0);  // stage 1 (its init: stage 2, the host)
  std::vector<double> w = xs[2];
  checked_scale_oa(w, s);  // stage 3 reads s: after stages 1 and 2
  auto [neg, twice] = two_of(xs[1]);  // stage 4 conflicts with none: it goes ahead, with stage 1
  oa::evaluate();
  double ref = 0;
  for (double e : xs[0]) ref += e * e;
  REQUIRE(s.get() == doctest::Approx(ref).epsilon(1e-12));
  for (std::size_t i = 0; i < w.size(); i += 911) REQUIRE(w[i] == xs[2][i] * s.get());
  CHECK(neg.get().at(5) == -xs[1][5]);
  CHECK(twice.get().at(5) == xs[1][5] * 2);
  const auto reps = large_stages();
  REQUIRE(reps.size() == 3);
  CHECK(contains(reps[0].placement_reason, "together with stages 1, 4 "));
  CHECK(!together(reps[1]));
  CHECK(contains(reps[2].placement_reason, "together with stages 1, 4 "));
}

TEST_CASE("stages that would only share the link run one at a time; so do all without the link's rates") {
  const auto xs = inputs();
  for (const double link : {link_bound_gbps, 0.0})
    for (const bool with_results : {false, true}) {
      CAPTURE(link);
      CAPTURE(with_results);
      config_scope cs(device(false, link));
      // Sums of squares of two arrays: both only copy in.
      oa::lazy<double> a = oa::stl::transform_reduce(xs[0], xs[0], 0.0);
      oa::lazy<double> b = oa::stl::transform_reduce(xs[2], xs[2], 0.0);
      std::pair<oa::lazy<std::vector<double>>, oa::lazy<std::vector<double>>> results;
      if (with_results) results = two_of(xs[1]);  // copies out twice what it copies in: the link's other way
      oa::evaluate();
      std::size_t joined = 0;
      for (const auto& r : large_stages()) joined += together(r) ? 1 : 0;
      CHECK(joined == (link > 0 && with_results ? 2u : 0u));  // one sum and the pair
      CHECK(a.get() > 0);
      CHECK(b.get() > 0);
    }
}

TEST_CASE("faults in stages run together: re-runs on the host, results exact; a lost device sends later stages on") {
  const auto xs = inputs();
  branches ref;
  {
    config_scope cs(device(true));
    ref = run_branches(xs);
  }
  for (const char* fault : {"fail_launch=3", "fail_copy=4", "fail_launch=3:sticky=1", "fail_copy=6:sticky=1"}) {
    CAPTURE(fault);
    oa::config c = device(false);
    c.devices = "emulated:memory=1MiB:link_gbps=" + std::to_string(link_bound_gbps) + ":" + fault;
    config_scope cs(c);
    const branches got = run_branches(xs);
    CHECK(got.results == ref.results);
    for (std::size_t k = 0; k < got.sums.size(); ++k) CHECK(got.sums[k] == doctest::Approx(ref.sums[k]).epsilon(1e-14));
    std::size_t reruns = 0, joined = 0;
    bool lost = false;
    for (const auto& r : large_stages()) {
      reruns += r.host_reruns;
      joined += together(r) ? 1 : 0;
      lost = lost || !r.device_fault.empty();
    }
    CHECK(joined >= 2);
    CHECK(reruns >= 1);
    CHECK(lost == contains(fault, "sticky"));
  }
}

TEST_CASE("a call's error in a stage run together: its values fail, the caller's objects put back, the others complete") {
  const auto xs = inputs();
  std::vector<double> bad = xs[0], scaled = xs[2];
  bad[bad.size() - 5] = -1;  // in the last chunk: earlier chunks of it ran
  config_scope cs(device(false));
  oa::lazy<double> total = checked_total_oa(bad);  // copies in only: beside the pair's copies out
  auto [neg, twice] = two_of(xs[1]);
  checked_scale_oa(scaled, -1.0);  // an update of the caller's object: the error leaves it
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative element"), std::domain_error);
  CHECK_THROWS_WITH_AS(total.get(), doctest::Contains("negative element"), std::domain_error);
  CHECK(twice.get().at(7) == xs[1][7] * 2);
  CHECK(neg.get().at(7) == -xs[1][7]);
  for (std::size_t i = 0; i < scaled.size(); i += 877) REQUIRE(scaled[i] == -xs[2][i]);
  const auto reps = large_stages();
  REQUIRE(reps.size() == 3);
  CHECK(together(reps[0]));
  CHECK(together(reps[1]));
  CHECK(!reps[0].error.empty());
  CHECK(reps[1].error.empty());
  // And an update that fails part-way in a stage run together puts the
  // caller's object back: the update and a sum of another array in one stage
  // (it copies in twice what it copies out), beside a pair of results.
  std::vector<double> negative = xs[0];
  negative[negative.size() - 9] = -3;
  const std::vector<double> before = negative;
  checked_scale_oa(negative, 2.0);
  oa::lazy<double> other = oa::stl::transform_reduce(xs[0], xs[0], 0.0);
  auto [neg2, twice2] = two_of(xs[3]);
  oa::clear_reports();
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative element"), std::domain_error);
  CHECK(negative == before);
  CHECK(other.get() > 0);  // the call that threw fails alone: the stage's others ran again
  CHECK(twice2.get().at(3) == xs[3][3] * 2);
  const auto again = large_stages();
  REQUIRE(again.size() == 2);
  CHECK(together(again[0]));
  CHECK(together(again[1]));
  CHECK(!again[0].error.empty());
  CHECK(again[1].error.empty());
}

TEST_CASE("stages that would leave a copy on the device for later run alone: no byte crosses the link twice") {
  // Copies a stage leaves alone (a value that fits half the budget, kept for
  // later stages and evaluations; a product's result read by a later stage)
  // would be lost beside others: each stage moves the bytes it moves alone.
  const std::vector<double> small(std::size_t{1} << 19, 1.5);  // 4 MiB: fits half the 8 MiB budget
  const std::vector<double> large = ramp(std::size_t{1} << 20, 0.5);  // 8 MiB: does not
  const Eigen::MatrixXd a = Eigen::MatrixXd::Constant(96, 64, 0.5), b = Eigen::MatrixXd::Constant(64, 80, 0.25);
  struct bytes {
    std::size_t h2d, d2h;
    bool together;
  };
  const auto program = [&](bool serial) {
    oa::config c = device(serial);
    c.device_memory = std::size_t{8} << 20;
    config_scope cs(c);
    std::vector<std::vector<bytes>> evaluations;
    std::vector<double> x = small;
    for (int e = 0; e < 2; ++e) {  // the second evaluation may read the first's kept copies
      oa::clear_reports();
      oa::lazy<double> s = oa::stl::reduce(x, 0.0);  // x kept whole, for the update below and the next evaluation
      auto [neg, twice] = two_of(large);            // copies out twice what it copies in: it would pair
      oa::lazy<Eigen::MatrixXd> r = scale_matrix_oa(oa::linalg::product(a, b), 3.0);  // the product's result stays
      checked_scale_oa(x, s);  // reads the sum: a later stage, reading x's copy in place
      oa::evaluate();
      CHECK(s.get() == doctest::Approx(1.5 * static_cast<double>(small.size()) * (e == 0 ? 1 : 786432)));
      CHECK(r.get()(3, 4) == doctest::Approx(3 * 64 * 0.125));
      CHECK(twice.get().at(9) == large[9] * 2);
      std::vector<bytes> per_stage;
      for (const auto& rep : large_stages()) per_stage.push_back({rep.h2d_bytes, rep.d2h_bytes, together(rep)});
      evaluations.push_back(per_stage);
    }
    return evaluations;
  };
  const auto one = program(true), dag = program(false);
  REQUIRE(one.size() == dag.size());
  for (std::size_t e = 0; e < one.size(); ++e) {
    REQUIRE(one[e].size() == dag[e].size());
    for (std::size_t i = 0; i < one[e].size(); ++i) {
      CAPTURE(e);
      CAPTURE(i);
      CHECK(dag[e][i].h2d == one[e][i].h2d);
      CHECK(dag[e][i].d2h == one[e][i].d2h);
    }
  }
}

TEST_CASE("a copy that a streaming stage evicts before its reader each evaluation stops keeping its stage alone") {
  // A stage reading a value that fits half the budget keeps a copy of it for
  // the next evaluation; alone, as long as such a copy may be read there.
  // When the stage before it streams more than the budget, the copy is
  // evicted unread: from then on the stage runs beside that one. A copy
  // that is read keeps its stage alone, reading it in place.
  // (A budget of 4 MiB: in a share of a smaller one, the chunks' latency
  // would take what running together gains.)
  const std::vector<double> small = ramp((std::size_t{1} << 18) - 1024, 0.25);  // 2 MiB less 8 KiB: fits half
  const std::vector<double> large = ramp(std::size_t{5} << 17, 0.5);  // 5 MiB in, 10 MiB out: streams through it
  double ref = 0;
  for (double e : small) ref += e * e;
  for (const bool streaming : {true, false}) {
    CAPTURE(streaming);
    oa::config c = device(false);
    c.device_memory = std::size_t{4} << 20;
    config_scope cs(c);
    std::vector<bool> joined;
    std::vector<std::size_t> small_h2d;
    for (int e = 0; e < 4; ++e) {
      oa::clear_reports();
      std::optional<std::pair<oa::lazy<std::vector<double>>, oa::lazy<std::vector<double>>>> pair;
      if (streaming) pair.emplace(two_of(large));  // first in program order: it evicts what is kept
      oa::lazy<double> sum = oa::stl::transform_reduce(small, small, 0.0);
      oa::evaluate();
      CHECK(sum.get() == doctest::Approx(ref).epsilon(1e-14));
      if (pair) CHECK(pair->second.get().at(77) == large[77] * 2);
      const auto reps = large_stages();
      REQUIRE(reps.size() == (streaming ? 2u : 1u));
      joined.push_back(together(reps.back()));
      small_h2d.push_back(reps.back().h2d_bytes);
    }
    if (streaming) {
      // Evaluation 1 finds the first's copy evicted; from the third on, the two run together.
      CHECK(joined == std::vector<bool>{false, false, true, true});
    } else {
      CHECK(joined == std::vector<bool>{false, false, false, false});
      CHECK(small_h2d[0] >= small.size() * sizeof(double));
      for (int e = 1; e < 4; ++e) CHECK(small_h2d[static_cast<std::size_t>(e)] < small.size() * sizeof(double));
    }
  }
}

TEST_CASE("the time model of stages together: kernels' busy times add up beside the link's bytes") {
  // A link of 1 GB/s each way; a stage that only copies in 64 MB, and one
  // that copies 32 MB each way.
  oa::device_rates r;
  r.h2d = r.d2h = 1e9;
  const oa::detail::stage_cost streams{"streams", 64e6, 64e6, 0}, both{"both", 64e6, 32e6, 32e6};
  const auto t = [&](std::vector<oa::detail::stage_cost> cs, std::vector<double> k) {
    std::vector<oa::detail::member_cost> ms;
    for (std::size_t i = 0; i < cs.size(); ++i) ms.push_back({cs[i], k[i]});
    return oa::detail::predicted_seconds(ms, 8e6, 2, r);
  };
  // Without kernels: alone 64 ms and 32 ms (and their ends); together the
  // copies in add up to 96 ms: nothing gained but the other way's ends.
  const double a = t({streams}, {0}), b = t({both}, {0}), ab = t({streams, both}, {0, 0});
  CHECK(a == doctest::Approx(0.064));
  CHECK(ab >= 0.9 * (a + b));
  // When the second's kernels take 80 ms (a sort's runs), it alone takes
  // them; beside the first, the copies hide under them: 96 ms, not 144.
  const double bk = t({both}, {0.08}), abk = t({streams, both}, {0, 0.08});
  CHECK(bk >= 0.08);
  CHECK(abk < 0.8 * (a + bk));
  CHECK(abk >= 0.096);
  // Two stages whose kernels bound both share them: no gain.
  CHECK(t({both, both}, {0.08, 0.08}) >= 0.16);
}

TEST_CASE("placed by cost, stages still run together; what they measure together teaches the models nothing") {
  const auto xs = inputs();
  branches serial;
  std::vector<oa::stage_report> alone;
  {
    config_scope cs(device(true));
    serial = run_branches(xs);
    alone = oa::reports();
  }
  // Models that put every stage on the device: a host far slower than it.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("oa_dag_cost_" + std::to_string(::getpid()) + ".json")).string();
  oa::detail::perf_models seeded;
  std::vector<std::string> ops;
  for (const auto& r : alone) {
    std::string op;
    for (const auto& call : r.calls) op += (op.empty() ? "" : " + ") + call;
    ops.push_back(op);
    for (const double bytes : {1e3, 1e3, 1e9, 1e9}) {
      seeded.record(op, "host", bytes, bytes * 1e-6);
      seeded.record(op, "emulated", bytes, 1e-6);
    }
  }
  seeded.save(path);
  oa::config c = device(false);
  c.placement = "cost";
  c.perf_models = path;
  branches dag;
  std::vector<oa::stage_report> reps;
  {
    config_scope cs(c);
    dag = run_branches(xs);
    reps = oa::reports();
  }
  CHECK(dag.results == serial.results);
  REQUIRE(dag.sums.size() == serial.sums.size());
  for (std::size_t k = 0; k < dag.sums.size(); ++k) CHECK(dag.sums[k] == doctest::Approx(serial.sums[k]).epsilon(1e-14));
  oa::detail::perf_models learned;
  learned.load(path);
  std::size_t joined = 0;
  REQUIRE(reps.size() == alone.size());
  for (std::size_t i = 0; i < reps.size(); ++i) {
    CAPTURE(reps[i].placement_reason);
    if (reps[i].units <= 1) continue;
    CHECK(reps[i].device == "emulated");
    CHECK(contains(reps[i].placement_reason, "cost model: host"));
    joined += together(reps[i]) ? 1 : 0;
  }
  CHECK(joined == 4);
  // A stage run together took its share's time: not learned. (Each kind of
  // stage is two of the four branches.)
  for (std::size_t i = 0; i < reps.size(); ++i) {
    std::size_t alone_of_op = 0;
    for (std::size_t k = 0; k < reps.size(); ++k)
      alone_of_op += ops[k] == ops[i] && reps[k].device == "emulated" && !together(reps[k]) ? 1 : 0;
    CHECK(learned.samples(ops[i], "emulated") - seeded.samples(ops[i], "emulated") == alone_of_op);
  }
  std::filesystem::remove(path);
}

TEST_CASE("placed by cost, a stage calibrating runs alone; once its models predict, it joins others") {
  const auto xs = inputs();
  std::vector<oa::stage_report> alone;
  {
    config_scope cs(device(true));
    (void)run_branches(xs);
    alone = oa::reports();
  }
  // The host measured (far slower than the device will be), the device not yet.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("oa_dag_calibrate_" + std::to_string(::getpid()) + ".json")).string();
  struct removed {
    std::string path;
    ~removed() { std::filesystem::remove(path); }
  } cleanup{path};
  oa::detail::perf_models seeded;
  for (const auto& r : alone) {
    std::string op;
    for (const auto& call : r.calls) op += (op.empty() ? "" : " + ") + call;
    for (const double bytes : {1e3, 1e3, 1e9, 1e9}) seeded.record(op, "host", bytes, bytes * 1e-6);
  }
  seeded.save(path);
  oa::config c = device(false);
  c.placement = "cost";
  c.perf_models = path;
  config_scope cs(c);
  std::vector<std::size_t> calibrating, joined;
  for (int e = 0; e < 3; ++e) {
    oa::clear_reports();
    (void)run_branches(xs);
    calibrating.push_back(0), joined.push_back(0);
    for (const auto& r : large_stages()) {
      CAPTURE(e);
      CAPTURE(r.placement_reason);
      CHECK(r.device == "emulated");
      const bool measuring = contains(r.placement_reason, "calibrating");
      CHECK(!(measuring && together(r)));
      calibrating.back() += measuring ? 1 : 0;
      joined.back() += together(r) ? 1 : 0;
    }
  }
  // Each kind of stage (a sum, a pair) measured twice in the first evaluation
  // (two branches each): the next ones are placed by prediction, together.
  CHECK(calibrating == std::vector<std::size_t>{4, 0, 0});
  CHECK(joined == std::vector<std::size_t>{0, 4, 4});
}

TEST_CASE("the kernels' busy time is learned from a stage run alone and whole; not from one re-run in part, nor together") {
  const auto xs = inputs();
  const auto kernel_times = [](const std::string& op, double bytes) {
    oa::detail::runtime_state& st = oa::detail::current_graph()->runtime();
    const std::lock_guard lock(st.mutex);
    return std::pair{st.kernel_times.samples(op, "emulated:0"), st.kernel_times.predict(op, "emulated:0", bytes)};
  };
  const auto op_of = [](const oa::stage_report& r) {
    std::string op;
    for (const auto& call : r.calls) op += (op.empty() ? "" : " + ") + call;
    return op;
  };
  const auto sum_alone = [&] {
    oa::clear_reports();
    (void)oa::stl::transform_reduce(xs[0], xs[0], 0.0).get();
    const auto reps = large_stages();
    REQUIRE(reps.size() == 1);
    CHECK(reps[0].device == "emulated:0");
    const auto [n, predicted] = kernel_times(op_of(reps[0]), static_cast<double>(reps[0].h2d_bytes));
    return std::tuple{reps[0], n, predicted};
  };
  // Twice alone and whole: two samples, the faster one predicted (by the
  // bytes the stage touches: its input, and its partial sums' few).
  oa::config c = device(true);
  c.devices = "emulated:memory=1MiB:link_gbps=" + std::to_string(link_bound_gbps);
  config_scope cs(c);
  const auto [first, n1, p1] = sum_alone();
  const auto [second, n2, p2] = sum_alone();
  CHECK(n1 == 1);
  CHECK(!p1);  // one sample is not trusted
  CHECK(n2 == 2);
  REQUIRE(p2);
  CHECK(first.compute_seconds > 0);
  CHECK(*p2 == doctest::Approx(std::min(first.compute_seconds, second.compute_seconds)).epsilon(1e-3));
  // A chunk re-run on the host: the device's kernels did not run it all.
  oa::config faulty = c;
  faulty.devices += ":fail_launch=2";
  config_scope faulty_scope(faulty);  // new devices: their times start afresh
  const auto [rerun, n3, p3] = sum_alone();
  CHECK(rerun.host_reruns >= 1);
  CHECK(n3 == 0);
  // Together with another stage: its share's busy time is not its own.
  oa::config dag = c;
  dag.serial_stages = false;
  config_scope together_scope(dag);
  oa::clear_reports();
  auto [neg, twice] = two_of(xs[1]);
  oa::lazy<double> s = oa::stl::transform_reduce(xs[0], xs[0], 0.0);
  oa::evaluate();
  const auto reps = large_stages();
  REQUIRE(reps.size() == 2);
  for (const auto& r : reps) {
    CAPTURE(r.placement_reason);
    CHECK(together(r));
    CHECK(kernel_times(op_of(r), static_cast<double>(r.h2d_bytes)).first == 0);
  }
}

TEST_CASE("a host stage goes as soon as its inputs are made, beside the device's independent work") {
  // A score, a sort whose runs go to the device and whose merge is the
  // host's, and a prefix sum: in program order the merge would come last,
  // with nothing left to run beside it. The score and the sum read a
  // sixteenth as much: their stages end while the merge runs (tens of ms).
  // (A sort's run takes 7 MiB of the device: a budget of 8.)
  const std::size_t n = std::size_t{1} << 22, budget8 = std::size_t{8} << 20;  // 8 MiB: runs, then a merge
  const std::vector<double> x = ramp(n / 16, 0.75), w = ramp(n / 16, 0.5);
  std::vector<double> unsorted(n);
  for (std::size_t i = 0; i < n; ++i) unsorted[i] = static_cast<double>((i * 7919) % n);
  struct results {
    double score;
    std::vector<double> ranked, trend;
  };
  const auto run = [&] {
    results r{0, unsorted, {}};
    oa::lazy<double> score = oa::stl::transform_reduce(x, w, 0.0);
    oa::stl::sort(r.ranked);
    auto trend = oa::stl::inclusive_scan(x, std::plus<>{});
    oa::evaluate();  // one evaluation of the three, as bench/dag_bench.cpp's
    r.score = score.get();
    r.trend = trend.get();
    return r;
  };
  results one;
  {
    oa::config c = oa_test::emulated_config(budget8, 1.0);
    c.serial_stages = true;
    config_scope cs(c);
    one = run();
  }
  const std::string trace =
      (std::filesystem::temp_directory_path() / ("oa-test-host-beside-" + std::to_string(getpid()) + ".json")).string();
  oa::config c = oa_test::emulated_config(budget8, 1.0);
  c.trace = trace;
  results dag;
  {
    config_scope cs(c);
    dag = run();
    for (const auto& r : oa::reports()) {
      CAPTURE(r.calls.front());
      CAPTURE(r.placement_reason);
      if (contains(r.calls.front(), "sort (runs)")) CHECK(r.device == "emulated");  // as on a GPU
      if (contains(r.calls.front(), "sort (merge)")) CHECK(r.device == "host");
    }
    oa::runtime::current().write_outputs();
  }
  CHECK(dag.ranked == one.ranked);
  CHECK(dag.trend == one.trend);
  CHECK(dag.score == doctest::Approx(one.score).epsilon(1e-14));
  CHECK(std::is_sorted(dag.ranked.begin(), dag.ranked.end()));

  // On the trace's one clock: the runs went to the device before the score
  // (the merge waits for them, the score for nothing), and the merge began
  // on the host while the device worked for the other calls.
  std::ifstream in(trace);
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  if (!std::getenv("OA_TEST_KEEP_TRACE")) std::filesystem::remove(trace);
  std::map<int, std::string> process;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name") process[e.at("pid").get<int>()] = e.at("args").at("name");
  std::vector<std::pair<double, double>> merge, others;
  double runs_begin = 1e300, score_begin = 1e300, scan_begin = 1e300;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.contains("args") || !e.at("args").contains("stage")) continue;
    const std::string stage = e.at("args").at("stage"), where = process.at(e.at("pid").get<int>());
    const double begin = e.at("ts").get<double>(), end = begin + e.at("dur").get<double>();
    // The merge on the host device beside the devices (its own tracks), the
    // rest on the emulated device.
    const bool device = where.rfind("host", 0) != 0;
    if (where == "host, beside the devices" && contains(stage, "sort (merge)")) merge.emplace_back(begin, end);
    if (device && !contains(stage, "sort")) others.emplace_back(begin, end);
    if (device && contains(stage, "sort (runs)")) runs_begin = std::min(runs_begin, begin);
    if (device && contains(stage, "transform_reduce")) score_begin = std::min(score_begin, begin);
    if (device && contains(stage, "scan")) scan_begin = std::min(scan_begin, begin);
  }
  CHECK(runs_begin < score_begin);
  REQUIRE(!merge.empty());
  REQUIRE(!others.empty());
  // (The merge may take a millisecond on a machine of many cores: that it
  // began before the device's work for the others ended is what the order
  // decides.)
  double merge_begins = merge.front().first, others_end = 0;
  for (const auto& m : merge) merge_begins = std::min(merge_begins, m.first);
  for (const auto& o : others) others_end = std::max(others_end, o.second);
  // The sum's first stage, its initial value, is the host's too: it runs on
  // the evaluating thread while the merge runs on the lane's host device,
  // and the sum's passes go to the device before the merge ends (they
  // waited for it, on a GPU: bench/results/2026-11-27-h100).
  double merge_ends = 0;
  for (const auto& m : merge) merge_ends = std::max(merge_ends, m.second);
  INFO("the merge on the host from " << merge_begins << " to " << merge_ends << " us; the sum's passes from "
                                      << scan_begin << ", the device's other work until " << others_end);
  CHECK(scan_begin < merge_ends);
  // The merge and the device's work for the others overlapped (the score and
  // the sum take a sixteenth of the merge's data: the merge may begin after
  // their first copies, not after the last).
  CHECK(merge_begins < others_end);
}

/// m += 1 in place, on the host only: a library function with no device version.
inline constexpr auto bump_cols_oa = oa::annotate<"test::bump_cols">(
    oa::cpu([](auto& m) { m.array() += 1.0; }), oa::args(oa::mut<oa::split::cols>("m")));

TEST_CASE("a host stage run ahead of program order leaves the copies earlier stages still read") {
  // The product's result stays on the device for the scaling after it; the
  // host's update of B must follow the product (which reads B), not the
  // scaling, so it goes first, ahead of the scaling: the result's copy is
  // still the scaling's to read (its host storage never held it).
  const Eigen::MatrixXd a = Eigen::MatrixXd::Constant(512, 512, 0.5);
  const auto run = [&](bool serial) {
    oa::config c = oa_test::emulated_config(std::size_t{8} << 20, 1.0);
    c.serial_stages = serial;
    config_scope cs(c);
    Eigen::MatrixXd b = Eigen::MatrixXd::Constant(512, 512, 0.25);  // 2 MiB
    oa::lazy<Eigen::MatrixXd> r = scale_matrix_oa(oa::linalg::product(a, b), 3.0);
    bump_cols_oa(b);
    oa::evaluate();
    std::vector<std::string> where;
    for (const auto& rep : oa::reports()) where.push_back(rep.calls.front() + " on " + rep.device);
    return std::make_tuple(r.get(), Eigen::MatrixXd(b), where);
  };
  const auto [r1, b1, where1] = run(true);
  const auto second = run(false);
  const auto& [r2, b2, where2] = second;
  CAPTURE(std::get<2>(second));
  CHECK(r1(3, 4) == doctest::Approx(3 * 512 * 0.125));
  CHECK(r2 == r1);
  CHECK(b2 == b1);
  CHECK(b2(7, 9) == 1.25);
  REQUIRE(where2.size() == 3);
  CHECK(contains(where2[2], "test::bump_cols on host"));
}

TEST_CASE("a product placed on the host runs beside the device's work as a product") {
  // Below the threshold the product goes to the host; a megabyte and more of
  // data makes it worth starting first, beside the device's streams.
  const Eigen::MatrixXd a = Eigen::MatrixXd::Constant(256, 256, 0.5), b = Eigen::MatrixXd::Constant(256, 256, 0.25);
  const std::vector<double> x = ramp(std::size_t{1} << 18, 0.5), z = ramp((std::size_t{1} << 18) + 1001, 0.25);
  oa::config c = oa_test::emulated_config(std::size_t{8} << 20, 1.0);
  c.host_threshold = std::size_t{2} << 20;  // the product's 1.5 MiB below it, the transforms' 4 MiB above
  config_scope cs(c);
  auto neg = oa::stl::transform(x, std::negate<>{});
  oa::lazy<Eigen::MatrixXd> p = oa::linalg::product(a, b);
  auto twice = oa::stl::transform(z, z, std::plus<>{});
  oa::evaluate();
  CHECK(p.get()(5, 7) == doctest::Approx(256 * 0.125));
  CHECK(neg.get().at(11) == -x[11]);
  CHECK(twice.get().at(13) == z[13] * 2);
  std::vector<std::string> where;
  for (const auto& r : oa::reports()) where.push_back(r.calls.front() + " on " + r.device);
  CAPTURE(where.size());
  REQUIRE(where.size() == 3);
  CHECK(where[0] == "std::transform on emulated");
  CHECK(where[1] == "oa::linalg::product on host");
  CHECK(where[2] == "std::transform (binary) on emulated");
}

namespace {

std::atomic<int> results_made{0};

std::mutex made_mutex;
std::vector<std::size_t> made_units;

std::shared_ptr<void> make_slowly(const oa::split::shape& s, const void*, void*& object) {
  {
    std::lock_guard lock(made_mutex);
    made_units.push_back(s.units);
  }
  ++results_made;
  std::this_thread::sleep_for(std::chrono::milliseconds(s.units == 1000 ? 200 : 20));  // a: long
  auto v = std::make_shared<std::vector<double>>(s.units);
  object = v.get();
  return v;
}

std::atomic<int> makes_failed{0};

std::shared_ptr<void> make_failing(const oa::split::shape&, const void*, void*&) {
  ++makes_failed;
  throw std::bad_alloc();
}

constexpr oa::detail::value_ops slow_ops{"test::slow", oa::split::split_kind::partitioned, nullptr, nullptr, nullptr,
                                         &make_slowly, nullptr, 0};
constexpr oa::detail::value_ops failing_ops{"test::failing", oa::split::split_kind::partitioned, nullptr, nullptr,
                                            nullptr, &make_failing, nullptr, 0};

}  // namespace

TEST_CASE("results made ahead: taken once made, waited for while made, left to the stage when not begun or failed") {
  oa::detail::value_state a, b, c, d, e;
  for (oa::detail::value_state* v : {&a, &b, &c, &e}) v->ops = &slow_ops, v->shape = {1000, 1, sizeof(double)};
  c.shape.units = 3000;  // told apart by their lengths
  d.ops = &failing_ops;
  b.shape.units = 2000;
  results_made = 0;
  makes_failed = 0;
  made_units.clear();
  {
    oa::detail::results_ahead ahead;
    ahead.queue({&a, &d, &b, &c});
    ahead.queue({&a});  // queued once
    // c is still queued (a takes 200 ms): its stage makes it, the thread no longer will.
    CHECK_FALSE(ahead.take(&c).has_value());
    while (results_made == 0) std::this_thread::yield();
    const auto ma = ahead.take(&a);  // being made: waits for it
    REQUIRE(ma.has_value());
    CHECK(ma->object == ma->owned.get());
    CHECK(static_cast<std::vector<double>*>(ma->object)->size() == 1000);
    CHECK_FALSE(ahead.take(&a).has_value());  // taken once
    while (makes_failed == 0) std::this_thread::yield();
    CHECK_FALSE(ahead.take(&d).has_value());  // its making failed: the stage meets the error itself
    CHECK_FALSE(ahead.take(&e).has_value());  // never asked for
    while (results_made < 2) std::this_thread::yield();
    // b is made and never taken: freed with the rest (ASan's leak check).
  }
  std::lock_guard lock(made_mutex);
  CHECK(made_units == std::vector<std::size_t>{1000, 2000});  // a, then b; not c
}

TEST_CASE("a later stage's large result is made ahead while the stage before runs; one at a time, it is not") {
  // A total over x, then a matrix scaled by it (8 MiB): the second follows
  // the first (it reads its total), and its result is the one made on a
  // stage's path (a "results made" span in the trace) one stage at a time;
  // running stages together it was made while the total ran.
  const std::vector<double> x = ramp(std::size_t{1} << 20, 0.25);
  const Eigen::MatrixXd m = Eigen::MatrixXd::Random(1024, 1024);
  const auto made_spans = [&](bool serial) {
    oa::config c = oa_test::emulated_config(std::size_t{8} << 20, 0.25);  // the total: ~32 ms
    c.serial_stages = serial;
    c.trace = (std::filesystem::temp_directory_path() /
               ("oa-test-ahead-" + std::to_string(getpid()) + (serial ? "-serial" : "") + ".json"))
                  .string();
    Eigen::MatrixXd scaled;
    double total = 0;
    {
      config_scope cs(c);
      oa::lazy<double> t = checked_total_oa(x);
      oa::lazy<Eigen::MatrixXd> s = scale_matrix_oa(m, t);
      oa::evaluate();
      total = t.get();
      scaled = s.get();
      oa::runtime::current().write_outputs();
    }
    CHECK(total == doctest::Approx(std::accumulate(x.begin(), x.end(), 0.0)).epsilon(1e-12));
    CHECK(scaled == m * total);
    std::ifstream in(c.trace);
    REQUIRE(in.good());
    const nlohmann::json j = nlohmann::json::parse(in);
    in.close();
    std::filesystem::remove(c.trace);
    int spans = 0;
    for (const auto& ev : j.at("traceEvents")) spans += ev.at("ph") == "X" && ev.at("name") == "results made";
    return spans;
  };
  CHECK(made_spans(true) == 1);
  // (The thread that makes it must have begun before the total ends: a
  // machine too loaded to start it in 32 ms gets two more tries.)
  int together = made_spans(false);
  for (int retry = 0; retry < 2 && together != 0; ++retry) together = made_spans(false);
  CHECK(together == 0);
}
