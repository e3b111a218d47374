#pragma once
// Shared by the random-program tests: comparing a run with its reference,
// running a program step by step beside it, and shrinking a failing one.
// A program type P there has `steps` and `text(step)`; its file defines
// `difference(p, step, got, want)` (what the step makes visible), found by
// argument-dependent lookup.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <oa/oa.hpp>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"

namespace oa_random {

/// Built with AddressSanitizer or ThreadSanitizer: fewer programs by default.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

/// The seeded choices of a program generator.
struct dice {
  explicit dice(std::uint64_t seed) : g(seed) {}
  std::mt19937_64 g;
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(g); }
  bool chance(std::size_t percent) { return below(100) < percent; }
};

/// A program's steps, one a line, numbered.
template <class P>
void list_steps(std::ostream& o, const P& p) {
  for (std::size_t i = 0; i < p.steps.size(); ++i) o << "  " << i << ": " << p.text(p.steps[i]) << "\n";
}

struct configuration {
  std::string name;
  oa::config c;
};

/// An unsigned number from the environment, or `fallback`.
inline std::uint64_t from_environment(const char* name, std::uint64_t fallback) {
  const char* s = std::getenv(name);
  return s && *s ? std::strtoull(s, nullptr, 10) : fallback;
}

/// Where vector `got` differs from `want`; empty when equal. With `bound`
/// (a sum of magnitudes per element: prefix sums), within `tolerance` of it.
template <class V>
std::string difference(const std::string& name, const V& got, const V& want, const std::vector<double>& bound = {},
                       double tolerance = 0) {
  if (got.size() != want.size())
    return name + " has " + std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = got.size(); i-- > 0;) {
    const bool same = bound.empty() ? got[i] == want[i]
                                    : std::abs(double(got[i] - want[i])) <=
                                          tolerance * bound[i] + std::numeric_limits<double>::min();
    if (!same) ++wrong, first = i;
  }
  if (wrong == 0) return {};
  std::ostringstream o;
  o.precision(17);
  o << name << "[" << first << "] = " << got[first] << ", want " << want[first] << " (" << wrong << " of "
    << got.size() << " elements differ)";
  return o.str();
}

/// The same for a sum, within `tolerance` of `bound`, the sum of its terms' magnitudes.
inline std::string difference(const std::string& name, double got, double want, double bound, double tolerance) {
  if (std::abs(got - want) <= tolerance * bound + std::numeric_limits<double>::min()) return {};
  std::ostringstream o;
  o.precision(17);
  o << name << " = " << got << ", want " << want << " (sum of magnitudes " << bound << ")";
  return o.str();
}

/// Applies `p`'s steps, then `last` (an evaluation: the final comparison),
/// to the reference and the lazy run alike: the first difference, naming
/// the step after which it showed; empty if none.
template <class P, class Step, class Reference, class Lazy>
std::string first_difference(const P& p, Step last, Reference& want, Lazy& got) {
  std::vector<Step> steps = p.steps;
  steps.push_back(std::move(last));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::string d;
    try {
      want.apply(steps[i]);
      got.apply(steps[i]);
      d = difference(p, steps[i], got, want);
    } catch (const std::exception& e) {
      d = std::string("threw: ") + e.what();
    }
    if (d.empty()) continue;
    if (i == p.steps.size()) return "at the end: " + d;
    return "after step " + std::to_string(i) + " (" + p.text(steps[i]) + "): " + d;
  }
  return {};
}

/// A failing program made as small as it still fails: steps dropped one
/// at a time, then the first of `smaller(p)` (smaller data) that fails, over
/// and over.
template <class P, class Fails, class Smaller>
P shrink(P p, Fails&& fails, Smaller&& smaller) {
  for (bool less = true; less;) {
    less = false;
    for (std::size_t i = p.steps.size(); i-- > 0;) {
      P q = p;
      q.steps.erase(q.steps.begin() + static_cast<std::ptrdiff_t>(i));
      if (fails(q)) p = std::move(q), less = true;
    }
    for (P& q : smaller(p))
      if (fails(q)) {
        p = std::move(q), less = true;
        break;
      }
  }
  return p;
}

}  // namespace oa_random
