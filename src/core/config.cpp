#include "oa/core/config.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "oa/core/device.hpp"
#include "oa/core/error.hpp"

namespace oa {

namespace {

constexpr int max_streams = 64;
// 1 PB/s: far beyond any link, and its bytes per second are still finite.
constexpr double max_link_gbps = 1e6;
// 1 MB/s: slower, a throttled copy of a chunk seems to hang.
constexpr double min_link_gbps = 1e-3;
constexpr const char* byte_size_hint = " (use e.g. 4096, 64MiB, 1.5GiB)";

[[noreturn]] void fail(const std::string& what, const std::string& message) {
  throw config_error("oa: " + what + ": " + message);
}

/// A setting's number in the fewest digits that read back as it (-1,
/// 1000000.5, 1e+20), not std::to_string's six decimals.
std::string number_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, end) : std::to_string(v);
}

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Bytes per unit of a suffix (already lower-cased); 0 when unknown.
std::uint64_t suffix_multiplier(std::string_view suffix) {
  struct unit {
    std::string_view name;
    std::uint64_t bytes;
  };
  static constexpr std::uint64_t ki = 1024;
  static constexpr unit units[] = {
      {"", 1},
      {"b", 1},
      {"k", ki},
      {"kib", ki},
      {"kb", 1000},
      {"m", ki * ki},
      {"mib", ki * ki},
      {"mb", 1000 * 1000},
      {"g", ki * ki * ki},
      {"gib", ki * ki * ki},
      {"gb", 1000ull * 1000 * 1000},
      {"t", ki * ki * ki * ki},
      {"tib", ki * ki * ki * ki},
      {"tb", 1000ull * 1000 * 1000 * 1000},
      {"p", ki * ki * ki * ki * ki},
      {"pib", ki * ki * ki * ki * ki},
      {"pb", 1000ull * 1000 * 1000 * 1000 * 1000},
      {"e", ki * ki * ki * ki * ki * ki},
      {"eib", ki * ki * ki * ki * ki * ki},
      {"eb", 1000ull * 1000 * 1000 * 1000 * 1000 * 1000},
  };
  for (const auto& u : units)
    if (u.name == suffix) return u.bytes;
  return 0;
}

std::uint64_t parse_unsigned(const std::string& text, const std::string& what, const char* expected) {
  const std::string_view s = trim(text);
  std::uint64_t value = 0;
  // Digits only: a sign is no count, and "-1" must not wrap around to a huge one.
  if (s.empty() || !is_digit(s.front())) fail(what, "cannot read '" + text + "' as " + expected);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) fail(what, "'" + text + "' is too large");
  if (ec != std::errc{} || end != s.data() + s.size())
    fail(what, "cannot read '" + text + "' as " + expected);
  return value;
}

// --- checks shared by every source ------------------------------------------------

[[noreturn]] void streams_out_of_range(const std::string& shown, const std::string& what) {
  fail(what, shown + " is out of range (1-" + std::to_string(max_streams) + ", or 0 for the device's default)");
}

[[noreturn]] void staging_threads_out_of_range(const std::string& shown, const std::string& what) {
  fail(what, shown + " is out of range (1-64, or 0 for the device's default)");
}

void check_streams(int n, const std::string& what) {
  if (n < 0 || n > max_streams) streams_out_of_range(std::to_string(n), what);
}

[[noreturn]] void progress_out_of_range(const std::string& shown, const std::string& what) {
  fail(what, shown + " is out of range (1 on, 0 off, -1 when stderr is a terminal)");
}

void check_progress(int p, const std::string& what) {
  if (p < -1 || p > 1) progress_out_of_range(std::to_string(p), what);
}

void check_link_gbps(double v, const std::string& what) {
  if (!std::isfinite(v) || v < 0 || v > max_link_gbps) {
    fail(what, "link bandwidth must be a number from 0 to 1e6 (GB/s; 0 = unthrottled), got " + number_text(v));
  }
  if (v > 0 && v < min_link_gbps) {
    std::ostringstream shown;
    shown << v;
    fail(what, "a link of " + shown.str() + " GB/s is below the minimum, 0.001 GB/s (0 = unthrottled)");
  }
}

