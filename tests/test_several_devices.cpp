// Several devices (OA_DEVICES): a stage's chunks are shared by every device
// not lost, each at the rate it shows; results are those of one device bit
// for bit; a device that fails leaves its chunks to the others; a call's
// error puts every caller's object back. Emulated devices of different
// links stand for GPUs of different speeds: the same engine code.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Core>
#include <oa/annotations/stl.hpp>
#include <oa/linalg/gemm.hpp>
#include <oa/oa.hpp>

#include "core/chunk_feed.hpp"
#include "stderr_capture.hpp"
#include "support.hpp"

using oa_test::config_scope;
using oa_test::checked_scale_oa;
using oa_test::contains;

namespace {

std::vector<double> ramp(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5 + static_cast<double>(i % 1013) * 0.25;
  return v;
}

/// Two (or more) emulated devices of `budget` bytes each, from OA_DEVICES specs.
oa::config devices(const std::string& specs, const std::string& spread = "balanced") {
  oa::config c = oa_test::emulated_config(std::size_t{1} << 20);
  c.devices = specs;
  c.spread = spread;
  return c;
}

struct outcome {
  std::vector<double> y;
  double sum = 0;
};

/// y = -x, then the sum of y * y: an element-wise stage and a reduction.
outcome run(const std::vector<double>& x) {
  outcome o;
  oa::lazy<std::vector<double>> y = oa::stl::transform(x, std::negate<>{});
  oa::lazy<double> s = oa::stl::transform_reduce(y, y, 0.0);
  o.sum = s.get();
  o.y = y.get();
  return o;
}

/// The stages over the whole data (not the fold of a reduction's init, a
/// one-unit stage on the host).
std::vector<oa::stage_report> large_stages() {
  std::vector<oa::stage_report> out;
  for (const auto& r : oa::reports())
    if (r.units > 1) out.push_back(r);
  return out;
}

/// The same on one emulated device.
outcome on_one_device(const std::vector<double>& x) {
  config_scope cs(oa_test::emulated_config(std::size_t{1} << 20));
  return run(x);
}

std::size_t chunks_of(const oa::stage_report& r, const std::string& device) {
  for (const auto& [name, n] : r.chunks_by_device)
    if (name == device) return n;
  return 0;
}

}  // namespace

TEST_CASE("OA_DEVICES: specs read, bad ones refused naming the spec and the part") {
  const auto specs = oa::parse_device_specs("emulated:memory=32MiB:link_gbps=2,emulated:link_gbps=8:latency_us=3,cuda:1",
                                            "OA_DEVICES");
  REQUIRE(specs.size() == 3);
  CHECK(specs[0].kind == "emulated");
  CHECK(specs[0].memory == std::size_t{32} << 20);
  CHECK(specs[0].link_gbps == 2.0);
  CHECK(!specs[1].memory);
  CHECK(specs[1].link_gbps == 8.0);
  CHECK(specs[1].latency_us == 3.0);
  CHECK(specs[2].kind == "cuda");
  CHECK(specs[2].ordinal == 1);
  const std::pair<const char*, const char*> bad[] = {
      {"gpu", "unknown device kind 'gpu'"},
      {"host", "host takes a share of the devices' stages: list at least one device"},
      {"emulated,host:fast", "host takes no keys"},
      {"host,emulated,host", "host is listed twice"},
      {"emulated:speed=3", "unknown key 'speed' for device kind emulated"},
      {"emulated:memory=1MiB:memory=2MiB", "key 'memory' is given twice"},
      {"cuda:-1", "'-1' is not a GPU number"},
      {"cuda:2000", "'2000' is not a GPU number"},
      {"emulated:link_gbps=fast", "link_gbps=fast is not a number from 0 to 1e6"},
      {"emulated:link_gbps=-1", "is not a number from 0 to 1e6"},
      {"emulated:memory=lots", "memory"},
      {"emulated:memory=0", "memory=0"},
      {"emulated:2", "'2' is not key=value"},
      {"cuda:0,cuda:0", "GPU 0 is listed twice"},
      {"cuda:link_gbps=2", "unknown key 'link_gbps' for device kind cuda"},
      {"emulated,,emulated", "a device spec is kind[:key=value]..."},
      {"emulated, emulated", "with no spaces"},
      {"emulated:sticky=2", "sticky=2 is not 0 or 1"},
  };
  for (const auto& spec : bad) {
    const auto& [text, says] = spec;
    CAPTURE(spec.first);
    const std::string msg = oa_test::message_of([&, text = text] { (void)oa::parse_device_specs(text, "OA_DEVICES"); });
    CHECK(contains(msg, "oa: OA_DEVICES: '"));
    CHECK(contains(msg, says));
  }
}

