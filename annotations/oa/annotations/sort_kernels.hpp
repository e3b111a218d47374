#pragma once
// The host kernels of oa::stl::sort: keys that order arithmetic values as
// unsigned integers, an LSD radix sort of one run, the split of k sorted runs
// at a rank, and the merge of the parts of the runs between two ranks.
// Out of core, a sort is sorted runs (one chunk of runs at a time) and then
// a merge whose chunks are ranges of ranks: each finds where its ranks start
// and end in every run and merges those parts, so no chunk waits for another
// and the memory each needs is its own.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

namespace oa::stl::sort_detail {

/// The unsigned integer a value's key is.
template <class T>
using key_t = std::conditional_t<sizeof(T) <= 4, std::uint32_t, std::uint64_t>;

/// A key whose unsigned order is T's order (NaN-free floating point: -0.0
/// before +0.0), reversed when Descending.
template <class T, bool Descending>
key_t<T> key_of(T v) noexcept {
  using K = key_t<T>;
  constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
  K k;
  if constexpr (std::is_floating_point_v<T>) {
    static_assert(sizeof(T) == sizeof(K), "oa::stl::sort: float and double");
    std::memcpy(&k, &v, sizeof k);
    k = (k & sign) ? ~k : (k | sign);
  } else if constexpr (std::is_signed_v<T>) {
    k = static_cast<K>(static_cast<std::make_signed_t<K>>(v)) ^ sign;  // sign-extended, sign bit flipped
  } else {
    k = static_cast<K>(v);
  }
  return Descending ? static_cast<K>(~k) : k;
}

/// Sorts `run` by key (stable LSD radix sort, 8 bits a pass; passes where
/// every key has the same digit are skipped). `scratch` holds run.size().
template <class T, bool Descending>
void radix_sort(std::span<T> run, std::span<T> scratch) {
  using K = key_t<T>;
  constexpr int passes = sizeof(K);
  std::vector<std::array<std::size_t, 256>> counts(passes);
  for (auto& c : counts) c.fill(0);
  for (const T& v : run) {
    const K k = key_of<T, Descending>(v);
    for (int p = 0; p < passes; ++p) ++counts[p][(k >> (8 * p)) & 0xff];
  }
  T* from = run.data();
  T* to = scratch.data();
  for (int p = 0; p < passes; ++p) {
    auto& c = counts[p];
    if (std::count(c.begin(), c.end(), run.size()) == 1) continue;  // one digit value: nothing moves
    std::size_t sum = 0;
    for (auto& x : c) {
      const std::size_t n = x;
      x = sum;
      sum += n;
    }
    for (std::size_t i = 0; i < run.size(); ++i) {
      const K k = key_of<T, Descending>(from[i]);
      to[c[(k >> (8 * p)) & 0xff]++] = from[i];
    }
    std::swap(from, to);
  }
  if (from != run.data()) std::copy(from, from + run.size(), run.data());
}

/// Where rank r falls in each of the sorted runs: positions p_j with
/// sum p_j = r and every element before them ordered before every element
/// after. Elements equal to the one at rank r - 1 go to the earlier runs
/// first, so two ranks always split consistently.
template <class T, bool Descending>
std::vector<std::size_t> split_at(const std::vector<std::span<const T>>& runs, std::size_t r) {
  using K = key_t<T>;
  const auto key_less = [](const T& a, K k) { return key_of<T, Descending>(a) < k; };
  const auto key_le = [](K k, const T& a) { return k < key_of<T, Descending>(a); };
  std::vector<std::size_t> p(runs.size(), 0);
  std::size_t total = 0;
  for (const auto& run : runs) total += run.size();
  if (r == 0) return p;
  if (r >= total) {
    for (std::size_t j = 0; j < runs.size(); ++j) p[j] = runs[j].size();
    return p;
  }
  // The smallest key v with at least r elements ordered at or before it.
  K lo = 0, hi = ~K(0);
  while (lo < hi) {
    const K mid = lo + (hi - lo) / 2;
    std::size_t at_or_before = 0;
    for (const auto& run : runs)
      at_or_before += static_cast<std::size_t>(std::upper_bound(run.begin(), run.end(), mid, key_le) - run.begin());
    if (at_or_before >= r)
      hi = mid;
    else
      lo = mid + 1;
  }
  std::size_t taken = 0;
  std::vector<std::size_t> upper(runs.size());
  for (std::size_t j = 0; j < runs.size(); ++j) {
    p[j] = static_cast<std::size_t>(std::lower_bound(runs[j].begin(), runs[j].end(), lo, key_less) - runs[j].begin());
    upper[j] = static_cast<std::size_t>(std::upper_bound(runs[j].begin(), runs[j].end(), lo, key_le) - runs[j].begin());
    taken += p[j];
  }
  for (std::size_t j = 0; j < runs.size() && taken < r; ++j) {
    const std::size_t more = std::min(upper[j] - p[j], r - taken);
    p[j] += more;
    taken += more;
  }
  return p;
}

/// Merges runs[j][from[j], to[j]) for every j into `out` (their total size):
/// adjacent parts two at a time, rounds of std::merge between `out` and a
/// scratch buffer (sequential passes over memory the chunk owns, faster than
/// a k-way heap); equal keys keep the order of their runs.
template <class T, bool Descending>
void merge_parts(const std::vector<std::span<const T>>& runs, const std::vector<std::size_t>& from,
                 const std::vector<std::size_t>& to, std::span<T> out) {
  const auto by_key = [](const T& a, const T& b) { return key_of<T, Descending>(a) < key_of<T, Descending>(b); };
  // The parts, laid end to end in `out`: [bounds[i], bounds[i + 1]).
  std::vector<std::size_t> bounds{0};
  for (std::size_t j = 0; j < runs.size(); ++j) {
    if (to[j] == from[j]) continue;
    std::copy(runs[j].begin() + from[j], runs[j].begin() + to[j], out.begin() + bounds.back());
    bounds.push_back(bounds.back() + (to[j] - from[j]));
  }
  std::vector<T> scratch(out.size());
  T* src = out.data();
  T* dst = scratch.data();
  while (bounds.size() > 2) {
    std::vector<std::size_t> merged{0};
    for (std::size_t i = 0; i + 1 < bounds.size(); i += 2) {
      const std::size_t a = bounds[i], b = bounds[i + 1];
      const std::size_t c = i + 2 < bounds.size() ? bounds[i + 2] : b;
      std::merge(src + a, src + b, src + b, src + c, dst + a, by_key);
      merged.push_back(c);
    }
    bounds = std::move(merged);
    std::swap(src, dst);
  }
  if (src != out.data()) std::copy(src, src + out.size(), out.data());
}

}  // namespace oa::stl::sort_detail