// Names are exact from every source: what the environment accepts, a file,
// an option and the API accept too.
void check_device(const std::string& name, const std::string& what) {
  if (name != "auto" && name != "host" && name != "emulated" && name != "cuda")
    fail(what, "unknown device '" + name + "' (use auto, host, emulated or cuda, exactly: lower case, no spaces)");
}

void check_placement(const std::string& name, const std::string& what) {
  if (name != "threshold" && name != "cost")
    fail(what, "unknown placement '" + name + "' (use threshold or cost, exactly: lower case, no spaces)");
}

void check_cuda_staging(const std::string& name, const std::string& what) {
  if (name != "register" && name != "pinned")
    fail(what, "unknown staging '" + name + "' (use pinned or register, exactly: lower case, no spaces)");
}

/// OA_HOST_MATH is read once, when the library loads (oa/core/ops.hpp): it is
/// no setting of a config, but a bad value is refused with them.
void check_host_math_variable(const char* value) {
  if (value == nullptr) return;
  const std::string_view v = value;
  if (v != "auto" && v != "eigen" && v != "avx2" && v != "avx512")
    fail("OA_HOST_MATH", "unknown host math '" + std::string(v) + "' (use auto, eigen, avx2 or avx512)");
}

/// The file can be created or appended to: opened for append (never
/// truncated), and removed again when this check created it, so that a bad
/// path fails at configuration rather than when the file is written at exit.
void check_writable(const std::string& path, const std::string& what) {
  if (path.empty()) return;
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  bool created = false;
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    created = fd >= 0;
  }
  if (fd < 0) fail(what, "cannot write '" + path + "': " + std::strerror(errno));
  ::close(fd);
  if (created) ::unlink(path.c_str());
}

std::size_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return std::numeric_limits<std::size_t>::max();  // unknown: no cap
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size);
}

/// The emulated device's memory is host memory: a budget beyond the machine's
/// physical memory can never be met. (The host device's budget is a planning
/// target; the CUDA device's is checked against the GPU when it is made.)
void check_device_memory(const config& c, const std::string& what) {
  // OA_DEVICES' emulated devices without a memory of their own take it too.
  if (c.device != "emulated" && c.devices.find("emulated") == std::string::npos) return;
  const std::size_t physical = physical_memory();
  if (c.device_memory > physical)
    fail(what, std::to_string(c.device_memory) + " bytes is more than this machine's physical memory (" +
                   std::to_string(physical) + " bytes), which the emulated device's memory is part of");
}

/// OA_DEVICES: each spec readable, and the emulated devices' memory, all
/// together, within the machine's physical memory (which it is part of).
void check_devices(const config& c, const std::string& what) {
  const std::size_t physical = physical_memory();
  std::size_t total = 0;  // at most `physical`
  for (const device_spec& d : parse_device_specs(c.devices, what)) {
    if (d.kind != "emulated") continue;
    const std::size_t bytes = d.memory.value_or(c.device_memory ? c.device_memory : emulated_options{}.memory_budget);
    if (bytes > physical - total)
      fail(what, "'" + c.devices + "': the emulated devices' memory (" + d.text + " takes " + std::to_string(bytes) +
                     " bytes) adds up to more than this machine's physical memory (" +
                     std::to_string(physical) + " bytes), which the emulated devices' memory is part of");
    total += bytes;
  }
}

// --- environment values ---------------------------------------------------------

bool env_bool(const std::string& text, const std::string& var) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  fail(var, "cannot read '" + text + "' as a switch (use 0, 1, true or false)");
}

int env_streams(const std::string& text, const std::string& var) {
  const std::uint64_t n = parse_unsigned(text, var, "a stream count");
  if (n > max_streams) streams_out_of_range(std::string(trim(text)), var);
  return static_cast<int>(n);
}

