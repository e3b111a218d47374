#pragma once
// Plain-text tables for oa-bench: aligned columns, human byte counts.

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstddef>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace oa_bench {

using clock_type = std::chrono::steady_clock;

/// Seconds from t0 to now.
inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Now, as ISO 8601 UTC, for records.
inline std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// printf into a std::string.
template <class... T>
std::string format(const char* fmt, T... args) {
  const int len = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(static_cast<std::size_t>(std::max(len, 0)), '\0');
  std::snprintf(s.data(), s.size() + 1, fmt, args...);
  return s;
}

/// Bytes in binary units ("896.0 MiB"); below 1 KiB as plain bytes.
inline std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? format("%.0f B", bytes) : format("%.1f %s", bytes, units[u]);
}

/// Columns sized to their widest cell; the first is left-aligned (labels),
/// the others right-aligned (numbers).
class text_table {
 public:
  explicit text_table(std::vector<std::string> header) : rows_{std::move(header)} {}

  void add_row(std::vector<std::string> row) {
    row.resize(rows_.front().size());
    rows_.push_back(std::move(row));
  }

  void print(std::ostream& os) const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& r : rows_)
      for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    auto line = [&](const std::vector<std::string>& r) {
      std::string out;
      for (std::size_t c = 0; c < r.size(); ++c) {
        const std::string pad(width[c] - r[c].size(), ' ');
        if (c) out += "  ";
        out += c == 0 ? r[c] + pad : pad + r[c];
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      os << out << '\n';
    };
    line(rows_.front());
    std::size_t total = 0;
    for (std::size_t w : width) total += w;
    os << std::string(total + 2 * (width.size() - 1), '-') << '\n';
    for (std::size_t i = 1; i < rows_.size(); ++i) line(rows_[i]);
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace oa_bench
