#pragma once
// How a distributed value's units are cut over the ranks: rank r holds
// units [offset(r), offset(r) + count(r)). Every rank knows the whole
// layout, so checks that two values are laid out alike need no message.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "oa/core/error.hpp"
#include "oa/core/fnv1a.hpp"

namespace oa::dist {

class layout {
 public:
  layout() = default;

  /// `total` units over `ranks`, the first total % ranks ranks one more.
  static layout even(std::size_t total, int ranks) {
    if (ranks < 1) throw oa::invalid_argument("oa::dist::layout::even", "ranks", "must be at least 1");
    std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), total / static_cast<std::size_t>(ranks));
    for (std::size_t r = 0; r < total % static_cast<std::size_t>(ranks); ++r) ++counts[r];
    return of_counts(counts);
  }

  /// The units each rank holds, in rank order (some may hold none).
  static layout of_counts(const std::vector<std::size_t>& counts) {
    if (counts.empty()) throw oa::invalid_argument("oa::dist::layout::of_counts", "counts", "one count per rank, none given");
    layout l;
    l.offsets_.assign(1, 0);
    for (std::size_t c : counts) {
      if (c > static_cast<std::size_t>(-1) - l.offsets_.back())
        throw oa::invalid_argument("oa::dist::layout::of_counts", "counts", "their sum overflows a size");
      l.offsets_.push_back(l.offsets_.back() + c);
    }
    return l;
  }

  int ranks() const noexcept { return offsets_.empty() ? 0 : static_cast<int>(offsets_.size() - 1); }
  std::size_t total() const noexcept { return offsets_.empty() ? 0 : offsets_.back(); }
  std::size_t offset(int rank) const { return offsets_.at(static_cast<std::size_t>(rank)); }
  std::size_t count(int rank) const {
    return offsets_.at(static_cast<std::size_t>(rank) + 1) - offsets_.at(static_cast<std::size_t>(rank));
  }
  bool operator==(const layout&) const = default;

  /// A key of the layout (FNV-1a of its counts): ranks compare keys to know
  /// they take a value to be laid out alike.
  std::uint64_t key() const noexcept {
    std::uint64_t h = oa::detail::fnv1a_basis;
    for (std::size_t o : offsets_) h = oa::detail::fnv1a_word(o, h);
    return h;
  }

  /// "4 units over 2 ranks (3, 1)", for messages.
  std::string describe() const {
    std::string out = std::to_string(total()) + " units over " + std::to_string(ranks()) + " ranks (";
    for (int r = 0; r < ranks(); ++r) out += (r ? ", " : "") + std::to_string(count(r));
    return out + ")";
  }

 private:
  std::vector<std::size_t> offsets_;  // ranks + 1
};

}  // namespace oa::dist