double env_double(const std::string& text, const std::string& var) {
  const std::string_view s = trim(text);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size())
    fail(var, "cannot read '" + text + "' as a number");
  return v;
}

// --- JSON values ------------------------------------------------------------------

[[noreturn]] void wrong_type(const nlohmann::json& v, const std::string& what, const char* expected) {
  fail(what, std::string("expected ") + expected + ", got " + v.type_name() + " " + v.dump());
}

std::uint64_t json_unsigned(const nlohmann::json& v, const std::string& what, const char* expected) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) fail(what, "must not be negative, got " + v.dump());
  if (v.is_number_float()) {
    // 1e9 arrives as a float; accept it when it is a whole number in range.
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d >= 18446744073709551616.0)
      fail(what, "expected " + std::string(expected) + ", got " + v.dump());
    return static_cast<std::uint64_t>(d);
  }
  wrong_type(v, what, expected);
}

std::size_t json_bytes(const nlohmann::json& v, const std::string& what) {
  if (v.is_string()) return parse_bytes(v.get<std::string>(), what);
  if (v.is_number()) return json_unsigned(v, what, "a byte size");
  wrong_type(v, what, "a byte size (a number or a string such as \"64MiB\")");
}

bool json_bool(const nlohmann::json& v, const std::string& what) {
  if (!v.is_boolean()) wrong_type(v, what, "true or false");
  return v.get<bool>();
}

std::string json_string(const nlohmann::json& v, const std::string& what) {
  if (!v.is_string()) wrong_type(v, what, "a string");
  return v.get<std::string>();
}

/// An integer within [lo, hi]; `out_of_range` names the accepted values.
int json_small_integer(const nlohmann::json& v, const std::string& what, int lo, int hi,
                       void (*out_of_range)(const std::string&, const std::string&)) {
  if (!v.is_number_integer()) wrong_type(v, what, "an integer");
  const bool in_range = v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
                                               : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  if (!in_range) out_of_range(v.dump(), what);
  return v.get<int>();
}

// --- OA_STDPAR_MIN ----------------------------------------------------------------

constexpr const char* stdpar_count = "a count of elements";
constexpr const char* stdpar_families = "sort, elementwise, reduction, scan";
constexpr const char* stdpar_syntax =
    " (use one count for every family, e.g. 0, or family=count entries separated by commas, e.g. "
    "sort=65536,scan=0; families: sort, elementwise, reduction, scan)";

/// 'text', for messages.
std::string in_quotes(std::string_view text) {
  std::string out(1, '\'');
  out.append(text);
  out += '\'';
  return out;
}

/// The threshold of the family `name` in `t`; null for a name that is none.
std::uint64_t* stdpar_family(stdpar_thresholds& t, std::string_view name) {
  if (name == "sort") return &t.sort;
  if (name == "elementwise") return &t.elementwise;
  if (name == "reduction") return &t.reduction;
  if (name == "scan") return &t.scan;
  return nullptr;
}

/// "0" sets every family; "sort=65536,scan=0" the families it names, the
/// others keeping their value in `t` (the default, or OA_CONFIG's).
stdpar_thresholds parse_stdpar_min(const std::string& text, const std::string& what, stdpar_thresholds t) {
  const std::string_view s = trim(text);
  if (s.find('=') == std::string_view::npos) {
    const std::uint64_t n = parse_unsigned(text, what, (std::string(stdpar_count) + stdpar_syntax).c_str());
    return {n, n, n, n};
  }
  std::vector<std::string_view> named;
  for (std::size_t begin = 0; begin <= s.size();) {
    const std::size_t comma = std::min(s.find(',', begin), s.size());
    const std::string_view entry = trim(s.substr(begin, comma - begin));
    begin = comma + 1;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      fail(what, entry.empty() ? std::string("an empty entry in ") + in_quotes(text) + stdpar_syntax
                               : in_quotes(entry) + " is not family=count" + stdpar_syntax);
    const std::string_view name = trim(entry.substr(0, eq));
    std::uint64_t* slot = stdpar_family(t, name);
    if (slot == nullptr)
      fail(what, std::string("unknown family ") + in_quotes(name) + " in " + in_quotes(entry) + " (families: " +
                     stdpar_families + ")");
    if (std::find(named.begin(), named.end(), name) != named.end())
      fail(what, std::string("family ") + in_quotes(name) + " given twice in " + in_quotes(text));
    named.push_back(name);
    *slot = parse_unsigned(std::string(entry.substr(eq + 1)), what + ": " + std::string(name), stdpar_count);
  }
  return t;
}

