#include "core/perf_model.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

std::string key_of(const std::string& op, const std::string& device) { return device + "\n" + op; }

int bucket_of(double bytes) { return static_cast<int>(std::lround(2 * std::log2(std::max(bytes, 1.0)))); }

constexpr const char* file_format = "oa performance models 1";

/// Holds `<path>.lock` locked (flock) while alive: the writers of one models
/// file, threads with runtimes of their own or processes, take turns.
class file_lock {
 public:
  explicit file_lock(const std::string& path) : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw error("oa: OA_PERF_MODELS: cannot open '" + path + ".lock': " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        const int e = errno;
        ::close(fd_);
        throw error("oa: OA_PERF_MODELS: cannot lock '" + path + ".lock': " + std::strerror(e));
      }
  }
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;
  ~file_lock() { ::close(fd_); }  // and with it the lock

 private:
  int fd_;
};

}  // namespace

void perf_models::record(const std::string& op, const std::string& device, double bytes, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds) || !(bytes > 0)) return;
  bucket& b = models_[key_of(op, device)][bucket_of(bytes)];
  // Compared per byte: samples of one bucket differ in size by up to a quarter.
  if (b.n == 0 || seconds / bytes < b.seconds / b.bytes) b.bytes = bytes, b.seconds = seconds;
  ++b.n;
}

std::size_t perf_models::samples(const std::string& op, const std::string& device) const {
  auto it = models_.find(key_of(op, device));
  if (it == models_.end()) return 0;
  std::size_t n = 0;
  for (const auto& [i, b] : it->second) n += b.n;
  return n;
}

std::optional<double> perf_models::predict(const std::string& op, const std::string& device, double bytes) const {
  auto it = models_.find(key_of(op, device));
  if (it == models_.end()) return std::nullopt;
  // A size measured once may hold a one-off cost (a first run): only sizes
  // measured twice or more are trusted.
  std::vector<const bucket*> sure;
  int lo = 0, hi = 0;
  for (const auto& [i, b] : it->second)
    if (b.n >= 2) {
      if (sure.empty()) lo = i;
      hi = i;
      sure.push_back(&b);
    }
  bytes = std::max(bytes, 1.0);
  const int at = bucket_of(bytes);
  // This size measured: its fastest, scaled to the bytes asked for.
  if (auto b = it->second.find(at); b != it->second.end() && b->second.n >= 2)
    return b->second.seconds * bytes / b->second.bytes;
  // The fit reaches two octaves past the sizes measured; one size alone
  // tells nothing of how time grows.
  if (sure.size() < 2 || at < lo - 4 || at > hi + 4) return std::nullopt;
  // log t = log a + e log bytes, least squares over the sizes measured; the
  // exponent kept within [0, 2] (no work shrinks with its size, none is
  // worse than quadratic among stages).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(sure.size());
  for (const bucket* b : sure) {
    const double x = std::log(b->bytes), y = std::log(b->seconds);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  double e = den > 0 ? (n * sxy - sx * sy) / den : 1.0;
  e = std::clamp(e, 0.0, 2.0);
  const double log_a = (sy - e * sx) / n;
  return std::exp(log_a + e * std::log(bytes));
}

void perf_models::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return;  // no history yet: calibrated on first use
    throw config_error("oa: OA_PERF_MODELS: cannot read '" + path + "': " + std::strerror(errno));
  }
  if (in.peek() == std::ifstream::traits_type::eof()) return;  // an empty file: no history yet
  nlohmann::json j;
  try {
    in >> j;
    if (!j.is_object() || !j.contains("models") || !j["models"].is_array())
      throw error("no \"models\" array at the top");
    if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != file_format)
      throw error(std::string("its \"format\" is ") + (j.contains("format") ? j["format"].dump() : "missing") +
                  ", not \"" + file_format + "\" (written by another version of oa?)");
    for (const auto& m : j["models"]) {
      const std::string op = m.at("op").get<std::string>();
      const std::string device = m.at("device").get<std::string>();
      history& h = models_[key_of(op, device)];
      for (const auto& s : m.at("sizes")) {
        bucket b{s.at("bytes").get<double>(), s.at("seconds").get<double>(), s.at("samples").get<std::size_t>()};
        if (!(b.bytes > 0) || !(b.seconds > 0) || b.n == 0) throw error("a size with no positive bytes, seconds and samples");
        // Joined with what is known of the size: the faster, and the larger count.
        bucket& have = h[bucket_of(b.bytes)];
        if (have.n == 0 || b.seconds / b.bytes < have.seconds / have.bytes) have.bytes = b.bytes, have.seconds = b.seconds;
        have.n = std::max(have.n, b.n);
      }
    }
  } catch (const std::exception& e) {
    throw config_error("oa: OA_PERF_MODELS: '" + path + "' is not a file of oa's performance models: " + e.what());
  }
}

void perf_models::save(const std::string& path) const {
  // What others wrote since this file was read is kept: the file's models
  // joined with these (the faster time of a size, the larger count), under
  // the lock, then a file of this writer's own renamed over it.
  const file_lock lock(path);
  perf_models all = *this;
  all.load(path);
  nlohmann::json models = nlohmann::json::array();
  for (const auto& [key, h] : all.models_) {
    const auto cut = key.find('\n');
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& [i, b] : h) sizes.push_back({{"bytes", b.bytes}, {"seconds", b.seconds}, {"samples", b.n}});
    models.push_back({{"device", key.substr(0, cut)}, {"op", key.substr(cut + 1)}, {"sizes", std::move(sizes)}});
  }
  const nlohmann::json j = {{"format", file_format}, {"models", std::move(models)}};
  static std::atomic<unsigned> writes{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << '\n';
    if (!out) throw error("oa: OA_PERF_MODELS: cannot write '" + tmp + "': " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw error("oa: OA_PERF_MODELS: cannot replace '" + path + "': " + std::strerror(e));
  }
}

}  // namespace oa::detail
