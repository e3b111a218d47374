#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "oa/core/config.hpp"
#include "oa/core/error.hpp"
#include "oa/core/runtime.hpp"
#if defined(OA_HAS_CUDA)
#include "oa/cuda/device.hpp"
#endif

namespace {

constexpr std::size_t ki = 1024;

/// The message of the config_error that `f` throws; fails the test if none.
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const oa::config_error& e) {
    return e.what();
  }
  FAIL("expected oa::config_error");
  return {};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

const char* const all_variables[] = {
    "OA_CONFIG",         "OA_DEVICE",     "OA_DEVICE_MEMORY", "OA_STREAMS",   "OA_CHUNK_BYTES",
    "OA_HOST_THRESHOLD", "OA_REPORT",     "OA_TRACE",         "OA_LINK_GBPS", "OA_FAIL_LAUNCH",
    "OA_FAIL_COPY",      "OA_SEQUENTIAL", "OA_PROGRESS",      "OA_VERBOSE", "OA_EMULATED_DEVICE_FUNCTIONS", "OA_CUDA_STAGING", "OA_FAIL_STICKY",
    "OA_EMULATED_FUSED", "OA_OFFLOAD_GEMM_MIN", "OA_OFFLOAD_ELEMENTS_MIN", "OA_OFFLOAD_GEMV_MIN", "OA_KEEP_COPIES",
    "OA_FAIL_FILL", "OA_FAIL_DRAIN", "OA_LINK_SHARED_GBPS", "OA_LINK_LATENCY_US", "OA_STAGING_SLOT_BYTES",
    "OA_STAGING_THREADS", "OA_PLACEMENT", "OA_PERF_MODELS", "OA_SERIAL_STAGES", "OA_STDPAR_MIN", "OA_DEVICES", "OA_SPREAD",
    "OA_DIST_TIMEOUT",
};