/// A number (every family) or an object of counts by family (the others
/// keep their value).
stdpar_thresholds json_stdpar_min(const nlohmann::json& v, const std::string& what, stdpar_thresholds t) {
  if (v.is_number()) {
    const std::uint64_t n = json_unsigned(v, what, stdpar_count);
    return {n, n, n, n};
  }
  if (!v.is_object())
    wrong_type(v, what, "a count of elements or an object of counts by family ({\"sort\": 65536, \"scan\": 0, ...})");
  for (const auto& [name, count] : v.items()) {
    std::uint64_t* slot = stdpar_family(t, name);
    if (slot == nullptr) fail(what, std::string("unknown family ") + in_quotes(name) + " (families: " + stdpar_families + ")");
    *slot = json_unsigned(count, what + ": " + name, stdpar_count);
  }
  return t;
}

// --- the settings ------------------------------------------------------------------

/// One setting: its JSON key (the field's name), its variable, how each
/// source's text becomes the field, and the field's check. Every source goes
/// through this table, so keys, variables and checks cannot drift apart.
struct setting {
  std::string_view key;
  std::string_view variable;
  void (*from_text)(config&, const std::string& text, const std::string& what);
  void (*from_json)(config&, const nlohmann::json& value, const std::string& what);
  void (*check)(const config&, const std::string& what);
};

void no_check(const config&, const std::string&) {}

