#pragma once
// What oa-bench needs besides the workloads themselves: the list of
// workloads with their input ranges, reproducible random inputs, the error
// metric of --verify and the parser of element counts.

#include <Eigen/Core>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace oa_bench {

struct input_spec {
  const char* name;
  double lo, hi;  // uniform in [lo, hi]
};

struct workload_spec {
  std::string_view name;
  std::vector<input_spec> inputs;
  std::size_t array_outputs;   // outputs of n doubles
  std::size_t scalar_outputs;  // outputs of one double (crime's sum)

  /// Bytes of inputs and outputs on the host for n elements.
  std::size_t data_bytes(std::size_t n) const {
    return (inputs.size() + array_outputs) * n * sizeof(double) + scalar_outputs * sizeof(double);
  }
};

inline const std::vector<workload_spec>& workload_specs() {
  static const std::vector<workload_spec> specs = {
      {"blackscholes",
       {{"price", 10, 50}, {"strike", 10, 50}, {"t", 0.1, 2}, {"rate", 0.01, 0.05}, {"vol", 0.1, 0.5}},
       2,
       0},
      {"haversine", {{"lat2", -1.5, 1.5}, {"lon2", -1.5, 1.5}}, 1, 0},
      {"crime",
       {{"total_population", 1e5, 1e6}, {"adult_population", 5e4, 5e5}, {"num_robberies", 0, 100}},
       0,
       1},
  };
  return specs;
}

inline const workload_spec& find_workload(std::string_view name) {
  for (const auto& w : workload_specs())
    if (w.name == name) return w;
  throw std::invalid_argument("unknown workload '" + std::string(name) + "'");
}

/// The inputs of `w`, drawn in order from one generator seeded with `seed`,
/// so every mode and every process with the same seed sees the same data.
inline std::vector<Eigen::ArrayXd> make_inputs(const workload_spec& w, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Eigen::ArrayXd> in;
  in.reserve(w.inputs.size());
  for (const auto& spec : w.inputs) {
    std::uniform_real_distribution<double> dist(spec.lo, spec.hi);
    Eigen::ArrayXd a(static_cast<Eigen::Index>(n));
    for (Eigen::Index i = 0; i < a.size(); ++i) a[i] = dist(gen);
    in.push_back(std::move(a));
  }
  return in;
}

/// max over elements of |x - ref| / max(|ref|, 1): relative error, absolute
/// below 1, where an output that is a difference of values of order 1 (a
/// Black-Scholes call near 0) keeps its inputs' rounding as absolute error. A
/// NaN where the reference has a number (or a size mismatch) is an infinite
/// error.
inline double max_rel_error(const Eigen::ArrayXd& x, const Eigen::ArrayXd& ref) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (x.size() != ref.size()) return inf;
  double worst = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(ref[i])) {
      if (std::isnan(x[i]) != std::isnan(ref[i])) return inf;
      continue;
    }
    if (x[i] == ref[i]) continue;  // also equal infinities
    const double e = std::abs(x[i] - ref[i]) / std::max(std::abs(ref[i]), 1.0);
    if (!(e <= worst)) worst = std::isnan(e) ? inf : e;
  }
  return worst;
}

/// Parses an element count: "16777216", "2^24", "16Mi" (binary: Ki, Mi, Gi,
/// Ti) or "16M" (decimal: K, M, G, T). Empty on anything else, zero or overflow.
inline std::optional<std::size_t> parse_count(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  auto number = [](std::string_view s) -> std::optional<std::size_t> {
    if (s.empty() || s.size() > 19) return std::nullopt;
    std::size_t v = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return std::nullopt;
      v = v * 10 + static_cast<std::size_t>(ch - '0');
    }
    return v;
  };
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  std::optional<std::size_t> result;
  if (const auto caret = text.find('^'); caret != std::string_view::npos) {
    const auto base = number(text.substr(0, caret));
    const auto exp = number(text.substr(caret + 1));
    if (!base || !exp || *exp > 64) return std::nullopt;
    std::size_t v = 1;
    for (std::size_t i = 0; i < *exp; ++i) {
      if (*base != 0 && v > max / *base) return std::nullopt;
      v *= *base;
    }
    result = v;
  } else {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    const auto v = number(text.substr(0, digits));
    std::string_view suffix = text.substr(digits);
    if (!v) return std::nullopt;
    std::size_t scale = 1;
    if (!suffix.empty()) {
      const bool binary = suffix.size() == 2 && suffix[1] == 'i';
      if (suffix.size() != 1 && !binary) return std::nullopt;
      const std::string_view units = "KMGT";
      const auto k = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0]))));
      if (k == std::string_view::npos) return std::nullopt;
      for (std::size_t i = 0; i <= k; ++i) scale *= binary ? 1024 : 1000;
    }
    if (*v > max / scale) return std::nullopt;
    result = *v * scale;
  }
  if (!result || *result == 0) return std::nullopt;
  return result;
}

}  // namespace oa_bench
