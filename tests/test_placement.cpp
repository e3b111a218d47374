// Placement by cost (OA_PLACEMENT=cost): the performance models (history by
// size, a power law between sizes, kept in a file), and stages placed where
// they are predicted to finish first, with no threshold set.

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <oa/annotations/stl.hpp>

#include "core/perf_model.hpp"
#include "oa/core/error.hpp"
#include "support.hpp"

using oa::detail::perf_models;
using oa_test::config_scope;

namespace {

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("oa_test_placement_") + name)).string();
}

std::vector<double> ramp(std::size_t n, double scale) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<double>(i % 1000);
  return v;
}

/// One binary transform of n doubles, evaluated: its stage's report.
oa::stage_report add(std::size_t n) {
  const auto a = ramp(n, 1.0), b = ramp(n, 0.5);
  oa::clear_reports();
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  CHECK(oa::stl::transform(a, b, std::plus<>{}).get() == want);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  return reps.front();
}

}  // namespace

TEST_CASE("performance models: the fastest of a size measured twice, a power law between sizes, kept in a file") {
  perf_models m;
  CHECK(!m.predict("f", "host", 1e6));
  m.record("f", "host", 1e4, 3e-5);
  CHECK(!m.predict("f", "host", 1e4));  // once: perhaps a first run's one-off cost
  m.record("f", "host", 1e4, 1e-5);
  CHECK(m.samples("f", "host") == 2);
  CHECK(*m.predict("f", "host", 1e4) == doctest::Approx(1e-5));  // the fastest
  CHECK(!m.predict("f", "host", 4e4));  // one size alone: how time grows is unknown
  m.record("f", "host", 1e6, 4e-3);
  m.record("f", "host", 1e6, 5e-3);  // 1e-5 at 1e4, 4e-3 at 1e6: t ~ bytes^1.3
  CHECK(*m.predict("f", "host", 4e6) == doctest::Approx(4e-3 * std::pow(4.0, std::log(400.0) / std::log(100.0))));
  CHECK(!m.predict("f", "host", 1e8));  // beyond two octaves of what was measured
  CHECK(!m.predict("f", "emulated", 1e4));  // per device
  CHECK(!m.predict("g", "host", 1e4));      // per kind of stage
  m.record("f", "host", 1e4, -1);           // not a measurement
  CHECK(m.samples("f", "host") == 4);

  const std::string path = temp_path("models.json");
  m.save(path);
  perf_models back;
  back.load(path);
  CHECK(back.samples("f", "host") == 4);
  CHECK(*back.predict("f", "host", 4e6) == doctest::Approx(*m.predict("f", "host", 4e6)));
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".lock");

  perf_models none;
  none.load(temp_path("missing.json"));  // no history yet
  CHECK(none.empty());
  { std::ofstream empty(path); }  // made by `touch`: no history yet either
  none.load(path);
  CHECK(none.empty());
  {
    std::ofstream bad(path);
    bad << "{\"models\": [{\"op\": \"f\"}]}";
  }
  try {
    none.load(path);
    FAIL("a file of something else was read");
  } catch (const oa::error& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE("performance models: writers of one file keep each other's models; another format is refused") {
  const std::string path = temp_path("shared_models.json");
  std::filesystem::remove(path);
  // Two runs that read the file before either wrote it: the second keeps
  // the first's sizes, and a size both measured keeps the faster time.
  perf_models first, second;
  first.load(path);
  second.load(path);
  first.record("f", "host", 1e4, 2e-5), first.record("f", "host", 1e4, 2e-5);
  first.record("f", "host", 1e6, 3e-3), first.record("f", "host", 1e6, 3e-3);
  second.record("f", "host", 1e4, 1e-5), second.record("f", "host", 1e4, 1e-5);
  second.record("g", "emulated", 1e5, 1e-4), second.record("g", "emulated", 1e5, 1e-4);
  first.save(path);
  second.save(path);
  perf_models back;
  back.load(path);
  CHECK(*back.predict("f", "host", 1e4) == doctest::Approx(1e-5));
  CHECK(*back.predict("f", "host", 1e6) == doctest::Approx(3e-3));
  CHECK(*back.predict("g", "emulated", 1e5) == doctest::Approx(1e-4));
  // Threads saving at once, each its own kind of stage: none fails, none is lost.
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      perf_models m;
      const std::string op = "op" + std::to_string(t);
      for (int i = 0; i < 10; ++i) {
        m.record(op, "host", 1e4, 1e-5);
        try {
          m.save(path);
        } catch (const oa::error&) {
          ++failures;
        }
      }
    });
  for (auto& w : writers) w.join();
  CHECK(failures == 0);
  perf_models all;
  all.load(path);
  for (int t = 0; t < 4; ++t) CHECK(all.samples("op" + std::to_string(t), "host") >= 2);
  CHECK(all.samples("g", "emulated") == 2);
  // A file of another format.
  {
    std::ofstream other(path);
    other << "{\"format\": \"oa performance models 2\", \"models\": []}";
  }
  perf_models none;
  CHECK_THROWS_WITH_AS(none.load(path), doctest::Contains("\"oa performance models 2\", not \"oa performance models 1\""),
                       oa::config_error);
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".lock");
}