const setting settings[] = {
    {"device", "OA_DEVICE", [](config& c, const std::string& t, const std::string&) { c.device = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.device = json_string(v, w); },
     [](const config& c, const std::string& w) { check_device(c.device, w); }},
    {"devices", "OA_DEVICES", [](config& c, const std::string& t, const std::string&) { c.devices = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.devices = json_string(v, w); },
     [](const config& c, const std::string& w) { check_devices(c, w); }},
    {"spread", "OA_SPREAD", [](config& c, const std::string& t, const std::string&) { c.spread = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.spread = json_string(v, w); },
     [](const config& c, const std::string& w) {
       if (c.spread != "balanced" && c.spread != "even")
         fail(w, "unknown spread '" + c.spread + "' (use balanced or even, exactly: lower case, no spaces)");
     }},
    {"device_memory", "OA_DEVICE_MEMORY",
     [](config& c, const std::string& t, const std::string& w) { c.device_memory = parse_bytes(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.device_memory = json_bytes(v, w); },
     check_device_memory},
    {"streams", "OA_STREAMS", [](config& c, const std::string& t, const std::string& w) { c.streams = env_streams(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       c.streams = json_small_integer(v, w, 0, max_streams, streams_out_of_range);
     },
     [](const config& c, const std::string& w) { check_streams(c.streams, w); }},
    {"chunk_bytes", "OA_CHUNK_BYTES",
     [](config& c, const std::string& t, const std::string& w) { c.chunk_bytes = parse_bytes(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.chunk_bytes = json_bytes(v, w); }, no_check},
    {"host_threshold", "OA_HOST_THRESHOLD",
     [](config& c, const std::string& t, const std::string& w) { c.host_threshold = parse_bytes(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.host_threshold = json_bytes(v, w); }, no_check},
    {"placement", "OA_PLACEMENT", [](config& c, const std::string& t, const std::string&) { c.placement = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.placement = json_string(v, w); },
     [](const config& c, const std::string& w) { check_placement(c.placement, w); }},
    {"perf_models", "OA_PERF_MODELS", [](config& c, const std::string& t, const std::string&) { c.perf_models = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.perf_models = json_string(v, w); },
     [](const config& c, const std::string& w) { check_writable(c.perf_models, w); }},
    {"report", "OA_REPORT", [](config& c, const std::string& t, const std::string&) { c.report = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.report = json_string(v, w); },
     [](const config& c, const std::string& w) { check_writable(c.report, w); }},
    {"trace", "OA_TRACE", [](config& c, const std::string& t, const std::string&) { c.trace = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.trace = json_string(v, w); },
     [](const config& c, const std::string& w) { check_writable(c.trace, w); }},
    {"link_gbps", "OA_LINK_GBPS",
     [](config& c, const std::string& t, const std::string& w) { c.link_gbps = env_double(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       if (!v.is_number()) wrong_type(v, w, "a number (GB/s)");
       c.link_gbps = v.get<double>();
     },
     [](const config& c, const std::string& w) { check_link_gbps(c.link_gbps, w); }},
    {"fail_launch", "OA_FAIL_LAUNCH",
     [](config& c, const std::string& t, const std::string& w) { c.fail_launch = parse_unsigned(t, w, "a launch count"); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.fail_launch = json_unsigned(v, w, "a launch count"); },
     no_check},
    {"fail_copy", "OA_FAIL_COPY",
     [](config& c, const std::string& t, const std::string& w) { c.fail_copy = parse_unsigned(t, w, "a copy count"); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.fail_copy = json_unsigned(v, w, "a copy count"); },
     no_check},
    {"fail_fill", "OA_FAIL_FILL",
     [](config& c, const std::string& t, const std::string& w) { c.fail_fill = parse_unsigned(t, w, "a fill count"); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.fail_fill = json_unsigned(v, w, "a fill count"); },
     no_check},
    {"fail_drain", "OA_FAIL_DRAIN",
     [](config& c, const std::string& t, const std::string& w) { c.fail_drain = parse_unsigned(t, w, "a drain count"); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.fail_drain = json_unsigned(v, w, "a drain count"); },
     no_check},
    {"link_shared_gbps", "OA_LINK_SHARED_GBPS",
     [](config& c, const std::string& t, const std::string& w) { c.link_shared_gbps = env_double(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       if (!v.is_number()) wrong_type(v, w, "a number (GB/s)");
       c.link_shared_gbps = v.get<double>();
     },
     [](const config& c, const std::string& w) { check_link_gbps(c.link_shared_gbps, w); }},
    {"dist_timeout", "OA_DIST_TIMEOUT",
     [](config& c, const std::string& t, const std::string& w) { c.dist_timeout = env_double(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       if (!v.is_number()) wrong_type(v, w, "a number (seconds)");
       c.dist_timeout = v.get<double>();
     },
     [](const config& c, const std::string& w) {
       if (!std::isfinite(c.dist_timeout) || c.dist_timeout < 0 || c.dist_timeout > 1e6)
         fail(w, number_text(c.dist_timeout) + " is out of range (0-1e6 seconds; 0: no deadline)");
     }},
    {"link_latency_us", "OA_LINK_LATENCY_US",
     [](config& c, const std::string& t, const std::string& w) { c.link_latency_us = env_double(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       if (!v.is_number()) wrong_type(v, w, "a number (microseconds)");
       c.link_latency_us = v.get<double>();
     },
     [](const config& c, const std::string& w) {
       if (!std::isfinite(c.link_latency_us) || c.link_latency_us < 0 || c.link_latency_us > 1e6)
         fail(w, number_text(c.link_latency_us) + " is out of range (0-1e6 microseconds)");
     }},
    {"staging_slot_bytes", "OA_STAGING_SLOT_BYTES",
     [](config& c, const std::string& t, const std::string& w) { c.staging_slot_bytes = parse_bytes(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.staging_slot_bytes = json_bytes(v, w); },
     [](const config& c, const std::string& w) {
       if (c.staging_slot_bytes != 0 && (c.staging_slot_bytes < 4096 || c.staging_slot_bytes > (std::size_t{1} << 30)))
         fail(w, std::to_string(c.staging_slot_bytes) + " bytes is out of range (4 KiB-1 GiB, or 0 for the device's default)");
     }},
    {"staging_threads", "OA_STAGING_THREADS",
     [](config& c, const std::string& t, const std::string& w) {
       c.staging_threads = static_cast<int>(std::min<std::uint64_t>(parse_unsigned(t, w, "a thread count"), 65));
     },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       c.staging_threads = json_small_integer(v, w, 0, 64, staging_threads_out_of_range);
     },
     [](const config& c, const std::string& w) {
       if (c.staging_threads < 0 || c.staging_threads > 64) staging_threads_out_of_range(std::to_string(c.staging_threads), w);
     }},
    {"fail_sticky", "OA_FAIL_STICKY",
     [](config& c, const std::string& t, const std::string& w) { c.fail_sticky = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.fail_sticky = json_bool(v, w); }, no_check},
    {"emulated_device_functions", "OA_EMULATED_DEVICE_FUNCTIONS",
     [](config& c, const std::string& t, const std::string& w) { c.emulated_device_functions = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.emulated_device_functions = json_bool(v, w); },
     no_check},
    {"emulated_fused", "OA_EMULATED_FUSED",
     [](config& c, const std::string& t, const std::string& w) { c.emulated_fused = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.emulated_fused = json_bool(v, w); }, no_check},
    {"keep_copies", "OA_KEEP_COPIES",
     [](config& c, const std::string& t, const std::string& w) { c.keep_copies = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.keep_copies = json_bool(v, w); }, no_check},
    {"sequential", "OA_SEQUENTIAL",
     [](config& c, const std::string& t, const std::string& w) { c.sequential = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.sequential = json_bool(v, w); }, no_check},
    {"serial_stages", "OA_SERIAL_STAGES",
     [](config& c, const std::string& t, const std::string& w) { c.serial_stages = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.serial_stages = json_bool(v, w); }, no_check},
    {"offload_gemm_min", "OA_OFFLOAD_GEMM_MIN",
     [](config& c, const std::string& t, const std::string& w) {
       c.offload_gemm_min = parse_unsigned(t, w, "a count of multiply-adds (m n k)");
     },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       c.offload_gemm_min = json_unsigned(v, w, "a count of multiply-adds (m n k)");
     },
     no_check},
    {"offload_elements_min", "OA_OFFLOAD_ELEMENTS_MIN",
     [](config& c, const std::string& t, const std::string& w) {
       c.offload_elements_min = parse_unsigned(t, w, "a count of coefficients");
     },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       c.offload_elements_min = json_unsigned(v, w, "a count of coefficients");
     },
     no_check},
    {"offload_gemv_min", "OA_OFFLOAD_GEMV_MIN",
     [](config& c, const std::string& t, const std::string& w) {
       c.offload_gemv_min = parse_unsigned(t, w, "a count of matrix coefficients (m k)");
     },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       c.offload_gemv_min = json_unsigned(v, w, "a count of matrix coefficients (m k)");
     },
     no_check},
    {"stdpar_min", "OA_STDPAR_MIN",
     [](config& c, const std::string& t, const std::string& w) { c.stdpar_min = parse_stdpar_min(t, w, c.stdpar_min); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.stdpar_min = json_stdpar_min(v, w, c.stdpar_min); },
     no_check},
    {"cuda_staging", "OA_CUDA_STAGING",
     [](config& c, const std::string& t, const std::string&) { c.cuda_staging = t; },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.cuda_staging = json_string(v, w); },
     [](const config& c, const std::string& w) { check_cuda_staging(c.cuda_staging, w); }},
    {"progress", "OA_PROGRESS",
     [](config& c, const std::string& t, const std::string& w) { c.progress = env_bool(t, w) ? 1 : 0; },
     [](config& c, const nlohmann::json& v, const std::string& w) {
       // true/false, or -1 for "when stderr is a terminal" (the default).
       c.progress = v.is_boolean() ? (v.get<bool>() ? 1 : 0) : json_small_integer(v, w, -1, 1, progress_out_of_range);
     },
     [](const config& c, const std::string& w) { check_progress(c.progress, w); }},
    {"verbose", "OA_VERBOSE", [](config& c, const std::string& t, const std::string& w) { c.verbose = env_bool(t, w); },
     [](config& c, const nlohmann::json& v, const std::string& w) { c.verbose = json_bool(v, w); }, no_check},
};

const setting* find_setting(std::string_view key) {
  for (const auto& s : settings)
    if (s.key == key) return &s;
  return nullptr;
}

std::string known_keys() {
  std::string out;
  for (const auto& s : settings) {
    if (!out.empty()) out += ", ";
    out += s.key;
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("OA_CONFIG", "cannot read config file '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("OA_CONFIG", "cannot read config file '" + path + "'");
  return text.str();
}

/// Empty counts as unset, so `OA_X= prog` behaves like not setting OA_X.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

std::size_t parse_bytes(const std::string& text, const std::string& what) {
  const auto bad = [&]() { fail(what, "cannot read '" + text + "' as a byte size" + byte_size_hint); };
  const auto too_large = [&]() { fail(what, "byte size '" + text + "' is too large"); };

  const std::string_view s = trim(text);
  std::size_t i = 0;
  while (i < s.size() && is_digit(s[i])) ++i;
  const std::string_view int_digits = s.substr(0, i);
  std::string_view frac_digits;
  if (i < s.size() && s[i] == '.') {
    const std::size_t frac_begin = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    frac_digits = s.substr(frac_begin, i - frac_begin);
    if (frac_digits.empty()) bad();  // "1." is more likely a typo than a number
  }
  if (int_digits.empty() && frac_digits.empty()) bad();  // also rejects signs and empty text

  const std::string_view rest = trim(s.substr(i));
  const std::uint64_t unit = suffix_multiplier(lower(rest));
  if (unit == 0) bad();

  std::uint64_t whole = 0;
  for (const char c : int_digits) {
    if (__builtin_mul_overflow(whole, 10u, &whole) ||
        __builtin_add_overflow(whole, static_cast<std::uint64_t>(c - '0'), &whole))
      too_large();
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(whole, unit, &bytes)) too_large();

  // floor(0.d1d2...dn * unit) exactly, from the last digit to the first:
  // each step keeps the partial value below 11 * unit, so nothing overflows.
  // floor(0.d1d2...dn * unit) exactly, from the last digit to the first:
  // each step keeps the partial value below 11 * unit, so nothing overflows.
  // A remainder at any step means a fraction of a byte, which a size with a
  // suffix drops and a plain byte count may not have.
  std::uint64_t part = 0;
  bool exact = true;
  for (auto it = frac_digits.rbegin(); it != frac_digits.rend(); ++it) {
    const std::uint64_t scaled = static_cast<std::uint64_t>(*it - '0') * unit + part;
    exact = exact && scaled % 10 == 0;
    part = scaled / 10;
  }
  if (!exact && unit == 1) fail(what, "'" + text + "' is not a whole number of bytes" + byte_size_hint);
  if (__builtin_add_overflow(bytes, part, &bytes)) too_large();
  if (bytes > std::numeric_limits<std::size_t>::max()) too_large();
  // 0 means "the default" to the settings that take sizes: a positive size
  // must not become it by rounding.
  if (bytes == 0 && frac_digits.find_first_not_of('0') != std::string_view::npos)
    fail(what, "'" + text + "' is less than one byte" + byte_size_hint);
  return static_cast<std::size_t>(bytes);
}

namespace {
/// Reads a JSON object's keys into a copy of `c` (type errors, unknown keys);
/// the settings' checks are the caller's.
config overlay_json(const config& c, const std::string& json_text, const std::string& source, config_origin* origins,
                    const std::vector<std::string_view>& replaced = {});
}  // namespace

void config::merge_json(const std::string& json_text, const std::string& source, config_origin* origins) {
  config_origin merged = origins != nullptr ? *origins : config_origin{};
  config next = overlay_json(*this, json_text, source, &merged);
  // Checked once every key is in (a budget's check depends on the device);
  // applied only then, so that a bad key leaves *this untouched.
  validate(next, merged);
  if (origins != nullptr) *origins = std::move(merged);
  *this = std::move(next);
}

namespace {
config overlay_json(const config& c, const std::string& json_text, const std::string& source, config_origin* origins,
                    const std::vector<std::string_view>& replaced) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(source, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(source, std::string("expected a JSON object, got ") + doc.type_name());
  config next = c;
  for (const auto& [key, value] : doc.items()) {
    const setting* s = find_setting(key);
    if (s == nullptr) fail(source, "unknown key '" + key + "' (known: " + known_keys() + ")");
    if (std::find(replaced.begin(), replaced.end(), s->key) != replaced.end()) continue;
    s->from_json(next, value, source + ": key '" + key + "'");
    if (origins != nullptr) origins->set(key, source + ": key '" + key + "'");
  }
  return next;
}
}  // namespace

config config::from_environment(config_origin* origins) {
  config_origin origin;
  config c = read_environment(&origin);
  validate(c, origin);
  if (origins != nullptr) *origins = std::move(origin);
  return c;
}

config config::read_environment(config_origin* origins, const std::vector<std::string_view>& replaced) {
  check_host_math_variable(env("OA_HOST_MATH"));
  config c;
  config_origin origin;
  // The file's values are checked with the variables over them: a value a
  // variable replaces is not the one that runs.
  if (const char* path = env("OA_CONFIG")) c = overlay_json(c, read_file(path), path, &origin, replaced);
  for (const auto& s : settings) {
    if (std::find(replaced.begin(), replaced.end(), s.key) != replaced.end()) continue;
    const std::string variable(s.variable);
    if (const char* v = env(variable.c_str())) {
      s.from_text(c, v, variable);
      origin.set(s.key, variable);
    }
  }
  if (origins != nullptr) *origins = std::move(origin);
  return c;
}

std::string config_origin::where(std::string_view key) const {
  for (const auto& [k, w] : named_)
    if (k == key) return w;
  if (source_.empty()) return std::string(key) + " (default)";
  return source_ + ": " + std::string(key);
}

void config_origin::set(std::string_view key, std::string where) {
  for (auto& [k, w] : named_)
    if (k == key) {
      w = std::move(where);
      return;
    }
  named_.emplace_back(key, std::move(where));
}

namespace {

/// The files oa writes (the report, the trace, the cost models) are three
/// different files: one would overwrite another.
void check_distinct_files(const config& c, const config_origin& origin) {
  const std::pair<const char*, const std::string*> files[] = {
      {"report", &c.report}, {"trace", &c.trace}, {"perf_models", &c.perf_models}};
  const auto normal = [](const std::string& path) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    return ec ? std::filesystem::path(path).lexically_normal() : p;
  };
  for (std::size_t i = 0; i < std::size(files); ++i)
    for (std::size_t j = i + 1; j < std::size(files); ++j) {
      const std::string &a = *files[i].second, &b = *files[j].second;
      if (a.empty() || b.empty() || normal(a) != normal(b)) continue;
      fail(origin.where(files[i].first), "'" + a + "' is also " + origin.where(files[j].first) +
                                             "'s file: each writes a file of its own (one would replace the other)");
    }
}

}  // namespace

void validate(const config& c, const config_origin& origin) {
  for (const auto& s : settings) s.check(c, origin.where(s.key));
  check_distinct_files(c, origin);
}

std::vector<std::string_view> config_keys() {
  std::vector<std::string_view> keys;
  for (const auto& s : settings) keys.push_back(s.key);
  return keys;
}

std::string_view config_variable(std::string_view key) {
  const setting* s = find_setting(key);
  return s != nullptr ? s->variable : std::string_view{};
}

}  // namespace oa