TEST_CASE("two devices share a stage's chunks: results bit for bit those of one device") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);  // 8 MiB: 8 times each device's budget
  const outcome one = on_one_device(x);
  config_scope cs(devices("emulated,emulated"));
  const outcome two = run(x);
  CHECK(two.y == one.y);
  CHECK(two.sum == one.sum);  // partials merged in chunk order, whoever ran each chunk
  const auto reps = large_stages();
  REQUIRE(!reps.empty());
  for (const auto& r : reps) {
    CAPTURE(r.device);
    CAPTURE(r.calls.front());
    CAPTURE(r.placement_reason);
    CHECK(r.device == "emulated:0 + emulated:1");
    REQUIRE(r.chunks_by_device.size() == 2);
    CHECK(chunks_of(r, "emulated:0") >= 1);
    CHECK(chunks_of(r, "emulated:1") >= 1);
    CHECK(chunks_of(r, "emulated:0") + chunks_of(r, "emulated:1") == r.chunks);
    CHECK(r.device_chunks == r.chunks);
    CHECK(r.host_reruns == 0);
  }
  CHECK(oa::runtime::current().devices().size() == 2);
}

TEST_CASE("a device four times faster takes about four times the chunks, and beats an even split") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  std::vector<double> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = -x[i];
  // Links of 0.05 and 0.2 GB/s: 8 MiB each way is about 168 and 42 ms, far
  // more than negating it takes, even on a loaded machine.
  const std::string specs = "emulated:link_gbps=0.05,emulated:link_gbps=0.2";
  double balanced_seconds = 0, even_seconds = 0;
  oa::stage_report balanced, even;
  for (const char* spread : {"balanced", "even"}) {
    config_scope cs(devices(specs, spread));
    CHECK(oa::stl::transform(ramp(4096), std::negate<>{}).get()[0] == -0.5);  // devices made outside the timing
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      oa::clear_reports();
      CHECK(oa::stl::transform(x, std::negate<>{}).get() == want);
      const auto r = oa::reports();
      REQUIRE(r.size() == 1);
      if (r[0].seconds < best) {
        best = r[0].seconds;
        (std::string(spread) == "balanced" ? balanced : even) = r[0];
      }
    }
    (std::string(spread) == "balanced" ? balanced_seconds : even_seconds) = best;
  }
  const double slow = static_cast<double>(chunks_of(balanced, "emulated:0"));
  const double fast = static_cast<double>(chunks_of(balanced, "emulated:1"));
  MESSAGE("balanced: " << slow << " and " << fast << " chunks, " << balanced_seconds << " s; even: "
                       << chunks_of(even, "emulated:0") << " and " << chunks_of(even, "emulated:1") << " chunks, "
                       << even_seconds << " s");
  CHECK(chunks_of(even, "emulated:0") + 1 >= chunks_of(even, "emulated:1"));  // even: i mod 2
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer slows compute past the links: the devices then finish
  // chunks at the same rate, and no timing claim holds.
  MESSAGE("rate and timing checks skipped under ThreadSanitizer");
  return;