TEST_CASE("OA_PLACEMENT=cost: each side calibrated twice at a size, then the faster predicted, results exact") {
  oa::config c = oa_test::emulated_config(std::size_t{4} << 20, 0.5);  // a slow link: 0.5 GB/s
  c.placement = "cost";
  config_scope cs(c);
  const std::size_t n = std::size_t{1} << 18;  // 6 MiB over 0.5 GB/s: 12 ms of link alone
  std::vector<oa::stage_report> reps;
  for (int i = 0; i < 5; ++i) reps.push_back(add(n));
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(reps[static_cast<std::size_t>(i)].device == (i < 2 ? "emulated" : "host"));
    CHECK(reps[static_cast<std::size_t>(i)].placement_reason.find("calibrating") != std::string::npos);
  }
  // The host computes as fast as the emulated device and copies nothing.
  CHECK(reps[4].device == "host");
  CHECK(reps[4].placement_reason.find("(predicted)") != std::string::npos);
  CHECK(reps[4].predicted_seconds > 0);
}

TEST_CASE("OA_PLACEMENT=cost with several devices: one model for them together, their links added up") {
  oa::config c = oa_test::emulated_config(std::size_t{4} << 20);
  c.devices = "emulated:link_gbps=0.5,emulated:link_gbps=0.5";
  c.placement = "cost";
  config_scope cs(c);
  const std::size_t n = std::size_t{1} << 18;
  std::vector<oa::stage_report> reps;
  for (int i = 0; i < 5; ++i) reps.push_back(add(n));
  // The pair calibrates (the host may have been measured at this size by an
  // earlier test: models stay in memory while their file is the same).
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(reps[static_cast<std::size_t>(i)].device == "emulated:0 + emulated:1");
    CHECK(reps[static_cast<std::size_t>(i)].placement_reason.find("calibrating '") != std::string::npos);
  }
  // Both sides measured: the prediction names the pair.
  CHECK(reps[4].placement_reason.find("emulated:0 + emulated:1") != std::string::npos);
  CHECK(reps[4].placement_reason.find("(predicted)") != std::string::npos);
  CHECK(reps[4].predicted_seconds > 0);
}

TEST_CASE("OA_PLACEMENT=cost: small stages on the host, large ones on the device, from models in a file") {
  // A host that computes 1 GB/s; a device 1000 times faster that costs
  // 100 us a stage besides: it pays from about 100 kB up.
  const std::string path = temp_path("seeded.json");
  perf_models m;
  for (const double bytes : {1e4, 1e4, 1e8, 1e8}) {
    m.record("std::transform (binary)", "host", bytes, bytes * 1e-9);
    m.record("std::transform (binary)", "emulated", bytes, 1e-4 + bytes * 1e-12);
  }
  m.save(path);
  oa::config c = oa_test::emulated_config(std::size_t{64} << 20);  // no threshold, the link unthrottled
  c.placement = "cost";
  c.perf_models = path;
  {
    config_scope cs(c);
    const oa::stage_report small = add(256), large = add(std::size_t{1} << 20);
    CHECK(small.device == "host");
    CHECK(large.device == "emulated");
    CHECK(small.predicted_seconds == doctest::Approx(3 * 256 * 8 * 1e-9));
  }
  // What ran was learned, and kept when the configuration changed.
  perf_models kept;
  kept.load(path);
  CHECK(kept.samples("std::transform (binary)", "host") == 5);
  CHECK(kept.samples("std::transform (binary)", "emulated") == 5);
  std::filesystem::remove(path);
}

TEST_CASE("OA_PLACEMENT: a bad value and an unreadable models file are errors naming them") {
  oa::config c = oa_test::emulated_config(std::size_t{4} << 20);
  c.placement = "fastest";
  CHECK_THROWS_WITH_AS(oa::set_config(c), doctest::Contains("unknown placement 'fastest'"), oa::config_error);
  const std::string path = temp_path("garbage.json");
  {
    std::ofstream bad(path);
    bad << "not json";
  }
  c.placement = "cost";
  c.perf_models = path;
  config_scope cs(c);
  const auto a = ramp(1000, 1.0);
  auto r = oa::stl::transform(a, a, std::plus<>{});
  CHECK_THROWS_WITH_AS(r.get(), doctest::Contains(path.c_str()), oa::config_error);  // the setting's file
  std::filesystem::remove(path);
}
