#pragma once
// A distributed sort (sample sort): each rank samples its block (one
// element drawn in each of even strata), the
// samples give every rank the same splitters, each rank sends every other
// the elements between their splitters (MPI_Alltoallv), and each sorts
// what it received with oa::stl's sort, out of core on its devices. Equal
// keys are told apart by their rank and position, so that splitters cut a
// run of duplicates too: no rank receives much more than its share,
// however skewed the keys. A rank holds its block, what it sends and what
// it receives, never the whole; sorting what it received takes no more
// (its runs replace it).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "oa/annotations/stl.hpp"
#include "oa/dist/vector.hpp"

namespace oa::dist {

/// Samples per rank of the run, drawn by each rank in proportion to its
/// block (32 x ranks from a block of an even share): more even shares for a
/// few more bytes exchanged (24-byte samples of int64: 24 KiB per rank at
/// 32 ranks).
inline constexpr std::size_t sort_samples_per_rank = 32;

namespace detail {

/// A key with its rank and position: equal keys are ordered by them.
template <class T>
struct tagged {
  T key;
  std::int32_t rank;
  std::uint64_t pos;
};

/// A fixed pseudo-random number of (rank, i) (SplitMix64's finaliser):
/// the same samples on every run.
inline std::uint64_t mix(int rank, std::size_t i) {
  std::uint64_t z = (static_cast<std::uint64_t>(rank) << 40) + i + 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

template <class T, class Compare>
bool before(const tagged<T>& a, const tagged<T>& b, const Compare& comp) {
  if (comp(a.key, b.key)) return true;
  if (comp(b.key, a.key)) return false;
  return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

}  // namespace detail

/// std::sort of a distributed vector, into a new one (std::less or
/// std::greater over integers or floating point, as oa::stl::sort; no NaN).
/// Rank r's block of the result holds the r-th range of the sorted
/// elements; its layout is what the splitters gave, near even. A collective.
template <class T, class Compare = std::less<>>
vector<T> sort(const vector<T>& x, Compare comp = {}) {
  static_assert(std::is_arithmetic_v<T>, "oa::dist::sort: the elements are integers or floating point");
  static_assert(std::is_same_v<Compare, std::less<>> || std::is_same_v<Compare, std::less<T>> ||
                    std::is_same_v<Compare, std::greater<>> || std::is_same_v<Compare, std::greater<T>>,
                "oa::dist::sort: the comparison is std::less or std::greater");
  using detail::tagged;
  communicator& c = x.comm();
  const int ranks = c.size(), me = c.rank();
  const std::string call = "oa::dist::sort";
  const auto less = [&comp](const tagged<T>& a, const tagged<T>& b) { return detail::before(a, b, comp); };

  // Samples at even steps of each block; every rank sorts them all alike.
  const std::vector<T>* block = nullptr;
  const auto parts = c.exchange(call, [&] {
    block = &x.block(call);
    // Samples in proportion to the block: blocks of every size weigh as
    // many elements as they hold.
    const std::size_t n = block->size(), total = x.size(), p = static_cast<std::size_t>(ranks);
    const std::size_t s =
        total == 0 ? 0 : std::min(n, (sort_samples_per_rank * p * p * n + total - 1) / total);
    std::vector<tagged<T>> samples(s);
    for (std::size_t i = 0; i < s; ++i) {
      // One position drawn in each of s even strata: even steps alone
      // would alias with keys that repeat with a period.
      const std::size_t from = i * n / s, to = (i + 1) * n / s;
      const std::size_t pos = from + static_cast<std::size_t>(detail::mix(me, i) % (to - from));
      samples[i] = {(*block)[pos], me, pos};
    }
    return detail::to_bytes(samples.data(), samples.size());
  }, x.layout().key());
  std::vector<tagged<T>> samples;
  for (const auto& p : parts) {
    const auto some = detail::from_bytes<tagged<T>>(p);
    samples.insert(samples.end(), some.begin(), some.end());
  }
  std::sort(samples.begin(), samples.end(), less);
  std::vector<tagged<T>> splitters;  // rank d takes [splitters[d - 1], splitters[d])
  if (!samples.empty())
    for (int d = 1; d < ranks; ++d)
      splitters.push_back(samples[static_cast<std::size_t>(d) * samples.size() / static_cast<std::size_t>(ranks)]);

  // Each element's rank; the elements for rank 0, then rank 1, ...
  const std::size_t n = block->size();
  // The splitters' keys decide alone unless a splitter's key equals the
  // element's: then rank and position do.
  std::vector<T> keys;
  for (const auto& sp : splitters) keys.push_back(sp.key);
  const auto rank_of = [&](std::size_t i) {
    const T& k = (*block)[i];
    const auto d = static_cast<std::size_t>(std::upper_bound(keys.begin(), keys.end(), k, comp) - keys.begin());
    if (d == 0 || comp(keys[d - 1], k)) return d;
    const tagged<T> t{k, me, i};
    return static_cast<std::size_t>(std::upper_bound(splitters.begin(), splitters.end(), t, less) - splitters.begin());
  };
  std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0), next(counts.size(), 0);
  for (std::size_t i = 0; i < n; ++i) ++counts[rank_of(i)];
  for (std::size_t d = 1; d < counts.size(); ++d) next[d] = next[d - 1] + counts[d - 1];
  std::vector<T> send(n);
  for (std::size_t i = 0; i < n; ++i) send[next[rank_of(i)]++] = (*block)[i];
  std::vector<T> mine = all_to_all<T>(c, call, std::span<const T>(send), counts);
  std::vector<T>().swap(send);
  // What this rank received is its own: sorted without a copy kept for
  // a rollback, and released once its runs are made.
  const auto sizes = each_rank<std::uint64_t>(c, call, [&] {
    mine = oa::stl::sorted(std::move(mine), comp);
    return static_cast<std::uint64_t>(mine.size());
  });
  return vector<T>(layout::of_counts(std::vector<std::size_t>(sizes.begin(), sizes.end())), oa::hold(std::move(mine)),
                   c);
}

}  // namespace oa::dist
