#pragma once
// The bytes a region covers, relative to the start of a value's whole region,
// and which unit each byte of the value belongs to: what the split-type
// checker (oa/testing/split_type.hpp) compares chunks' regions with.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oa/core/device.hpp"

namespace oa::testing::detail {

inline constexpr std::size_t no_unit = static_cast<std::size_t>(-1);

/// Bytes [lo, hi) relative to the start of a value's whole region, and what
/// they belong to (a chunk's index, or a unit).
struct byte_run {
  std::ptrdiff_t lo = 0;
  std::ptrdiff_t hi = 0;
  std::size_t owner = 0;
};

inline std::string bytes_text(std::ptrdiff_t lo, std::ptrdiff_t hi) {
  return "bytes [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

/// From a region's first byte to the end of its last row.
inline std::size_t extent(const region& g) {
  if (g.width == 0 || g.rows == 0) return 0;
  return g.rows <= 1 ? g.width : (g.rows - 1) * g.pitch + g.width;
}

/// Where region g starts, relative to `base`.
inline std::ptrdiff_t offset_of(const region& g, const std::byte* base) {
  return static_cast<std::ptrdiff_t>(reinterpret_cast<std::uintptr_t>(g.data) - reinterpret_cast<std::uintptr_t>(base));
}

/// Appends the bytes of each row of g, relative to `base`, owned by `owner`.
inline void append_runs(const region& g, const std::byte* base, std::size_t owner, std::vector<byte_run>& out) {
  if (g.width == 0) return;
  const std::ptrdiff_t start = offset_of(g, base);
  for (std::size_t k = 0; k < g.rows; ++k) {
    const auto lo = start + static_cast<std::ptrdiff_t>(k * g.pitch);
    out.push_back({lo, lo + static_cast<std::ptrdiff_t>(g.width), owner});
  }
}

inline void sort_runs(std::vector<byte_run>& runs) {
  std::sort(runs.begin(), runs.end(), [](const byte_run& a, const byte_run& b) { return a.lo < b.lo; });
}

/// The first run (in the order given) that overlaps an earlier one, and that earlier one.
inline std::optional<std::pair<byte_run, byte_run>> first_overlap(const std::vector<byte_run>& runs) {
  std::map<std::ptrdiff_t, byte_run> seen;  // by lo; disjoint so far
  for (const byte_run& r : runs) {
    auto it = seen.upper_bound(r.lo);
    if (it != seen.begin() && std::prev(it)->second.hi > r.lo) return std::pair{r, std::prev(it)->second};
    if (it != seen.end() && it->second.lo < r.hi) return std::pair{r, it->second};
    seen.emplace(r.lo, r);
  }
  return std::nullopt;
}

/// A value's whole region, host_region(value, [0, units)): the bytes chunks must tile.
class whole_storage {
 public:
  explicit whole_storage(const region& whole) : w_(whole) {}

  const region& whole() const noexcept { return w_; }
  std::size_t bytes() const noexcept { return w_.bytes(); }
  std::size_t extent() const noexcept { return detail::extent(w_); }
  /// Whether the run lies within one row of the whole region.
  bool holds(const byte_run& r) const noexcept {
    if (r.lo < 0 || r.hi <= r.lo) return r.hi == r.lo && r.lo >= 0;
    if (w_.bytes() == 0) return false;
    if (w_.rows <= 1) return r.hi <= static_cast<std::ptrdiff_t>(w_.width);
    const auto pitch = static_cast<std::ptrdiff_t>(w_.pitch);
    const std::ptrdiff_t row = r.lo / pitch;
    return row < static_cast<std::ptrdiff_t>(w_.rows) && r.hi <= row * pitch + static_cast<std::ptrdiff_t>(w_.width);
  }
  /// The first bytes of the whole that no run (sorted, disjoint, inside) covers,
  /// as a run; hi == lo when every byte is covered.
  byte_run first_gap(const std::vector<byte_run>& sorted) const {
    if (w_.bytes() == 0) return {0, 0, 0};
    std::size_t next = 0;
    for (std::size_t k = 0; k < w_.rows; ++k) {
      const auto row_lo = static_cast<std::ptrdiff_t>(w_.rows <= 1 ? 0 : k * w_.pitch);
      const auto row_hi = row_lo + static_cast<std::ptrdiff_t>(w_.width);
      std::ptrdiff_t at = row_lo;
      while (next < sorted.size() && sorted[next].lo < row_hi) {
        if (sorted[next].lo > at) return {at, sorted[next].lo, 0};
        at = std::max(at, sorted[next].hi);
        ++next;
      }
      if (at < row_hi) return {at, row_hi, 0};
    }
    return {0, 0, 0};
  }

 private:
  region w_;
};

/// Which unit each byte of the value belongs to: exact when built from the
/// regions of chunks of one unit that tile the value; otherwise estimated
/// from the whole region, taking units along its width (as every split type
/// of oa lays them out), for messages only.
class unit_map {
 public:
  unit_map(const region& whole, std::size_t units) : whole_(whole), units_(units) {}

  /// The runs of chunks of one unit (owner: the unit), tiling the value.
  void set_exact(std::vector<byte_run> runs) {
    runs_ = std::move(runs);
    sort_runs(runs_);
    bytes_.assign(units_, 0);
    first_.assign(units_, -1);
    for (const byte_run& r : runs_) {
      bytes_[r.owner] += static_cast<std::size_t>(r.hi - r.lo);
      if (first_[r.owner] < 0 || r.lo < first_[r.owner]) first_[r.owner] = r.lo;
    }
    exact_ = true;
  }
  bool exact() const noexcept { return exact_; }

  /// The unit whose storage holds byte `offset` of the value (no_unit: none).
  std::size_t unit_at(std::ptrdiff_t offset) const {
    if (exact_) {
      auto it = std::upper_bound(runs_.begin(), runs_.end(), offset,
                                 [](std::ptrdiff_t o, const byte_run& r) { return o < r.lo; });
      if (it == runs_.begin()) return no_unit;
      --it;
      return offset < it->hi ? it->owner : no_unit;
    }
    if (whole_.width == 0 || units_ == 0 || offset < 0) return no_unit;
    const auto in_row = static_cast<std::size_t>(whole_.rows <= 1 ? offset : offset % static_cast<std::ptrdiff_t>(whole_.pitch));
    if (in_row >= whole_.width) return no_unit;
    return std::min(units_ - 1, in_row * units_ / whole_.width);
  }
  /// Bytes of unit u (exact maps only).
  std::size_t bytes_of(std::size_t u) const { return bytes_[u]; }
  /// The first byte of unit u's storage (exact maps only; -1 for a unit without bytes).
  std::ptrdiff_t first_byte(std::size_t u) const { return first_[u]; }
  /// For each run of a region: how many bytes of each unit it covers.
  /// Calls f(unit, bytes) per unit run overlapped.
  template <class F>
  void overlaps(const byte_run& r, F&& f) const {
    auto it = std::upper_bound(runs_.begin(), runs_.end(), r.lo,
                               [](std::ptrdiff_t o, const byte_run& m) { return o < m.lo; });
    if (it != runs_.begin()) --it;
    for (; it != runs_.end() && it->lo < r.hi; ++it) {
      const std::ptrdiff_t lo = std::max(r.lo, it->lo), hi = std::min(r.hi, it->hi);
      if (hi > lo) f(it->owner, static_cast<std::size_t>(hi - lo));
    }
  }

 private:
  region whole_;
  std::size_t units_;
  bool exact_ = false;
  std::vector<byte_run> runs_;        // sorted by lo, disjoint
  std::vector<std::size_t> bytes_;    // per unit
  std::vector<std::ptrdiff_t> first_; // per unit
};

}  // namespace oa::testing::detail