/// Clears every OA_ variable for one test and puts the caller's values back
/// afterwards, so the tests neither see nor leak the surrounding environment.
class scoped_environment {
 public:
  scoped_environment() {
    for (const char* name : all_variables) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~scoped_environment() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// A JSON file in the temp directory, removed at the end of the test.
class temp_file {
 public:
  explicit temp_file(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("oa_test_config_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) + ".json")) {
    std::ofstream(path_) << text;
  }
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace

TEST_CASE("parse_bytes reads plain, decimal and binary sizes") {
  struct row {
    const char* text;
    std::size_t bytes;
  };
  const row rows[] = {
      {"0", 0},
      {"4096", 4096},
      {"  4096  ", 4096},
      {"17B", 17},
      {"17 b", 17},
      {"1K", ki},
      {"1k", ki},
      {"1KiB", ki},
      {"1kib", ki},
      {"1KB", 1000},
      {"1kb", 1000},
      {"64MiB", 64 * ki * ki},
      {"64M", 64 * ki * ki},
      {"64MB", 64'000'000},
      {"64 mib", 64 * ki * ki},
      {"2G", 2 * ki * ki * ki},
      {"2GiB", 2 * ki * ki * ki},
      {"2GB", 2'000'000'000},
      {"1.5GiB", 1'610'612'736},
      {"1.5 GiB", 1'610'612'736},
      {"1.5GB", 1'500'000'000},
      {".5KiB", 512},
      {"0.25M", 256 * ki},
      {"1T", ki * ki * ki * ki},
      {"3TiB", 3 * ki * ki * ki * ki},
      {"3TB", 3'000'000'000'000},
      {"1.3KiB", 1331},  // 1331.2: fractions of a byte are dropped
      {"0.0000000000009094947017729282379150390625TiB", 1},  // exactly one byte
      {"007KB", 7000},
      {"18446744073709551615", 18446744073709551615ull},
      {"16777215.999999TiB", 18446744073708452104ull},                // floor of 16777215.999999 * 2^40
      {"16777215.99999999999999999999TiB", 18446744073709551615ull},  // many digits, no overflow
      {"1P", ki * ki * ki * ki * ki},
      {"2PiB", 2 * ki * ki * ki * ki * ki},
      {"2PB", 2'000'000'000'000'000},
      {"1EiB", std::size_t{1} << 60},
      {"1 eib", std::size_t{1} << 60},
      {"15.5E", std::size_t{31} << 59},
      {"18EB", 18'000'000'000'000'000'000ull},
  };
  for (const auto& r : rows) {
    const std::string text = r.text;
    CAPTURE(text);
    CHECK(oa::parse_bytes(r.text, "X") == r.bytes);
  }
}

TEST_CASE("parse_bytes rejects malformed sizes and names the setting") {
  const char* const bad[] = {
      "",     "   ",   "-1",    "-1MiB", "+5",     "abc",    "12XB", "1.",     ".",
      "1..5", "1.5.2", "MiB",   "1 2",   "1MiB x", "1 MiBB", "1Mi",  "1 K B",  "0x10",
      "1e6",  "1,000", "1kibi", "1ZiB",  "1YB",    "nan",    "inf",  "1\t\tZ",
      "1.9",  "0.5",   "0.0001KiB",  // a fraction of a byte: no suffix, or below one byte
  };
  for (const char* text : bad) {
    const std::string shown = text;
    CAPTURE(shown);
    const std::string msg = config_error_of([&] { oa::parse_bytes(text, "OA_DEVICE_MEMORY"); });
    CHECK(contains(msg, "OA_DEVICE_MEMORY"));
  }
  CHECK(config_error_of([] { oa::parse_bytes("12XB", "OA_DEVICE_MEMORY"); }) ==
        "oa: OA_DEVICE_MEMORY: cannot read '12XB' as a byte size (use e.g. 4096, 64MiB, 1.5GiB)");
}

TEST_CASE("parse_bytes rejects sizes that do not fit") {
  const char* const huge[] = {"18446744073709551616", "99999999999999999999999", "16777216TiB",
                              "20000000000GB",        "18446744073709551616 B",  "17000000000000000000.5K",
                              "16EiB",                "18.5EB",                  "16384PiB"};
  for (const char* text : huge) {
    const std::string shown = text;
    CAPTURE(shown);
    const std::string msg = config_error_of([&] { oa::parse_bytes(text, "OA_CHUNK_BYTES"); });
    CHECK(contains(msg, "OA_CHUNK_BYTES"));
    CHECK(contains(msg, "too large"));
  }
}

TEST_CASE("merge_json sets every key") {
  oa::config c;
  c.merge_json(R"({
    "device": "emulated", "device_memory": "1.5GiB", "streams": 4, "chunk_bytes": 65536,
    "host_threshold": "2 MB", "report": "r.json", "trace": "t.json", "link_gbps": 12.5,
    "fail_launch": 3, "fail_copy": 7, "sequential": true, "progress": false, "verbose": true
  })",
               "test.json");
  CHECK(c.device == "emulated");
  CHECK(c.device_memory == 1'610'612'736);
  CHECK(c.streams == 4);
  CHECK(c.chunk_bytes == 65536);
  CHECK(c.host_threshold == 2'000'000);
  CHECK(c.report == "r.json");
  CHECK(c.trace == "t.json");
  CHECK(c.link_gbps == doctest::Approx(12.5));
  CHECK(c.fail_launch == 3);
  CHECK(c.fail_copy == 7);
  CHECK(c.sequential);
  CHECK(c.progress == 0);
  CHECK(c.verbose);
}

TEST_CASE("merge_json keeps keys it is not given and accepts number forms") {
  oa::config c;
  c.merge_json(R"({"streams": 2})", "a");
  c.merge_json(R"({"device_memory": 1e9, "progress": -1, "link_gbps": 0})", "b");
  CHECK(c.streams == 2);
  CHECK(c.device == "auto");
  CHECK(c.device_memory == 1'000'000'000);
  CHECK(c.progress == -1);
  CHECK(c.link_gbps == 0);
  CHECK(c.host_threshold == std::size_t{1} << 20);
  c.merge_json("{}", "c");
  CHECK(c.streams == 2);
  c.merge_json(R"({"progress": true, "streams": 64})", "d");
  CHECK(c.progress == 1);
  CHECK(c.streams == 64);
}

TEST_CASE("merge_json rejects bad documents, naming the origin and the key") {
  struct row {
    const char* json;
    const char* key;  // nullptr: the message only has to name the origin
  };
  const row rows[] = {
      {"", nullptr},
      {"{", nullptr},
      {"[1, 2]", nullptr},
      {"42", nullptr},
      {R"({"stream": 4})", "stream"},
      {R"({"Device": "host"})", "Device"},
      {R"({"device": "gpu"})", "device"},
      {R"({"device": "CUDA"})", "device"},
      {R"({"device": 1})", "device"},
      {R"({"device_memory": "12XB"})", "device_memory"},
      {R"({"device_memory": -1})", "device_memory"},
      {R"({"device_memory": 1.5})", "device_memory"},
      {R"({"device_memory": true})", "device_memory"},
      {R"({"device_memory": null})", "device_memory"},
      {R"({"chunk_bytes": [4096]})", "chunk_bytes"},
      {R"({"host_threshold": "-1K"})", "host_threshold"},
      {R"({"streams": 65})", "streams"},
      {R"({"streams": -3})", "streams"},
      {R"({"streams": 2.5})", "streams"},
      {R"({"streams": "4"})", "streams"},
      {R"({"streams": 18446744073709551615})", "streams"},
      {R"({"link_gbps": -1})", "link_gbps"},
      {R"({"link_gbps": "10"})", "link_gbps"},
      {R"({"fail_launch": -1})", "fail_launch"},
      {R"({"fail_copy": "3"})", "fail_copy"},
      {R"({"sequential": 1})", "sequential"},
      {R"({"verbose": "yes"})", "verbose"},
      {R"({"progress": 2})", "progress"},
      {R"({"progress": "auto"})", "progress"},
      {R"({"report": 5})", "report"},
      {R"({"trace": false})", "trace"},
  };
  for (const auto& r : rows) {
    const std::string json = r.json;
    CAPTURE(json);
    oa::config c;
    const std::string msg = config_error_of([&] { c.merge_json(r.json, "settings.json"); });
    CHECK(contains(msg, "settings.json"));
    if (r.key != nullptr) CHECK(contains(msg, std::string("'") + r.key + "'"));
  }
}

TEST_CASE("merge_json leaves the config unchanged when a key is bad") {
  oa::config c;
  CHECK_THROWS_AS(c.merge_json(R"({"streams": 8, "device": "gpu"})", "x"), oa::config_error);
  CHECK(c.streams == 0);
  CHECK(c.device == "auto");
}

TEST_CASE("from_environment gives the defaults when nothing is set") {
  scoped_environment env;
  const oa::config c = oa::config::from_environment();
  const oa::config d;
  CHECK(c.device == d.device);
  CHECK(c.device_memory == d.device_memory);
  CHECK(c.streams == d.streams);
  CHECK(c.chunk_bytes == d.chunk_bytes);
  CHECK(c.host_threshold == d.host_threshold);
  CHECK(c.report.empty());
  CHECK(c.trace.empty());
  CHECK(c.link_gbps == 0);
  CHECK(c.fail_launch == 0);
  CHECK(c.fail_copy == 0);
  CHECK_FALSE(c.sequential);
  CHECK(c.progress == -1);
  CHECK_FALSE(c.verbose);
}

TEST_CASE("from_environment reads every variable") {
  scoped_environment env;
  env.set("OA_DEVICE", "host");
  env.set("OA_DEVICE_MEMORY", "256MiB");
  env.set("OA_STREAMS", "3");
  env.set("OA_CHUNK_BYTES", "1M");
  env.set("OA_HOST_THRESHOLD", "0");
  const std::string report = (std::filesystem::temp_directory_path() / "oa_test_config_report.json").string();
  const std::string trace = (std::filesystem::temp_directory_path() / "oa_test_config_trace.json").string();
  env.set("OA_REPORT", report);
  env.set("OA_TRACE", trace);
  env.set("OA_LINK_GBPS", "25.6");
  env.set("OA_FAIL_LAUNCH", "5");
  env.set("OA_FAIL_COPY", "9");
  env.set("OA_SEQUENTIAL", "true");
  env.set("OA_PROGRESS", "0");
  env.set("OA_VERBOSE", "1");
  const oa::config c = oa::config::from_environment();
  CHECK(c.device == "host");
  CHECK(c.device_memory == 256 * ki * ki);
  CHECK(c.streams == 3);
  CHECK(c.chunk_bytes == ki * ki);
  CHECK(c.host_threshold == 0);
  CHECK(c.report == report);
  CHECK(c.trace == trace);
  CHECK(c.link_gbps == doctest::Approx(25.6));
  CHECK(c.fail_launch == 5);
  CHECK(c.fail_copy == 9);
  CHECK(c.sequential);
  CHECK(c.progress == 0);
  CHECK(c.verbose);

  env.set("OA_SEQUENTIAL", "FALSE");
  env.set("OA_PROGRESS", "1");
  env.set("OA_VERBOSE", "0");
  const oa::config d = oa::config::from_environment();
  CHECK_FALSE(d.sequential);
  CHECK(d.progress == 1);
  CHECK_FALSE(d.verbose);
}

TEST_CASE("from_environment: the file is checked with the variables over it") {
  scoped_environment env;
  // An emulated budget beyond physical memory, but the variable makes it the host's planning target.
  const temp_file file(R"({"device": "emulated", "device_memory": "1TiB"})");
  env.set("OA_CONFIG", file.path());
  CHECK_THROWS_AS(oa::config::from_environment(), oa::config_error);
  env.set("OA_DEVICE", "host");
  const oa::config c = oa::config::from_environment();
  CHECK(c.device == "host");
  CHECK(c.device_memory == ki * ki * ki * ki);
  // A program's own option replaces a value before anything checks it.
  env.set("OA_DEVICE", "");
  oa::config_origin origin;
  oa::config r = oa::config::read_environment(&origin);
  r.device_memory = ki * ki;
  origin.set("device_memory", "--device-memory");
  CHECK_NOTHROW(oa::validate(r, origin));
}

TEST_CASE("from_environment: variables override the OA_CONFIG file") {
  scoped_environment env;
  const temp_file file(R"({"device": "emulated", "streams": 6, "chunk_bytes": "4KiB", "verbose": true})");
  env.set("OA_CONFIG", file.path());

  oa::config c = oa::config::from_environment();
  CHECK(c.device == "emulated");
  CHECK(c.streams == 6);
  CHECK(c.chunk_bytes == 4 * ki);
  CHECK(c.verbose);

  env.set("OA_STREAMS", "2");
  env.set("OA_VERBOSE", "false");
  env.set("OA_DEVICE", "");  // empty counts as unset: the file's value stays
  c = oa::config::from_environment();
  CHECK(c.device == "emulated");
  CHECK(c.streams == 2);
  CHECK(c.chunk_bytes == 4 * ki);
  CHECK_FALSE(c.verbose);
}

TEST_CASE("from_environment: errors name the file or the variable") {
  scoped_environment env;

  SUBCASE("missing file") {
    const std::string path =
        (std::filesystem::temp_directory_path() / "oa_test_config_does_not_exist.json").string();
    env.set("OA_CONFIG", path);
    const std::string msg = config_error_of([] { oa::config::from_environment(); });
    CHECK(contains(msg, "OA_CONFIG"));
    CHECK(contains(msg, path));
  }
  SUBCASE("bad key in the file") {
    const temp_file file(R"({"streams": 100})");
    env.set("OA_CONFIG", file.path());
    const std::string msg = config_error_of([] { oa::config::from_environment(); });
    CHECK(contains(msg, file.path()));
    CHECK(contains(msg, "'streams'"));
  }
  SUBCASE("bad JSON in the file") {
    const temp_file file("{ device: host }");
    env.set("OA_CONFIG", file.path());
    CHECK(contains(config_error_of([] { oa::config::from_environment(); }), file.path()));
  }

  struct row {
    const char* variable;
    const char* value;
  };
  const row rows[] = {
      {"OA_DEVICE", "gpu"},
      {"OA_DEVICE_MEMORY", "12XB"},
      {"OA_DEVICE_MEMORY", "-5"},
      {"OA_STREAMS", "65"},
      {"OA_STREAMS", "four"},
      {"OA_STREAMS", "-1"},
      {"OA_STREAMS", "99999999999999999999"},
      {"OA_CHUNK_BYTES", "1.5.2M"},
      {"OA_HOST_THRESHOLD", "lots"},
      {"OA_LINK_GBPS", "-2"},
      {"OA_LINK_GBPS", "fast"},
      {"OA_LINK_GBPS", "inf"},
      {"OA_LINK_GBPS", "nan"},
      {"OA_LINK_GBPS", "10GB"},
      {"OA_FAIL_LAUNCH", "-1"},
      {"OA_FAIL_LAUNCH", "x"},
      {"OA_FAIL_COPY", "2.5"},
      {"OA_FAIL_COPY", "99999999999999999999"},
      {"OA_SEQUENTIAL", "2"},
      {"OA_SEQUENTIAL", "yes"},
      {"OA_PROGRESS", "maybe"},
      {"OA_VERBOSE", "10"},
  };
  for (const auto& r : rows) {
    const std::string setting = std::string(r.variable) + "=" + r.value;
    CAPTURE(setting);
    scoped_environment inner;
    inner.set(r.variable, r.value);
    const std::string msg = config_error_of([] { oa::config::from_environment(); });
    CHECK(contains(msg, std::string("oa: ") + r.variable + ":"));
  }
}

TEST_CASE("scoped_environment hides and then restores the caller's variables") {
  ::setenv("OA_STREAMS", "5", 1);
  ::unsetenv("OA_DEVICE");
  {
    scoped_environment env;
    env.set("OA_DEVICE", "host");
    CHECK(std::getenv("OA_STREAMS") == nullptr);
  }
  REQUIRE(std::getenv("OA_STREAMS") != nullptr);
  CHECK(std::string(std::getenv("OA_STREAMS")) == "5");
  CHECK(std::getenv("OA_DEVICE") == nullptr);
  ::unsetenv("OA_STREAMS");
}

TEST_CASE("OA_CUDA_STAGING: pinned or register") {
  scoped_environment env;
  CHECK(oa::config::from_environment().cuda_staging == "pinned");
  setenv("OA_CUDA_STAGING", "register", 1);
  CHECK(oa::config::from_environment().cuda_staging == "register");
  setenv("OA_CUDA_STAGING", "mapped", 1);
  CHECK_THROWS_WITH_AS(oa::config::from_environment(), doctest::Contains("OA_CUDA_STAGING"), oa::config_error);
  oa::config c;
  CHECK_THROWS_AS(c.merge_json(R"({"cuda_staging": "x"})", "file.json"), oa::config_error);
  c.merge_json(R"({"cuda_staging": "pinned"})", "file.json");
  CHECK(c.cuda_staging == "pinned");
}

// --- one validation for every source ----------------------------------------------

namespace {

/// A path in a directory that does not exist.
std::string unwritable_path() {
  return (std::filesystem::temp_directory_path() / "oa_test_config_no_such_dir" / "out.json").string();
}

std::size_t physical_memory_bytes() {
  return static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(::sysconf(_SC_PAGE_SIZE));
}

/// Puts the runtime back on a default configuration when a test ends.
struct default_runtime_config {
  default_runtime_config() { oa::set_config(oa::config{}); }
  ~default_runtime_config() { oa::set_config(oa::config{}); }
};

const std::string streams_range = " is out of range (1-64, or 0 for the device's default)";

}  // namespace

TEST_CASE("streams: one range check for the environment, the file, set_config and validate") {
  scoped_environment env;
  default_runtime_config runtime;

  env.set("OA_STREAMS", "1024");
  CHECK(config_error_of([] { oa::config::from_environment(); }) == "oa: OA_STREAMS: 1024" + streams_range);

  oa::config c;
  CHECK(config_error_of([&] { c.merge_json(R"({"streams": 1024})", "f.json"); }) ==
        "oa: f.json: key 'streams': 1024" + streams_range);
  CHECK(config_error_of([&] { c.merge_json(R"({"streams": -1})", "f.json"); }) ==
        "oa: f.json: key 'streams': -1" + streams_range);

  c.streams = 1024;
  CHECK(config_error_of([&] { oa::set_config(c); }) == "oa: set_config: streams: 1024" + streams_range);
  oa::config_origin origin;
  origin.set("streams", "--streams");
  CHECK(config_error_of([&] { oa::validate(c, origin); }) == "oa: --streams: 1024" + streams_range);

  // 0 (the device's default) and 1 to 64 are accepted everywhere.
  for (const int n : {0, 1, 64}) {
    CAPTURE(n);
    env.set("OA_STREAMS", std::to_string(n));
    CHECK(oa::config::from_environment().streams == n);
    oa::config d;
    d.merge_json("{\"streams\": " + std::to_string(n) + "}", "f.json");
    CHECK(d.streams == n);
    d.streams = n;
    oa::set_config(d);
    CHECK(oa::current_config().streams == n);
  }
}

TEST_CASE("set_config validates the whole config at once and names the field") {
  scoped_environment env;
  default_runtime_config runtime;
  oa::config good;
  good.streams = 3;
  oa::set_config(good);

  struct row {
    void (*change)(oa::config&);
    const char* message;
  };
  const row rows[] = {
      {[](oa::config& c) { c.streams = -5; }, "oa: set_config: streams: -5 is out of range"},
      {[](oa::config& c) { c.progress = 7; },
       "oa: set_config: progress: 7 is out of range (1 on, 0 off, -1 when stderr is a terminal)"},
      {[](oa::config& c) { c.cuda_staging = "whatever"; },
       "oa: set_config: cuda_staging: unknown staging 'whatever' (use pinned or register, exactly: lower case, no spaces)"},
      {[](oa::config& c) { c.device = "gpu"; },
       "oa: set_config: device: unknown device 'gpu' (use auto, host, emulated or cuda, exactly: lower case, no "
       "spaces)"},
      {[](oa::config& c) { c.link_gbps = -1; },
       "oa: set_config: link_gbps: link bandwidth must be a number from 0 to 1e6 (GB/s; 0 = unthrottled), got -1"},
      {[](oa::config& c) { c.link_gbps = std::numeric_limits<double>::infinity(); },
       "oa: set_config: link_gbps: link bandwidth must be a number from 0 to 1e6 (GB/s; 0 = unthrottled), got inf"},
      {[](oa::config& c) { c.link_gbps = std::nan(""); },
       "oa: set_config: link_gbps: link bandwidth must be a number from 0 to 1e6 (GB/s; 0 = unthrottled), got nan"},
  };
  for (const auto& r : rows) {
    const std::string expected = r.message;
    CAPTURE(expected);
    oa::config c;
    r.change(c);
    const std::string msg = config_error_of([&] { oa::set_config(c); });
    CHECK(msg.rfind(expected, 0) == 0);
    // The error comes from set_config itself, and the old config stays.
    CHECK(oa::current_config().streams == 3);
  }
  CHECK(config_error_of([] {
          oa::config c;
          c.streams = -5;
          oa::set_config(c);
        }) == "oa: set_config: streams: -5" + streams_range);
}

TEST_CASE("the emulated link's shared rate and latency, and the staging engine's settings, are read and checked") {
  scoped_environment env;
  env.set("OA_LINK_SHARED_GBPS", "88.4");
  env.set("OA_LINK_LATENCY_US", "5");
  env.set("OA_STAGING_SLOT_BYTES", "8MiB");
  env.set("OA_STAGING_THREADS", "3");
  env.set("OA_FAIL_FILL", "2");
  env.set("OA_FAIL_DRAIN", "4");
  const oa::config c = oa::config::from_environment();
  CHECK(c.link_shared_gbps == 88.4);
  CHECK(c.link_latency_us == 5);
  CHECK(c.staging_slot_bytes == std::size_t{8} << 20);
  CHECK(c.staging_threads == 3);
  CHECK(c.fail_fill == 2);
  CHECK(c.fail_drain == 4);
  struct bad_setting {
    const char *var, *value, *says;
  };
  for (const bad_setting& b : {bad_setting{"OA_LINK_SHARED_GBPS", "1e300", "OA_LINK_SHARED_GBPS"},
                               {"OA_LINK_LATENCY_US", "-1", "out of range (0-1e6 microseconds)"},
                               {"OA_STAGING_SLOT_BYTES", "100", "out of range (4 KiB-1 GiB"},
                               {"OA_STAGING_THREADS", "65", "out of range (1-64"},
                               {"OA_STAGING_THREADS", "many", "OA_STAGING_THREADS"}}) {
    scoped_environment bad;
    bad.set(b.var, b.value);
    CAPTURE(b.var);
    CHECK(config_error_of([] { (void)oa::config::from_environment(); }).find(b.says) != std::string::npos);
  }
}

TEST_CASE("OA_DIST_TIMEOUT: seconds, 0 for no deadline, checked") {
  scoped_environment env;
  CHECK(oa::config::from_environment().dist_timeout == 300);
  env.set("OA_DIST_TIMEOUT", "12.5");
  CHECK(oa::config::from_environment().dist_timeout == 12.5);
  env.set("OA_DIST_TIMEOUT", "0");
  CHECK(oa::config::from_environment().dist_timeout == 0);
  for (const char* bad : {"-1", "2e6", "soon"}) {
    env.set("OA_DIST_TIMEOUT", bad);
    CAPTURE(bad);
    CHECK(config_error_of([] { (void)oa::config::from_environment(); }).find("OA_DIST_TIMEOUT") != std::string::npos);
  }
  // The number as given, not with six decimals.
  env.set("OA_DIST_TIMEOUT", "-1");
  CHECK(config_error_of([] { (void)oa::config::from_environment(); }) ==
        "oa: OA_DIST_TIMEOUT: -1 is out of range (0-1e6 seconds; 0: no deadline)");
}

TEST_CASE("OA_STDPAR_MIN: one count for every family or family=count entries; in the file a number or an object") {
  const oa::stdpar_thresholds defaults;
  const auto all = [](std::uint64_t n) { return oa::stdpar_thresholds{n, n, n, n}; };
  scoped_environment env;
  CHECK(oa::config::from_environment().stdpar_min == defaults);

  env.set("OA_STDPAR_MIN", "0");
  CHECK(oa::config::from_environment().stdpar_min == all(0));
  env.set("OA_STDPAR_MIN", " 123 ");
  CHECK(oa::config::from_environment().stdpar_min == all(123));
  // The families not named keep their default.
  env.set("OA_STDPAR_MIN", "sort=65536,scan=0");
  oa::stdpar_thresholds want = defaults;
  want.sort = 65536;
  want.scan = 0;
  CHECK(oa::config::from_environment().stdpar_min == want);
  env.set("OA_STDPAR_MIN", "scan=8, reduction = 7,elementwise=6,sort=5");
  CHECK(oa::config::from_environment().stdpar_min == oa::stdpar_thresholds{5, 6, 7, 8});

  oa::config c;
  c.merge_json(R"({"stdpar_min": 42})", "f.json");
  CHECK(c.stdpar_min == all(42));
  c.merge_json(R"({"stdpar_min": 1e6})", "f.json");
  CHECK(c.stdpar_min == all(1'000'000));
  oa::config d;
  d.merge_json(R"({"stdpar_min": {"sort": 1, "reduction": 3}})", "f.json");
  want = defaults;
  want.sort = 1;
  want.reduction = 3;
  CHECK(d.stdpar_min == want);

  // A variable over the file changes the families it names.
  const temp_file file(R"({"stdpar_min": {"sort": 1, "elementwise": 2}})");
  env.set("OA_CONFIG", file.path());
  env.set("OA_STDPAR_MIN", "scan=4");
  oa::config_origin origin;
  want = defaults;
  want.sort = 1;
  want.elementwise = 2;
  want.scan = 4;
  CHECK(oa::config::from_environment(&origin).stdpar_min == want);
  CHECK(origin.where("stdpar_min") == "OA_STDPAR_MIN");

  // Each value, and what its message says besides the variable or the key.
  const std::pair<const char*, const char*> variables[] = {
      {"many", "cannot read 'many' as a count of elements (use one count for every family"},
      {"-1", "cannot read '-1'"},
      {"99999999999999999999", "too large"},
      {"sort", "cannot read 'sort'"},
      {"sorting=5", "unknown family 'sorting' in 'sorting=5' (families: sort, elementwise, reduction, scan)"},
      {"sort=x", "OA_STDPAR_MIN: sort: cannot read 'x' as a count of elements"},
      {"scan=-2", "OA_STDPAR_MIN: scan: cannot read '-2'"},
      {"sort=", "OA_STDPAR_MIN: sort: cannot read ''"},
      {"reduction=1K", "OA_STDPAR_MIN: reduction: cannot read '1K'"},
      {"sort=1,scan=2,sort=3", "family 'sort' given twice in 'sort=1,scan=2,sort=3'"},
      {"sort=1,", "an empty entry in 'sort=1,'"},
      {"0,sort=5", "'0' is not family=count"},
  };
  for (const auto& variable : variables) {
    const auto& [value, says] = variable;
    CAPTURE(variable.first);
    scoped_environment inner;
    inner.set("OA_STDPAR_MIN", value);
    const std::string msg = config_error_of([] { (void)oa::config::from_environment(); });
    CHECK(contains(msg, "oa: OA_STDPAR_MIN: "));
    CHECK(contains(msg, says));
  }
  const std::pair<const char*, const char*> files[] = {
      {R"({"stdpar_min": -1})", "must not be negative"},
      {R"({"stdpar_min": 1.5})", "expected a count of elements"},
      {R"({"stdpar_min": "0"})", "expected a count of elements or an object of counts by family"},
      {R"({"stdpar_min": [1]})", "expected a count of elements or an object"},
      {R"({"stdpar_min": {"sorting": 1}})", "unknown family 'sorting' (families: sort, elementwise, reduction, scan)"},
      {R"({"stdpar_min": {"sort": -1}})", "'stdpar_min': sort: must not be negative"},
      {R"({"stdpar_min": {"scan": "1"}})", "'stdpar_min': scan: expected a count of elements"},
  };
  for (const auto& file : files) {
    const auto& [json, says] = file;
    CAPTURE(file.first);
    oa::config e;
    const std::string msg = config_error_of([&, json = json] { e.merge_json(json, "settings.json"); });
    CHECK(contains(msg, "oa: settings.json: key 'stdpar_min'"));
    CHECK(contains(msg, says));
    CHECK(e.stdpar_min == defaults);
  }
}

TEST_CASE("OA_DEVICES and OA_SPREAD: read from the environment and the file, bad values named") {
  scoped_environment env;
  env.set("OA_DEVICES", "emulated:link_gbps=2,emulated:memory=8MiB");
  env.set("OA_SPREAD", "even");
  const oa::config c = oa::config::from_environment();
  CHECK(c.devices == "emulated:link_gbps=2,emulated:memory=8MiB");
  CHECK(c.spread == "even");
  env.set("OA_DEVICES", "emulated:link_gbps=x");
  CHECK(contains(config_error_of([] { (void)oa::config::from_environment(); }),
                 "oa: OA_DEVICES: 'emulated:link_gbps=x': link_gbps=x is not a number"));
  env.set("OA_DEVICES", "emulated:memory=1EiB");
  CHECK(contains(config_error_of([] { (void)oa::config::from_environment(); }), "more than this machine's physical memory"));
  // Each fits in this machine's memory, not both (a 24 GiB machine: 13 GiB each; 128 GiB: 63).
  const std::size_t half = (physical_memory_bytes() >> 30) / 2 + 1;
  const std::string each = "emulated:memory=" + std::to_string(half) + "GiB";
  env.set("OA_DEVICES", each + "," + each);
  CHECK(contains(config_error_of([] { (void)oa::config::from_environment(); }),
                 "the emulated devices' memory (" + each + " takes " + std::to_string(half << 30) +
                     " bytes) adds up to more"));
  env.set("OA_DEVICES", "emulated");
  env.set("OA_DEVICE_MEMORY", "1EiB");  // the devices without a memory of their own take it
  CHECK(contains(config_error_of([] { (void)oa::config::from_environment(); }), "more than this machine's physical memory"));
  ::unsetenv("OA_DEVICE_MEMORY");
  env.set("OA_SPREAD", "fair");
  CHECK(contains(config_error_of([] { (void)oa::config::from_environment(); }),
                 "oa: OA_SPREAD: unknown spread 'fair' (use balanced or even"));
  oa::config f;
  f.merge_json(R"({"devices": "cuda:0,cuda:1", "spread": "balanced"})", "f.json");
  CHECK(f.devices == "cuda:0,cuda:1");
  CHECK(contains(config_error_of([&] { f.merge_json(R"({"devices": "tpu"})", "f.json"); }),
                 "oa: f.json: key 'devices': 'tpu': unknown device kind 'tpu'"));
  // A spec's memory is named as the list's source names it.
  CHECK(contains(config_error_of([&] { f.merge_json(R"({"devices": "emulated:memory=lots"})", "f.json"); }),
                 "oa: f.json: key 'devices': 'emulated:memory=lots': memory: cannot read 'lots'"));
}

TEST_CASE("the unknown-key message lists exactly the accepted keys") {
  const std::set<std::string> accepted{
      "device",     "device_memory", "streams",     "chunk_bytes", "host_threshold", "report",
      "trace",      "link_gbps",     "fail_launch", "fail_copy",   "fail_sticky",    "emulated_device_functions",
      "sequential", "cuda_staging",  "progress",    "verbose",     "emulated_fused", "offload_gemm_min",
      "offload_elements_min", "offload_gemv_min", "keep_copies", "fail_fill", "fail_drain", "link_shared_gbps",
      "link_latency_us", "staging_slot_bytes", "staging_threads", "placement", "perf_models", "serial_stages", "stdpar_min", "devices", "spread",
      "dist_timeout"};
  oa::config c;
  const std::string msg = config_error_of([&] { c.merge_json(R"({"colour": "blue"})", "f.json"); });
  const std::string marker = "(known: ";
  const auto begin = msg.find(marker);
  REQUIRE(begin != std::string::npos);
  REQUIRE(msg.back() == ')');
  std::set<std::string> listed;
  std::istringstream list(msg.substr(begin + marker.size(), msg.size() - 1 - begin - marker.size()));
  for (std::string key; std::getline(list, key, ',');) listed.insert(key.substr(key.find_first_not_of(' ')));
  CHECK(listed == accepted);

  // Each listed key is one the file accepts, and has its variable.
  std::set<std::string> keys;
  for (const auto key : oa::config_keys()) {
    keys.emplace(key);
    CHECK(oa::config_variable(key).substr(0, 3) == "OA_");
    CHECK(std::find(std::begin(all_variables), std::end(all_variables), oa::config_variable(key)) !=
          std::end(all_variables));
  }
  CHECK(keys == accepted);
  c.merge_json(R"({"fail_sticky": true, "emulated_device_functions": true, "cuda_staging": "register"})", "f.json");
  CHECK(c.fail_sticky);
  CHECK(c.emulated_device_functions);
  CHECK(c.cuda_staging == "register");
}

TEST_CASE("from_environment tells where each setting came from") {
  scoped_environment env;
  const temp_file file(R"({"streams": 6, "device": "emulated"})");
  env.set("OA_CONFIG", file.path());
  env.set("OA_DEVICE", "host");
  oa::config_origin origin;
  const oa::config c = oa::config::from_environment(&origin);
  CHECK(c.device == "host");
  CHECK(origin.where("device") == "OA_DEVICE");
  CHECK(origin.where("streams") == file.path() + ": key 'streams'");
  CHECK(origin.where("verbose") == "verbose (default)");
  CHECK(oa::config_origin("set_config").where("streams") == "set_config: streams");
}

TEST_CASE("OA_DEVICE=cuda without a usable GPU: a device_unavailable error naming the setting, at first use") {
  scoped_environment env;
  default_runtime_config runtime;
  std::string why = "built without the CUDA toolkit";
#if defined(OA_HAS_CUDA)
  if (oa::cuda::usable_devices(&why) > 0) {
    MESSAGE("a GPU is usable here: device 'cuda' is made");
    env.set("OA_DEVICE", "cuda");
    oa::config_origin origin;
    oa::set_config(oa::config::from_environment(&origin), origin);
    CHECK(oa::current_device().kind() == oa::device_kind::cuda);
    return;
  }
#endif
  env.set("OA_DEVICE", "cuda");
  oa::config_origin origin;
  // Configuring succeeds: the device is made, and fails, where it is first needed.
  oa::set_config(oa::config::from_environment(&origin), origin);
  try {
    oa::current_device();
    FAIL("expected oa::device_unavailable");
  } catch (const oa::device_unavailable& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind("oa: OA_DEVICE: device 'cuda' cannot be used: no usable GPU (", 0) == 0);
    CHECK(contains(msg, why));
  }
  oa::config c;
  c.device = "cuda";
  oa::set_config(c);
  CHECK_THROWS_WITH_AS(oa::current_device(), doctest::Contains("oa: set_config: device: device 'cuda'"),
                       oa::config_error);
}

TEST_CASE("OA_REPORT and OA_TRACE must be writable when configured") {
  scoped_environment env;
  default_runtime_config runtime;
  const std::string bad = unwritable_path();

  for (const char* variable : {"OA_REPORT", "OA_TRACE"}) {
    CAPTURE(variable);
    scoped_environment inner;
    inner.set(variable, bad);
    const std::string msg = config_error_of([] { oa::config::from_environment(); });
    CHECK(msg.rfind(std::string("oa: ") + variable + ": cannot write '" + bad + "': ", 0) == 0);
  }
  CHECK_NOTHROW(oa::config::from_environment());  // the variables are back to unset

  oa::config c;
  CHECK(config_error_of([&] { c.merge_json(R"({"trace": ")" + bad + R"("})", "f.json"); })
            .rfind("oa: f.json: key 'trace': cannot write '" + bad + "'", 0) == 0);
  c.report = bad;
  CHECK(config_error_of([&] { oa::set_config(c); }).rfind("oa: set_config: report: cannot write", 0) == 0);
  c.report = std::filesystem::temp_directory_path().string();  // a directory
  CHECK(config_error_of([&] { oa::set_config(c); }).rfind("oa: set_config: report: cannot write", 0) == 0);

  // The check neither truncates an existing file nor leaves a new one behind.
  const temp_file existing("keep");
  const std::string fresh =
      (std::filesystem::temp_directory_path() / ("oa_test_config_fresh_" + std::to_string(::getpid()) + ".json"))
          .string();
  env.set("OA_REPORT", existing.path());
  env.set("OA_TRACE", fresh);
  const oa::config d = oa::config::from_environment();
  CHECK(d.report == existing.path());
  std::ifstream in(existing.path());
  std::string text;
  in >> text;
  CHECK(text == "keep");
  CHECK_FALSE(std::filesystem::exists(fresh));
}

TEST_CASE("the emulated device's budget cannot exceed the machine's physical memory") {
  scoped_environment env;
  default_runtime_config runtime;
  const std::size_t physical = physical_memory_bytes();
  const std::string tib100 = std::to_string(100 * ki * ki * ki * ki);

  env.set("OA_DEVICE", "emulated");
  env.set("OA_DEVICE_MEMORY", "100TiB");
  const std::string msg = config_error_of([] { oa::config::from_environment(); });
  CHECK(msg.rfind("oa: OA_DEVICE_MEMORY: " + tib100 + " bytes is more than this machine's physical memory (" +
                      std::to_string(physical) + " bytes)",
                  0) == 0);

  // The device from the file, the budget from the variable: the variable is named.
  const temp_file file(R"({"device": "emulated"})");
  env.set("OA_CONFIG", file.path());
  env.set("OA_DEVICE", "");
  CHECK(config_error_of([] { oa::config::from_environment(); }).rfind("oa: OA_DEVICE_MEMORY: ", 0) == 0);

  // The host device's budget is a planning target: any size goes.
  env.set("OA_DEVICE", "host");
  CHECK(oa::config::from_environment().device_memory == 100 * ki * ki * ki * ki);

  oa::config c;
  CHECK(config_error_of([&] { c.merge_json(R"({"device": "emulated", "device_memory": "100TiB"})", "f.json"); })
            .rfind("oa: f.json: key 'device_memory': " + tib100 + " bytes is more than", 0) == 0);
  c.device = "emulated";
  c.device_memory = physical + 1;
  CHECK(config_error_of([&] { oa::set_config(c); }).rfind("oa: set_config: device_memory: ", 0) == 0);
  c.device_memory = physical;
  oa::set_config(c);  // validated only: the emulated device reserves nothing up front
  CHECK(oa::current_config().device_memory == physical);
}

// --- one rule per setting, whatever the source -------------------------------------

TEST_CASE("device and staging names are exact from every source: the environment, a file, set_config") {
  scoped_environment env;
  default_runtime_config restore;
  for (const char* name : {" Emulated ", "Emulated", "emulated ", "HOST"}) {
    const std::string shown = name;
    CAPTURE(shown);
    env.set("OA_DEVICE", name);
    const std::string from_env = config_error_of([] { oa::config::from_environment(); });
    CHECK(contains(from_env, "OA_DEVICE: unknown device '" + shown + "'"));
    CHECK(contains(from_env, "exactly"));
    ::unsetenv("OA_DEVICE");
    oa::config c;
    CHECK(contains(config_error_of([&] { c.merge_json(R"({"device": ")" + shown + "\"}", "f.json"); }),
                   "f.json: key 'device': unknown device"));
    c.device = name;
    CHECK(contains(config_error_of([&] { oa::set_config(c); }), "set_config: device: unknown device"));
  }
  env.set("OA_CUDA_STAGING", "Register");
  CHECK(contains(config_error_of([] { oa::config::from_environment(); }), "OA_CUDA_STAGING: unknown staging"));
}

TEST_CASE("OA_HOST_MATH: an unknown value is an error naming it and the accepted values") {
  scoped_environment env;
  const char* saved = std::getenv("OA_HOST_MATH");
  const std::optional<std::string> restore = saved ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv("OA_HOST_MATH", "banana", 1);
  const std::string msg = config_error_of([] { oa::config::from_environment(); });
  const std::string read_msg = config_error_of([] { oa::config::read_environment(); });
  for (const char* good : {"auto", "eigen", "avx2", "avx512"}) {
    ::setenv("OA_HOST_MATH", good, 1);
    CHECK_NOTHROW(oa::config::from_environment());
  }
  if (restore)
    ::setenv("OA_HOST_MATH", restore->c_str(), 1);
  else
    ::unsetenv("OA_HOST_MATH");
  CHECK(msg == "oa: OA_HOST_MATH: unknown host math 'banana' (use auto, eigen, avx2 or avx512)");
  CHECK(read_msg == msg);
}

TEST_CASE("link bandwidth: bounded where it is validated, naming the setting") {
  scoped_environment env;
  env.set("OA_LINK_GBPS", "1e300");
  CHECK(contains(config_error_of([] { oa::config::from_environment(); }),
                 "OA_LINK_GBPS: link bandwidth must be a number from 0 to 1e6 (GB/s; 0 = unthrottled), got 1e+300"));
  env.set("OA_LINK_GBPS", "1e6");
  CHECK(oa::config::from_environment().link_gbps == 1e6);
  oa::config c;
  CHECK(contains(config_error_of([&] { c.merge_json(R"({"link_gbps": 2e6})", "f.json"); }), "f.json: key 'link_gbps'"));
  c.device = "emulated";
  c.link_gbps = 1e300;
  CHECK(contains(config_error_of([&] { oa::runtime rt(c); }), "oa::runtime: link_gbps: link bandwidth"));
  // The largest bandwidth validation lets through makes a device.
  c.link_gbps = 1e6;
  oa::runtime rt(c);
  CHECK(rt.main_device().name() == "emulated");
}

TEST_CASE("read_environment: a setting a program's option replaces is never read, however malformed") {
  scoped_environment env;
  env.set("OA_STREAMS", "99");
  env.set("OA_DEVICE", "gpu");
  env.set("OA_DEVICE_MEMORY", "banana");
  env.set("OA_LINK_GBPS", "fast");
  const std::vector<std::string_view> replaced = {"streams", "device", "device_memory", "link_gbps"};
  oa::config_origin origin;
  oa::config c = oa::config::read_environment(&origin, replaced);
  CHECK(c.streams == 0);
  CHECK(c.device == "auto");
  CHECK(origin.where("streams") == "streams (default)");
  for (const auto key : replaced) {  // each alone is still an error when it is read
    std::vector<std::string_view> others;
    for (const auto k : replaced)
      if (k != key) others.push_back(k);
    const std::string msg = config_error_of([&] {
      oa::config_origin o;
      oa::validate(oa::config::read_environment(&o, others), o);
    });
    CHECK(msg.rfind("oa: " + std::string(oa::config_variable(key)) + ": ", 0) == 0);
  }
  // The file's values too: a key an option replaces is not read.
  ::unsetenv("OA_STREAMS");
  ::unsetenv("OA_DEVICE");
  ::unsetenv("OA_DEVICE_MEMORY");
  ::unsetenv("OA_LINK_GBPS");
  temp_file file(R"({"streams": 1000, "device": 7, "verbose": true})");
  env.set("OA_CONFIG", file.path());
  c = oa::config::read_environment(nullptr, {"streams", "device"});
  CHECK(c.verbose);
  CHECK(c.streams == 0);
  CHECK(contains(config_error_of([] { oa::config::read_environment(nullptr, {"device"}); }), "key 'streams'"));
  CHECK(contains(config_error_of([] { oa::config::read_environment(nullptr, {"streams"}); }), "key 'device'"));
}

TEST_CASE("the report, the trace and the cost models are three files: one path for two is refused, naming both") {
  scoped_environment env;
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string file = dir + "/oa_test_config_same_file.json";
  oa::config c = oa::config::from_environment();
  c.report = file;
  c.trace = file;
  CHECK(config_error_of([&] { oa::set_config(c); }) ==
        "oa: set_config: report: '" + file + "' is also set_config: trace's file: each writes a file of its own "
        "(one would replace the other)");
  // Spelled differently, the same file.
  c.trace.clear();
  c.perf_models = dir + "/./oa_test_config_same_file.json";
  env.set("OA_REPORT", file);
  env.set("OA_PERF_MODELS", c.perf_models);
  CHECK(contains(config_error_of([] { oa::config::from_environment(); }),
                 "oa: OA_REPORT: '" + file + "' is also OA_PERF_MODELS's file"));
  c.perf_models = dir + "/oa_test_config_other_file.json";
  CHECK_NOTHROW(oa::validate(c, oa::config_origin("set_config")));
  CHECK(!std::filesystem::exists(file));  // checked, never written
}