#elif defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer slows each chunk's host work (copies, the kernel on the
  // host's cores), which both devices pay alike: the faster link still
  // takes more chunks and wins, by less (2.0-2.4x measured, 4.3x without).
  CHECK(fast > slow);
  CHECK(balanced_seconds < even_seconds);
  return;
#endif
  CHECK(fast >= 2 * std::max(slow, 1.0));  // 3-3.5x on an idle machine, less under load
  CHECK(fast <= 8 * std::max(slow, 1.0));
  CHECK(balanced_seconds < 0.85 * even_seconds);
}

TEST_CASE("a device lost mid-stage: its chunks go to the other, the results exact, later stages without it") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  for (const char* fault : {"fail_launch=3:sticky=1", "fail_copy=5:sticky=1"}) {
    CAPTURE(fault);
    config_scope cs(devices(std::string("emulated,emulated:") + fault));
    const outcome two = run(x);
    CHECK(two.y == one.y);
    CHECK(two.sum == one.sum);
    const auto reps = large_stages();
    REQUIRE(reps.size() == 1);
    CHECK(contains(reps[0].device_fault, "emulated device emulated:1: lost after an injected fault"));
    CHECK(reps[0].device_chunks + reps[0].host_reruns == reps[0].chunks);
    CHECK(reps[0].host_reruns >= 1);
    CHECK(reps[0].host_reruns <= 4);  // only what was queued on the lost device
    CHECK(chunks_of(reps[0], "emulated:0") > chunks_of(reps[0], "emulated:1"));
    // A later evaluation runs on the device left.
    oa::clear_reports();
    CHECK(run(x).sum == one.sum);
    const auto later = large_stages();
    REQUIRE(later.size() == 1);
    CHECK(later[0].device == "emulated:0");
    CHECK(later[0].device_fault.empty());
  }
}

TEST_CASE("a transient fault on one of two devices: its chunk re-runs on the host, both go on") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  // A launch, a copy, and the staging engine's fill and drain of pageable memory.
  for (const char* fault : {"fail_launch=2", "fail_copy=3", "fail_fill=3", "fail_drain=2"}) {
    CAPTURE(fault);
    config_scope cs(devices(std::string("emulated,emulated:") + fault));
    const outcome two = run(x);
    CHECK(two.y == one.y);
    CHECK(two.sum == one.sum);
    const auto reps = large_stages();
    REQUIRE(reps.size() == 1);
    CHECK(reps[0].host_reruns == 1);
    CHECK(reps[0].device_fault.empty());
    oa::clear_reports();
    CHECK(run(x).sum == one.sum);
    CHECK(large_stages().at(0).device == "emulated:0 + emulated:1");
  }
}

TEST_CASE("a call's error on two devices: the caller's object put back whole, the error reaches the caller") {
  std::vector<double> x = ramp(std::size_t{1} << 19);
  x[x.size() - 7] = -1;  // in the last chunk: earlier chunks ran, on both devices
  const std::vector<double> before = x;
  config_scope cs(devices("emulated,emulated"));
  checked_scale_oa(x, 3.0);
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative element"), std::domain_error);
  CHECK(x == before);
  // And a stage that succeeds afterwards updates it once.
  x[x.size() - 7] = 1;
  checked_scale_oa(x, 3.0);
  oa::evaluate();
  for (std::size_t i = 0; i < x.size(); i += 997) REQUIRE(x[i] == (i == x.size() - 7 ? 1.0 : before[i]) * 3.0);
}

TEST_CASE("every device lost: the host runs the rest and every later stage") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  config_scope cs(devices("emulated:fail_launch=2:sticky=1,emulated:fail_launch=3:sticky=1"));
  const outcome two = run(x);
  CHECK(two.y == one.y);
  CHECK(two.sum == one.sum);
  const auto reps = large_stages();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device_chunks + reps[0].host_reruns == reps[0].chunks);
  CHECK(reps[0].host_reruns >= reps[0].chunks / 2);
  oa::clear_reports();
  CHECK(run(x).sum == one.sum);
  const oa::stage_report later = large_stages().at(0);
  CHECK(later.device == "host");
  // Each device's loss is said, not only the first's.
  CHECK(contains(later.placement_reason, "emulated:0: lost after an injected fault in launch #2"));
  CHECK(contains(later.placement_reason, "emulated:1: lost after an injected fault in launch #3"));
}

