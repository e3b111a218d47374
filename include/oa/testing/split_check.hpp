#pragma once
// What oa::testing::check_split_type (oa/testing/split_type.hpp) found: the
// laws a split type broke on a sample value, each with the chunking it broke
// under and the first unit found wrong, in a message for the split type's
// author. It converts to true when every law holds, prints its message with
// operator<<, and throws it with throw_if_broken(): usable from a plain
// assert, doctest, Catch2 or GoogleTest alike.

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "oa/core/error.hpp"

namespace oa::testing {

/// Where a law was first found broken.
struct split_law_failure {
  static constexpr std::size_t no_unit = static_cast<std::size_t>(-1);
  std::string law;             // "tiling", "offsets", ... (oa/testing/split_type.hpp lists them)
  std::string chunking;        // the chunks it broke under; empty when no chunking is involved
  std::size_t unit = no_unit;  // the first unit found wrong; for a reduction, the partial's index
  std::string detail;          // what is wrong, in terms of the split type's members
};

/// A split type's broken laws, as split_check::throw_if_broken throws them.
class split_law_error : public error {
 public:
  using error::error;
};

/// The outcome of check_split_type: true when every law held.
class split_check {
 public:
  std::string split_type;                   // S::name
  std::string sample;                       // what was checked: "a value of 100 units of 8 bytes"
  std::size_t chunkings = 0;                // how many ways of cutting the value were tried
  std::vector<split_law_failure> failures;  // the first failure of each law broken, in the order checked

  explicit operator bool() const noexcept { return failures.empty(); }

  /// The first failure of `law`, or nullptr when it held.
  const split_law_failure* failure(std::string_view law) const noexcept {
    for (const auto& f : failures)
      if (f.law == law) return &f;
    return nullptr;
  }
  bool broke(std::string_view law) const noexcept { return failure(law) != nullptr; }

  /// Records a failure of `law`, unless one is recorded already (the first
  /// says where to look; the rest would repeat it).
  void fail(std::string law, std::string chunking, std::size_t unit, std::string detail) {
    if (!broke(law)) failures.push_back({std::move(law), std::move(chunking), unit, std::move(detail)});
  }

  /// One line saying every law held, or a line per law broken.
  std::string message() const {
    std::string m = "oa::testing::check_split_type<" + split_type + ">: ";
    if (failures.empty()) {
      m += "every law holds on " + sample;
      if (chunkings) m += ", cut " + std::to_string(chunkings) + (chunkings == 1 ? " way" : " ways");
      return m;
    }
    m += std::to_string(failures.size()) + (failures.size() == 1 ? " law" : " laws") + " broken on " + sample + ":";
    for (const auto& f : failures) {
      m += "\n  - law '" + f.law + "'";
      if (!f.chunking.empty()) m += ", " + f.chunking;
      if (f.unit != split_law_failure::no_unit) m += ", unit " + std::to_string(f.unit);
      m += ": " + f.detail;
    }
    return m;
  }

  void throw_if_broken() const {
    if (!failures.empty()) throw split_law_error(message());
  }
};

inline std::ostream& operator<<(std::ostream& os, const split_check& c) { return os << c.message(); }

}  // namespace oa::testing
