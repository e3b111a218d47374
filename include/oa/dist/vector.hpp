#pragma once
// oa::dist::vector<T>: a vector whose elements are cut over the ranks of an
// SPMD run, each rank holding its block as a lazy value of its own oa
// runtime (so the block pages through the rank's devices like any other).
// No rank ever holds the whole unless the program gathers it.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "oa/core/lazy.hpp"
#include "oa/dist/communicator.hpp"
#include "oa/dist/layout.hpp"

namespace oa::dist {

namespace detail {

template <class T>
std::vector<std::byte> to_bytes(const T* data, std::size_t n) {
  std::vector<std::byte> b(n * sizeof(T));
  if (n) std::memcpy(b.data(), data, b.size());
  return b;
}

template <class T>
std::vector<T> from_bytes(const std::vector<std::byte>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

/// An oa::invalid_argument naming `call` unless `root` is a rank of `ranks`.
inline void check_root(const char* call, int root, int ranks) {
  if (root < 0 || root >= ranks)
    throw oa::invalid_argument(call, "root", std::to_string(root) + " is not a rank of " + std::to_string(ranks));
}

/// A call's root as part of the key its ranks agree on.
inline std::uint64_t root_key(int root) noexcept {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(root)) + 1) * 0x9e3779b97f4a7c15u;
}

}  // namespace detail

/// Every rank's `local()` value, in rank order, on every rank (a
/// collective agreeing on failure, and on `layout`: see
/// communicator::exchange).
template <class T, class F>
std::vector<T> each_rank(communicator& c, const std::string& call, F&& local, std::uint64_t layout = 0) {
  static_assert(std::is_trivially_copyable_v<T>, "oa::dist: values exchanged between ranks must be trivially copyable");
  const auto parts = c.exchange(
      call,
      [&] {
        const T v = local();
        return detail::to_bytes(&v, 1);
      },
      layout);
  std::vector<T> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(detail::from_bytes<T>(p).at(0));
  return out;
}

/// communicator::all_to_all of elements: counts[r] elements of `send` to
/// rank r; what the ranks sent here, in rank order, and (in `from`) how
/// many elements each.
template <class T>
std::vector<T> all_to_all(communicator& c, const std::string& call, std::span<const T> send,
                          std::vector<std::size_t> counts, std::vector<std::size_t>* from = nullptr) {
  for (auto& k : counts) k *= sizeof(T);
  std::vector<T> got;
  auto bytes_from = c.all_to_all(call, std::as_bytes(send), counts, [&](std::size_t bytes) {
    got.resize(bytes / sizeof(T));
    return reinterpret_cast<std::byte*>(got.data());
  });
  if (from) {
    for (auto& k : bytes_from) k /= sizeof(T);
    *from = std::move(bytes_from);
  }
  return got;
}

template <class T>
class vector {
  static_assert(std::is_trivially_copyable_v<T>,
                "oa::dist::vector: elements cross ranks as bytes: they must be trivially copyable");

 public:
  using value_type = T;

  /// A rank's block `local` of a vector laid out as `l` over the ranks of
  /// `c` (every rank passes the same layout; this rank's block holds
  /// l.count(c.rank()) elements).
  vector(dist::layout l, lazy<std::vector<T>> local, communicator& c = world())
      : layout_(std::move(l)), local_(std::move(local)), comm_(&c) {
    if (layout_.ranks() != c.size())
      throw oa::invalid_argument("oa::dist::vector", "layout",
                                 layout_.describe() + " for a communicator of " + std::to_string(c.size()) + " ranks");
  }

  const dist::layout& layout() const noexcept { return layout_; }
  communicator& comm() const noexcept { return *comm_; }
  /// Elements over every rank.
  std::size_t size() const noexcept { return layout_.total(); }
  /// The global index of this rank's first element.
  std::size_t offset() const { return layout_.offset(comm_->rank()); }
  /// This rank's block, lazy: reading it gathers nothing.
  const lazy<std::vector<T>>& local() const noexcept { return local_; }
  /// This rank's block, computed, checked against the layout (an
  /// oa::error naming `call` when it holds another number of elements).
  const std::vector<T>& block(const std::string& call) const {
    const std::vector<T>& mine = local_.get();
    if (mine.size() != layout_.count(comm_->rank()))
      throw oa::error(call + ": this rank's block holds " + std::to_string(mine.size()) + " elements, its layout " +
                      std::to_string(layout_.count(comm_->rank())));
    return mine;
  }

  /// The whole vector on every rank (a collective: every rank calls it).
  std::vector<T> gather() const {
    const auto parts = comm_->exchange("oa::dist::vector::gather", [&] { return block_bytes(); }, layout_.key());
    return joined(parts);
  }