TEST_CASE("a product over two devices: C cut in blocks, one per device, in proportion to their links") {
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(300, 200), B = Eigen::MatrixXd::Random(200, 120);
  const Eigen::MatrixXd C0 = Eigen::MatrixXd::Random(300, 120);
  const Eigen::MatrixXd want = 1.5 * A * B + 0.5 * C0;
  for (const char* specs : {"emulated:memory=256KiB,emulated:memory=256KiB",
                            "emulated:memory=256KiB:link_gbps=1,emulated:memory=256KiB:link_gbps=3"}) {
    CAPTURE(specs);
    config_scope cs(devices(specs));
    Eigen::MatrixXd C = C0;
    oa::linalg::gemm(1.5, A, B, 0.5, C);
    oa::evaluate();
    CHECK((C - want).cwiseAbs().maxCoeff() < 1e-12);
    const Eigen::MatrixXd Bt = B.transpose(), At = A.transpose();  // C wider than tall
    const Eigen::MatrixXd P = oa::linalg::product(Bt, At).get();
    CHECK((P - Bt * At).cwiseAbs().maxCoeff() < 1e-12);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 2);
    for (const auto& r : reps) {
      CHECK(r.device == "emulated:0 + emulated:1");
      CHECK(contains(r.tiling, "one per device"));
      REQUIRE(r.chunks_by_device.size() == 2);
      CHECK(chunks_of(r, "emulated:0") + chunks_of(r, "emulated:1") == r.chunks);
      CHECK(chunks_of(r, "emulated:0") >= 1);
    }
    if (contains(specs, "link_gbps=3")) {
      CHECK(contains(reps[0].tiling, "row blocks"));
      CHECK(contains(reps[1].tiling, "column blocks"));
      for (const auto& r : reps) CHECK(chunks_of(r, "emulated:1") > chunks_of(r, "emulated:0"));  // 3/4 of C
    }
  }
}

TEST_CASE("a product over two devices, one lost: its block's tiles on the host, C exact, or C put back on an error") {
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(256, 160), B = Eigen::MatrixXd::Random(160, 96);
  const Eigen::MatrixXd want = A * B;
  config_scope cs(devices("emulated:memory=128KiB,emulated:memory=128KiB:fail_launch=2:sticky=1"));
  const Eigen::MatrixXd P = oa::linalg::product(A, B).get();
  CHECK((P - want).cwiseAbs().maxCoeff() < 1e-12);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(contains(reps[0].device_fault, "emulated device emulated:1: lost"));
  CHECK(reps[0].host_reruns >= 1);
  CHECK(reps[0].device_chunks + reps[0].host_reruns == reps[0].chunks);
  oa::clear_reports();
  CHECK((oa::linalg::product(A, B).get() - want).cwiseAbs().maxCoeff() < 1e-12);
  CHECK(oa::reports().at(0).device == "emulated:0");  // the device left
}

