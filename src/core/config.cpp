#include "oa/core/config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "oa/core/error.hpp"

namespace oa {

namespace {

constexpr int max_streams = 64;
constexpr const char* byte_size_hint = " (use e.g. 4096, 64MiB, 1.5GiB)";

[[noreturn]] void fail(const std::string& what, const std::string& message) {
  throw config_error("oa: " + what + ": " + message);
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

int check_streams(std::int64_t n, const std::string& what) {
  if (n < 1 || n > max_streams)
    fail(what, "streams must be from 1 to " + std::to_string(max_streams) + ", got " + std::to_string(n));
  return static_cast<int>(n);
}

double check_link_gbps(double v, const std::string& what, const std::string& shown) {
  if (!std::isfinite(v) || v < 0)
    fail(what, "link bandwidth must be a finite number >= 0 (GB/s), got " + shown);
  return v;
}

std::string check_device(const std::string& name, const std::string& what) {
  if (name != "auto" && name != "host" && name != "emulated" && name != "cuda")
    fail(what, "unknown device '" + name + "' (use auto, host, emulated or cuda)");
  return name;
}

std::string check_cuda_staging(const std::string& name, const std::string& what) {
  if (name != "register" && name != "pinned")
    fail(what, "unknown staging '" + name + "' (use register or pinned)");
  return name;
}

// --- environment values ---------------------------------------------------------

bool env_bool(const std::string& text, const char* var) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  fail(var, "cannot read '" + text + "' as a switch (use 0, 1, true or false)");
}

int env_streams(const std::string& text, const char* var) {
  const std::uint64_t n = parse_unsigned(text, var, "a stream count");
  if (n > max_streams)
    fail(var, "streams must be from 1 to " + std::to_string(max_streams) + ", got " + text);
  return check_streams(static_cast<std::int64_t>(n), var);
}

double env_double(const std::string& text, const char* var) {
  const std::string_view s = trim(text);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size())
    fail(var, "cannot read '" + text + "' as a number");
  return check_link_gbps(v, var, text);
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

std::int64_t json_integer(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      fail(what, "value " + v.dump() + " is too large");
    return v.get<std::int64_t>();
  }
  wrong_type(v, what, "an integer");
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
  std::uint64_t part = 0;
  for (auto it = frac_digits.rbegin(); it != frac_digits.rend(); ++it)
    part = (static_cast<std::uint64_t>(*it - '0') * unit + part) / 10;
  if (__builtin_add_overflow(bytes, part, &bytes)) too_large();
  if (bytes > std::numeric_limits<std::size_t>::max()) too_large();
  return static_cast<std::size_t>(bytes);
}

void config::merge_json(const std::string& json_text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(origin, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(origin, std::string("expected a JSON object, got ") + doc.type_name());

  // Applied to a copy so that a bad key leaves *this untouched.
  config next = *this;
  for (const auto& [key, value] : doc.items()) {
    const std::string what = origin + ": key '" + key + "'";
    if (key == "device") {
      next.device = check_device(json_string(value, what), what);
    } else if (key == "device_memory") {
      next.device_memory = json_bytes(value, what);
    } else if (key == "streams") {
      next.streams = check_streams(json_integer(value, what), what);
    } else if (key == "chunk_bytes") {
      next.chunk_bytes = json_bytes(value, what);
    } else if (key == "host_threshold") {
      next.host_threshold = json_bytes(value, what);
    } else if (key == "report") {
      next.report = json_string(value, what);
    } else if (key == "trace") {
      next.trace = json_string(value, what);
    } else if (key == "link_gbps") {
      if (!value.is_number()) wrong_type(value, what, "a number (GB/s)");
      next.link_gbps = check_link_gbps(value.get<double>(), what, value.dump());
    } else if (key == "fail_launch") {
      next.fail_launch = json_unsigned(value, what, "a launch count");
    } else if (key == "fail_copy") {
      next.fail_copy = json_unsigned(value, what, "a copy count");
    } else if (key == "fail_sticky") {
      next.fail_sticky = json_bool(value, what);
    } else if (key == "sequential") {
      next.sequential = json_bool(value, what);
    } else if (key == "emulated_device_functions") {
      next.emulated_device_functions = json_bool(value, what);
    } else if (key == "cuda_staging") {
      next.cuda_staging = check_cuda_staging(json_string(value, what), what);
    } else if (key == "progress") {
      // true/false, or -1 for "when stderr is a terminal" (the default).
      if (value.is_boolean()) {
        next.progress = value.get<bool>() ? 1 : 0;
      } else {
        const std::int64_t p = json_integer(value, what);
        if (p < -1 || p > 1) fail(what, "progress must be true, false, 1, 0 or -1, got " + value.dump());
        next.progress = static_cast<int>(p);
      }
    } else if (key == "verbose") {
      next.verbose = json_bool(value, what);
    } else {
      fail(origin, "unknown key '" + key +
                       "' (known: device, device_memory, streams, chunk_bytes, host_threshold, report, "
                       "trace, link_gbps, fail_launch, fail_copy, sequential, progress, verbose)");
    }
  }
  *this = std::move(next);
}

config config::from_environment() {
  config c;
  if (const char* path = env("OA_CONFIG")) c.merge_json(read_file(path), path);

  if (const char* v = env("OA_DEVICE")) c.device = check_device(lower(trim(v)), "OA_DEVICE");
  if (const char* v = env("OA_DEVICE_MEMORY")) c.device_memory = parse_bytes(v, "OA_DEVICE_MEMORY");
  if (const char* v = env("OA_STREAMS")) c.streams = env_streams(v, "OA_STREAMS");
  if (const char* v = env("OA_CHUNK_BYTES")) c.chunk_bytes = parse_bytes(v, "OA_CHUNK_BYTES");
  if (const char* v = env("OA_HOST_THRESHOLD")) c.host_threshold = parse_bytes(v, "OA_HOST_THRESHOLD");
  if (const char* v = env("OA_REPORT")) c.report = v;
  if (const char* v = env("OA_TRACE")) c.trace = v;
  if (const char* v = env("OA_LINK_GBPS")) c.link_gbps = env_double(v, "OA_LINK_GBPS");
  if (const char* v = env("OA_FAIL_LAUNCH"))
    c.fail_launch = parse_unsigned(v, "OA_FAIL_LAUNCH", "a launch count");
  if (const char* v = env("OA_FAIL_COPY")) c.fail_copy = parse_unsigned(v, "OA_FAIL_COPY", "a copy count");
  if (const char* v = env("OA_FAIL_STICKY")) c.fail_sticky = env_bool(v, "OA_FAIL_STICKY");
  if (const char* v = env("OA_SEQUENTIAL")) c.sequential = env_bool(v, "OA_SEQUENTIAL");
  if (const char* v = env("OA_CUDA_STAGING")) c.cuda_staging = check_cuda_staging(lower(trim(v)), "OA_CUDA_STAGING");
  if (const char* v = env("OA_EMULATED_DEVICE_FUNCTIONS"))
    c.emulated_device_functions = env_bool(v, "OA_EMULATED_DEVICE_FUNCTIONS");
  if (const char* v = env("OA_PROGRESS")) c.progress = env_bool(v, "OA_PROGRESS") ? 1 : 0;
  if (const char* v = env("OA_VERBOSE")) c.verbose = env_bool(v, "OA_VERBOSE");
  return c;
}

}  // namespace oa