  /// The whole vector on rank `root`, an empty one on the others (a collective).
  std::vector<T> gather(int root) const {
    const std::vector<T>* mine = nullptr;
    // The root is checked, and agreed (part of the key), in the collective:
    // a bad one on any rank fails every rank's call.
    (void)comm_->exchange(
        "oa::dist::vector::gather (to one rank)",
        [&] {
          detail::check_root("oa::dist::vector::gather", root, comm_->size());
          mine = &block("oa::dist::vector::gather");
          return std::vector<std::byte>{};
        },
        layout_.key() ^ detail::root_key(root));
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm_->size()), 0);
    counts[static_cast<std::size_t>(root)] = mine->size();
    return all_to_all<T>(*comm_, "oa::dist::vector::gather (to one rank)", std::span<const T>(*mine), counts);
  }

 private:
  std::vector<std::byte> block_bytes() const {
    const std::vector<T>& mine = block("oa::dist::vector::gather");
    return detail::to_bytes(mine.data(), mine.size());
  }
  std::vector<T> joined(const std::vector<std::vector<std::byte>>& parts) const {
    std::vector<T> all;
    all.reserve(layout_.total());
    for (const auto& p : parts) {
      const std::vector<T> block = detail::from_bytes<T>(p);
      all.insert(all.end(), block.begin(), block.end());
    }
    return all;
  }

  dist::layout layout_;
  lazy<std::vector<T>> local_;
  communicator* comm_;
};

/// A vector of `total` elements laid out evenly, each rank computing its own
/// block: element i is f(i) (i the global index). Not a collective.
template <class T, class F>
vector<T> generate(std::size_t total, F f, communicator& c = world()) {
  dist::layout l = layout::even(total, c.size());
  std::vector<T> block(l.count(c.rank()));
  const std::size_t first = l.offset(c.rank());
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<T>(f(first + i));
  return vector<T>(std::move(l), oa::hold(std::move(block)), c);
}

/// A vector of the blocks each rank holds, in rank order (a collective: the
/// ranks learn each other's counts).
template <class T>
vector<T> from_local(std::vector<T> block, communicator& c = world()) {
  const auto counts = each_rank<std::uint64_t>(c, "oa::dist::from_local",
                                                       [&] { return static_cast<std::uint64_t>(block.size()); });
  return vector<T>(layout::of_counts(std::vector<std::size_t>(counts.begin(), counts.end())),
                   oa::hold(std::move(block)), c);
}

/// A vector of the elements of a binary file (its bytes, sizeof(T) each),
/// laid out evenly, each rank reading only its block; the file must be at
/// the same path on every rank. A collective: a rank that cannot read it
/// fails every rank's call.
template <class T>
vector<T> read_binary(const std::string& path, communicator& c = world()) {
  const char* call = "oa::dist::read_binary";
  // Every rank's size of the file: a path naming different files on
  // different ranks (node-local disks) is refused, not read as one.
  const auto sizes = each_rank<std::uint64_t>(c, call, [&] {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    if (ec) throw oa::invalid_argument(call, "path", "'" + path + "': " + ec.message());
    if (bytes % sizeof(T) != 0)
      throw oa::invalid_argument(call, "path",
                                 "'" + path + "' holds " + std::to_string(bytes) + " bytes, not a whole number of " +
                                     std::to_string(sizeof(T)) + "-byte elements");
    return static_cast<std::uint64_t>(bytes);
  });
  for (std::size_t r = 1; r < sizes.size(); ++r)
    if (sizes[r] != sizes[0]) {
      const int first = c.run_rank(0), other = c.run_rank(static_cast<int>(r));  // as the run numbers them
      throw oa::dist::error(std::string(call) + ": '" + path + "' holds " + std::to_string(sizes[0]) +
                                " bytes on rank " + std::to_string(first) + " and " + std::to_string(sizes[r]) +
                                " on rank " + std::to_string(other) + ": the ranks must read one file",
                            call, other);
    }
  dist::layout l = layout::even(static_cast<std::size_t>(sizes[0] / sizeof(T)), c.size());
  std::vector<T> block(l.count(c.rank()));
  (void)c.exchange(call, [&] {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(l.offset(c.rank()) * sizeof(T)));
    in.read(reinterpret_cast<char*>(block.data()), static_cast<std::streamsize>(block.size() * sizeof(T)));
    if (!in) throw oa::invalid_argument(call, "path", "'" + path + "': cannot read this rank's block");
    return std::vector<std::byte>{};
  });
  return vector<T>(std::move(l), oa::hold(std::move(block)), c);
}

}  // namespace oa::dist