TEST_CASE("the host takes a share (OA_DEVICES lists it): results exact, most chunks where they finish first") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  // A device behind a slow link (8 MiB each way: about 168 ms); the host
  // computes its chunks in place, with no link, far faster.
  config_scope cs(devices("emulated:link_gbps=0.05,host"));
  const outcome shared = run(x);
  CHECK(shared.y == one.y);
  CHECK(shared.sum == one.sum);  // the host's chunks leave the partials the device's would
  const auto reps = large_stages();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device == "emulated:0 + host");
  CHECK(chunks_of(reps[0], "emulated:0") + chunks_of(reps[0], "host") == reps[0].chunks);
  CHECK(chunks_of(reps[0], "host") > chunks_of(reps[0], "emulated:0"));
  CHECK(reps[0].device_chunks == chunks_of(reps[0], "emulated:0"));
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  CHECK(reps[0].seconds < 0.168);  // the device alone would need its link's time at least
#endif

  // A call's error with the host sharing: every chunk put back.
  std::vector<double> v = ramp(std::size_t{1} << 19);
  v[v.size() / 2] = -1;
  const std::vector<double> before = v;
  checked_scale_oa(v, 3.0);
  CHECK_THROWS_WITH_AS(oa::evaluate(), doctest::Contains("negative element"), std::domain_error);
  CHECK(v == before);
}

TEST_CASE("a stage one device's budget cannot hold goes to the devices that can; stderr names the spec") {
  std::vector<std::int64_t> v(std::size_t{1} << 20);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i % 7) - 3;
  std::vector<std::int64_t> want(v.size());
  std::inclusive_scan(v.begin(), v.end(), want.begin());
  for (const char* specs : {"emulated:memory=64MiB,emulated:memory=16KiB", "emulated:memory=16KiB,emulated:memory=64MiB"}) {
    CAPTURE(specs);
    config_scope cs(devices(specs));
    oa_test::stderr_capture err;
    CHECK(oa::stl::inclusive_scan(v).get() == want);
    const std::string said = err.text();
    CAPTURE(said);
    const std::string big = contains(specs, "64MiB,") ? "emulated:0" : "emulated:1";
    bool on_big = false;
    for (const auto& r : oa::reports()) {
      CHECK(r.error.empty());
      on_big = on_big || r.device == big;
    }
    CHECK(on_big);
    // A stage neither device holds a unit of, had there been one, would be
    // said naming the spec; a stage the big device ran is not said at all.
    CHECK(!contains(said, "cannot hold one unit"));
  }
  // The small device alone: the host runs what it cannot hold, and says so naming the spec.
  config_scope cs(devices("emulated:memory=16KiB"));
  oa_test::stderr_capture err;
  CHECK(oa::stl::inclusive_scan(v).get() == want);
  CHECK(contains(err.text(), "(set_config: devices 'emulated:memory=16KiB') cannot hold one unit"));
}

TEST_CASE("OA_SEQUENTIAL with several devices: one device, one chunk at a time (the baseline)") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  oa::config c = devices("emulated,emulated");
  c.sequential = true;
  config_scope cs(c);
  CHECK(run(x).sum == one.sum);
  for (const auto& r : large_stages()) {
    CHECK(r.device == "emulated:0");
    CHECK(r.streams == 1);
    CHECK(r.sequential);
  }
}

TEST_CASE("reports of shared stages: each device's tiling, a C too small to cut, every device lost named") {
  config_scope cs(devices("emulated:memory=1MiB,emulated:memory=1MiB"));
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(300, 200), B = Eigen::MatrixXd::Random(200, 100);
  CHECK((oa::linalg::product(A, B).get() - A * B).cwiseAbs().maxCoeff() < 1e-12);
  const std::string tiling = oa::reports().at(0).tiling;
  CAPTURE(tiling);
  CHECK(contains(tiling, "emulated:0: C tiles"));
  CHECK(contains(tiling, "; emulated:1: C tiles"));
  CHECK(contains(tiling, "C cut in 2 row blocks, one per device"));
  // 1 x 1: one block, on one device.
  oa::clear_reports();
  const Eigen::MatrixXd a = Eigen::MatrixXd::Constant(1, 3, 2.0), b = Eigen::MatrixXd::Constant(3, 1, 5.0);
  CHECK(oa::linalg::product(a, b).get()(0, 0) == 30.0);
  CHECK(!contains(oa::reports().at(0).tiling, "cut"));

  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  config_scope both(devices("emulated:fail_launch=2:sticky=1,emulated:fail_copy=4:sticky=1"));
  oa_test::stderr_capture err;
  CHECK(run(x).sum == one.sum);
  const auto reps = large_stages();
  REQUIRE(reps.size() == 1);
  CHECK(contains(reps[0].device_fault, "emulated device emulated:0: lost"));
  CHECK(contains(reps[0].device_fault, "; oa: emulated device emulated:1: lost"));
  const std::string said = err.text();
  CAPTURE(said);
  CHECK(contains(said, "the host runs every later stage"));
}

