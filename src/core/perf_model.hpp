#pragma once
// Performance models for placing stages by cost (OA_PLACEMENT=cost): per
// kind of stage (its calls) and device, the execution times measured so
// far, by the bytes the stage touches. As StarPU's history models, by size
// bucket (half an octave of bytes), each the fastest time measured there (a
// first run's one-off costs and the machine's noise only slow a run: a mean
// would keep them), trusted once measured twice; between the sizes
// measured, and up to two octaves beyond, a power law t = a * bytes^b
// fitted to them (its regression models). Elsewhere there is no prediction:
// the stage is measured there (one size tells nothing of how time grows).
// Kept between runs in a JSON file the user names (OA_PERF_MODELS).

#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace oa::detail {

class perf_models {
 public:
  /// One measurement: a stage of `op` touching `bytes` took `seconds` on `device`.
  void record(const std::string& op, const std::string& device, double bytes, double seconds);
  /// The predicted seconds, or nothing when `op` was not measured on
  /// `device` at or near this size.
  std::optional<double> predict(const std::string& op, const std::string& device, double bytes) const;
  /// Measurements of `op` on `device` so far.
  std::size_t samples(const std::string& op, const std::string& device) const;
  bool empty() const noexcept { return models_.empty(); }

  /// Adds the models of a file written by save(), joined with these (each
  /// size's faster time and larger count); a missing or empty file is an
  /// empty history. A file that cannot be read as one (another format
  /// included) is an oa::error naming it.
  void load(const std::string& path);
  /// Writes every model to `path`, with what the file learned from other
  /// writers since it was read (under `<path>.lock`; a new file of this
  /// writer's own renamed over it, so that a reader never sees half of one);
  /// an oa::error naming it on failure.
  void save(const std::string& path) const;

 private:
  struct bucket {
    double bytes = 0;    // of the fastest sample
    double seconds = 0;  // the fastest
    std::size_t n = 0;
  };
  /// Buckets by index round(2 log2 bytes).
  using history = std::map<int, bucket>;
  std::map<std::string, history> models_;  // by "<device>\n<op>"
};

}  // namespace oa::detail
