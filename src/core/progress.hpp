#pragma once
// A progress line on stderr for long stages: what, how many of how many, time.

#include <chrono>
#include <cstdio>
#include <string>

namespace oa::detail {

using clock_type = std::chrono::steady_clock;

/// Seconds from t0 to now.
inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

class progress_line {
 public:
  /// `unit`: what is counted ("chunk", "tile step"). Shown after half a second.
  progress_line(bool on, std::string what, std::size_t total, const char* unit = "chunk")
      : on_(on && total > 1), what_(std::move(what)), unit_(unit), total_(total), t0_(clock::now()) {}
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

  void update(std::size_t done) {
    if (!on_) return;
    const double t = elapsed();
    if (t < 0.5 || t - last_ < 0.2) return;
    last_ = t;
    std::fprintf(stderr, "\r%s: %s %zu/%zu (%3.0f%%), %.1f s", what_.c_str(), unit_, done, total_,
                 100.0 * static_cast<double>(done) / static_cast<double>(total_), t);
    std::fflush(stderr);
    shown_ = true;
  }
  ~progress_line() {
    if (shown_) std::fprintf(stderr, "\r%s: %zu %ss, %.2f s%30s\n", what_.c_str(), total_, unit_, elapsed(), "");
  }

 private:
  using clock = std::chrono::steady_clock;
  double elapsed() const { return std::chrono::duration<double>(clock::now() - t0_).count(); }

  bool on_;
  std::string what_;
  const char* unit_;
  std::size_t total_;
  clock::time_point t0_;
  double last_ = 0;
  bool shown_ = false;
};

}  // namespace oa::detail