TEST_CASE("a device far smaller than the others sits out; gemm with B (or A) the caller's C itself") {
  const std::vector<double> x = ramp(std::size_t{1} << 20);
  const outcome one = on_one_device(x);
  config_scope cs(devices("emulated:memory=8MiB,emulated:memory=16KiB"));
  CHECK(run(x).sum == one.sum);
  for (const auto& r : large_stages()) CHECK(r.device == "emulated:0");
  oa::clear_reports();
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(300, 300), C0 = Eigen::MatrixXd::Random(300, 300);
  Eigen::MatrixXd C = C0;
  oa::linalg::gemm(1.0, A, C, 1.0, C);  // C = A C + C, read before written
  oa::evaluate();
  CHECK((C - (A * C0 + C0)).cwiseAbs().maxCoeff() < 1e-11);
  CHECK(oa::reports().at(0).device == "emulated:0");
  config_scope two(devices("emulated:memory=1MiB,emulated:memory=1MiB"));
  C = C0;
  oa::linalg::gemm(1.0, C, A, 1.0, C);  // C = C A + C, over two devices
  oa::evaluate();
  CHECK((C - (C0 * A + C0)).cwiseAbs().maxCoeff() < 1e-11);
}

TEST_CASE("balanced feed: chunks a device finishes in a burst do not make another decline") {
  oa::detail::chunk_feed feed(100, 1, 0, 2, false, false, "test");
  // Device 0 shows its rate: two chunks, 5 ms apart.
  REQUIRE(feed.take(0));
  feed.finished(0);
  REQUIRE(feed.take(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  feed.finished(0);
  // Device 1 held eight chunks, which end at once (they waited behind a
  // one-off cost): microseconds apart, they are no rate. Judged by them,
  // device 1 would finish the 90 left long before device 0's next, and
  // device 0 would decline.
  for (int i = 0; i < 8; ++i) REQUIRE(feed.take(1));
  for (int i = 0; i < 8; ++i) feed.finished(1);
  CHECK(feed.take(0));
  CHECK(feed.take(1));
}

TEST_CASE("balanced feed: a device whose first chunk paid a one-off cost is not taken for a slow one") {
  // Device 1 holds four chunks at once; its first takes 40 ms (its staging
  // memory made, say), its others 0.5 ms. Device 0 holds one and takes 3 ms
  // a chunk. Judged by its first chunk, device 1 would decline the rest at
  // its next take and leave them to device 0 (44 of 48 went there).
  oa::detail::chunk_feed feed(48, 1, 0, 2, false, false, "test");
  std::vector<int> took(2, 0);
  const auto run = [&](int d, std::size_t slots) {
    std::size_t held = 0;
    for (int done = 0;;) {
      if (held == slots) {
        const double ms = d == 0 ? 3.0 : done == 0 ? 40.0 : 0.5;
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
        --held, ++done;
        feed.finished(d);
      }
      if (!feed.take(d)) break;
      ++took[static_cast<std::size_t>(d)], ++held;
    }
    for (; held > 0; --held) feed.finished(d);
  };
  std::thread slow(run, 0, 1), fast(run, 1, 4);
  slow.join(), fast.join();
  CAPTURE(took[0]);
  CAPTURE(took[1]);
  CHECK(took[0] + took[1] == 48);
  CHECK(feed.untaken().empty());
  CHECK(took[1] > took[0]);
}
