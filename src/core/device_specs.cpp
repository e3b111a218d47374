// OA_DEVICES: a list of device specs, `kind[:key=value]...` separated by commas.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "oa/core/config.hpp"
#include "oa/core/error.hpp"

namespace oa {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

/// Reads one spec; `fail` names where the list came from (`what`) and the spec.
template <class Fail>
device_spec read_spec(std::string_view text, const std::string& what, const Fail& fail) {
  device_spec d;
  d.text = std::string(text);
  const std::vector<std::string_view> parts = split(text, ':');
  d.kind = std::string(parts.front());
  if (d.kind != "emulated" && d.kind != "cuda" && d.kind != "host")
    fail("unknown device kind '" + d.kind + "' (use emulated, cuda, or host for the host's share of their stages)");
  if (d.kind == "host" && parts.size() > 1) fail("host takes no keys");
  // GB/s and microseconds, as OA_LINK_GBPS and OA_LINK_LATENCY_US take them.
  const auto number = [&](std::string_view key, std::string_view v) {
    double x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || !std::isfinite(x) || x < 0 || x > 1e6)
      fail(std::string(key) + "=" + std::string(v) + " is not a number from 0 to 1e6");
    return x;
  };
  // A link's rate: 0 (unthrottled), or not so slow that a chunk's copy
  // seems to hang.
  const auto rate = [&](std::string_view key, std::string_view v) {
    const double x = number(key, v);
    if (x > 0 && x < 1e-3)
      fail(std::string(key) + "=" + std::string(v) + " is below the minimum, 0.001 GB/s (0 = unthrottled)");
    return x;
  };
  const auto count = [&](std::string_view key, std::string_view v) {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc{} || end != v.data() + v.size())
      fail(std::string(key) + "=" + std::string(v) + " is not a count");
    return n;
  };
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      if (d.kind == "cuda" && i == 1) {  // cuda:N
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
        if (part.empty() || ec != std::errc{} || end != part.data() + part.size() || n > 1024)
          fail("'" + std::string(part) + "' is not a GPU number (cuda:0, cuda:1, ...)");
        d.ordinal = static_cast<int>(n);
        continue;
      }
      fail("'" + std::string(part) + "' is not key=value");
    }
    const std::string_view key = part.substr(0, eq), v = part.substr(eq + 1);
    for (std::size_t k = 1; k < i; ++k)
      if (parts[k].substr(0, parts[k].find('=')) == key) fail("key '" + std::string(key) + "' is given twice");
    const bool emulated = d.kind == "emulated";
    if (key == "memory") {
      d.memory = parse_bytes(std::string(v), what + ": '" + d.text + "': memory");
      if (*d.memory == 0) fail("memory=0: a device needs some memory");
    } else if (emulated && key == "link_gbps") {
      d.link_gbps = rate(key, v);
    } else if (emulated && key == "link_shared_gbps") {
      d.link_shared_gbps = rate(key, v);
    } else if (emulated && key == "latency_us") {
      d.latency_us = number(key, v);
    } else if (emulated && key == "fail_launch") {
      d.fail_launch = count(key, v);
    } else if (emulated && key == "fail_copy") {
      d.fail_copy = count(key, v);
    } else if (emulated && key == "fail_fill") {
      d.fail_fill = count(key, v);
    } else if (emulated && key == "fail_drain") {
      d.fail_drain = count(key, v);
    } else if (emulated && key == "sticky") {
      if (v != "0" && v != "1") fail("sticky=" + std::string(v) + " is not 0 or 1");
      d.sticky = v == "1";
    } else {
      fail("unknown key '" + std::string(key) + "' for device kind " + d.kind + " (" +
           (emulated ? "memory, link_gbps, link_shared_gbps, latency_us, fail_launch, fail_copy, fail_fill, fail_drain, "
                       "sticky"
                     : "memory; the GPU as cuda:N") +
           ")");
    }
  }
  return d;
}

}  // namespace

std::vector<device_spec> parse_device_specs(const std::string& text, const std::string& what) {
  std::vector<device_spec> out;
  if (text.empty()) return out;
  for (std::string_view spec : split(text, ',')) {
    const auto fail = [&](const std::string& message) {
      throw config_error("oa: " + what + ": '" + std::string(spec) + "': " + message);
    };
    if (spec.empty() || spec.find(' ') != std::string_view::npos)
      fail("a device spec is kind[:key=value]..., comma-separated, with no spaces");
    out.push_back(read_spec(spec, what, fail));
    for (std::size_t i = 0; i + 1 < out.size(); ++i) {
      if (out.back().kind == "cuda" && out[i].kind == "cuda" && out[i].ordinal == out.back().ordinal)
        fail("GPU " + std::to_string(out.back().ordinal) + " is listed twice");
      if (out.back().kind == "host" && out[i].kind == "host") fail("host is listed twice");
    }
  }
  if (std::all_of(out.begin(), out.end(), [](const device_spec& d) { return d.kind == "host"; }))
    throw config_error("oa: " + what + ": '" + text +
                       "': host takes a share of the devices' stages: list at least one device (emulated or cuda)");
  return out;
}

}  // namespace oa
