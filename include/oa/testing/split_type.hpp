#pragma once
// oa::testing::check_split_type<S>(value): the laws the engine relies on a
// split type for, checked on a sample value. A split type's author runs it in
// their own tests, with any test framework or none; oa runs it on every split
// type it ships (tests/test_split_laws.cpp). It calls the split type as the
// engine does (host_region, packed_region, make_view, make, store; identity,
// combine, merge), over several ways of cutting the sample, and for each law
// broken names the chunking and the first unit found wrong:
//
//   const auto r = oa::testing::check_split_type<samples_split>(sample);
//   assert(r);                    // or CHECK(r), EXPECT_TRUE(r) << r, r.throw_if_broken()
//   std::cout << r << '\n';       // "every law holds on ...", or one line per law broken
//
// Partitioned split types. The sample: a value of tens to a few thousand
// units whose elements differ from each other. It is cut into chunks of one
// unit, one chunk, two even chunks, chunks of k units with a shorter last
// one, uneven chunks of 1, 2, 3, ... units, and chunks of each size in
// options.chunk_units. The laws:
//   shape          shape_of(value).elem_bytes is sizeof(element<T>)
//   whole region   host_region(value, [0, units)) holds at most the bytes shape_of
//                  says, its rows do not overlap, and, for a T with data() and
//                  size() over element<T>, it lies within them
//   tiling         the chunks' host regions lie within the whole region, do not
//                  overlap and cover all of it: every unit in exactly one chunk
//   offsets        the host region of chunk [b, e) holds exactly units b to e-1,
//                  each where its chunk of one unit says it lies
//   packed region  packed_region(buffer, shape, r) has the host region's width
//                  and rows and fits the r.size() * unit bytes a chunk's device
//                  buffer has
//   view           a chunk's views (make_view<const T>, make_view<T>) point at
//                  its region and hold its elements (views with data() and
//                  size()), read the same staged in a device buffer as in place
//                  and read-only as writable (views that are ranges, or have
//                  rows(), cols() and (i, j)), and an indexed view's `first` is
//                  the index of the chunk's first element
//   round trip     every chunk copied into its device buffer and back rebuilds
//                  the value, in the value's own layout and in a value make<T>
//                  creates (byte for byte, and with operator== where T has one)
//   make           make<T> gives a value of the shape it is asked for, laid out as the sample
//   store          with a view that is a copy (the value type itself) and store:
//                  each chunk's view stored into a made value rebuilds the value
//   state          a value made from the sample's state<T> has that state
//                  (where state<T> has operator==); whether views use the
//                  state make_view is given is the split type's to test
//   empty chunk    host_region and packed_region of an empty range [b, b) hold
//                  no bytes (options.empty_chunks = false for a split type
//                  never asked for empty ranges of a value with units; the
//                  engine asks for [0, 0) of an empty value, whose functions
//                  it runs once on empty views)
//   empty value    make<T> of zero units gives a value of zero units (split
//                  types without state; with state, check an empty sample too)
// Reduction split types. The sample: a std::vector<R> of a few partials whose
// combinations are exact (small integers for a sum: results are compared
// with ==, or byte for byte where R has none):
//   identity       merging no partials gives identity<R>(); identity<R>()
//                  combined on either side of a partial gives the partial
//   chunk order    merging the first k partials gives combine folded over them
//                  in chunk order from identity<R>(): none dropped, repeated or
//                  reordered
//   associativity  merging two runs of consecutive partials and combining the
//                  two gives the merge of all: chunk sizes do not change results
// Broadcast split types: a copy of the value compares equal to it (law
// "copy", where T has operator==); accepts<T> is checked at compile time.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <memory>
#include <ostream>
#include <ranges>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "oa/core/annotate.hpp"
#include "oa/split_types/split.hpp"
#include "oa/testing/detail/byte_map.hpp"
#include "oa/testing/split_check.hpp"

namespace oa::testing {

/// How check_split_type cuts a partitioned sample.
struct split_check_options {
  std::vector<std::size_t> chunk_units{};  // more chunk sizes to try
  bool empty_chunks = true;              // whether to ask for host regions of empty ranges
};

namespace detail {

using split::range;

inline std::string range_text(range r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}
inline std::string region_call(range r) { return "host_region(value, " + range_text(r) + ")"; }
inline std::string units_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " unit" : " units"); }

/// One way of cutting the sample.
struct chunking {
  std::string name;
  std::vector<range> chunks;
  bool one_unit = false;  // chunks of one unit: where each unit lies

  /// The name and the chunks (the first three and the last two of many).
  std::string text() const {
    std::string s = name + " (";
    const std::size_t n = chunks.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (n > 6 && i == 3) {
        s += "... ";
        i = n - 2;
      }
      s += range_text(chunks[i]) + (i + 1 < n ? " " : ")");
    }
    return s;
  }
};

/// The ways of cutting `units` units; chunks of one unit first (they say
/// where each unit lies), none twice.
inline std::vector<chunking> chunkings_for(std::size_t units, const std::vector<std::size_t>& extra) {
  std::vector<chunking> out;
  const auto add = [&](std::string name, std::vector<range> cs) {
    if (cs.empty()) return;
    for (const auto& c : out)
      if (c.chunks == cs) return;
    out.push_back({std::move(name), std::move(cs)});
  };
  if (units == 0) return out;
  add("chunks of one unit", split::chunks(units, 1));
  out.front().one_unit = true;
  add("one chunk", {{0, units}});
  add("two even chunks", split::even_chunks(units, 2));
  for (std::size_t k = std::max<std::size_t>(2, units / 3); k < units; ++k)
    if (units % k) {
      add("chunks of " + std::to_string(k) + " units, the last of " + std::to_string(units % k), split::chunks(units, k));
      break;
    }
  std::vector<range> uneven;
  for (std::size_t b = 0, len = 1; b < units; b += len, ++len) uneven.push_back({b, std::min(units, b + len)});
  add("uneven chunks of 1, 2, 3, ... units", std::move(uneven));
  for (std::size_t k : extra)
    if (k) add("chunks of " + std::to_string(k) + " units", split::chunks(units, k));
  return out;
}

/// A value for messages: printed where R can be, its size otherwise.
template <class R>
std::string value_text(const R& v) {
  if constexpr (requires(std::ostream& o) { o << v; }) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
  } else {
    return "(a value of " + std::to_string(sizeof(R)) + " bytes)";
  }
}

/// Equal by ==, or else byte for byte (NaNs of the same bits; types without ==).
template <class R>
bool same_value(const R& a, const R& b) {
  if constexpr (std::equality_comparable<R>)
    if (a == b) return true;
  return std::memcmp(&a, &b, sizeof(R)) == 0;
}

/// Where two views of one chunk first differ, when the view can be read.
struct view_difference {
  bool readable = false;
  std::size_t unit = no_unit;  // within the chunk; no_unit: none differs
};

template <class A, class B>
view_difference compare_views(const A& a, const B& b, std::size_t chunk_units, std::size_t inner) {
  const auto same = [](const auto& x, const auto& y) {
    const std::remove_cvref_t<decltype(x)> u = x, w = y;
    return std::memcmp(&u, &w, sizeof u) == 0;
  };
  // Matrices first: Eigen's declare begin() for every shape but define it for vectors only.
  if constexpr (requires { a.rows(); a.cols(); a(0, 0); b(0, 0); }) {
    if (a.rows() != b.rows() || a.cols() != b.cols()) return {true, 0};
    const bool by_rows = static_cast<std::size_t>(a.rows()) == chunk_units;
    std::size_t first = no_unit;
    for (decltype(a.cols()) j = 0; j < a.cols(); ++j)
      for (decltype(a.rows()) i = 0; i < a.rows(); ++i)
        if (!same(a(i, j), b(i, j))) first = std::min(first, static_cast<std::size_t>(by_rows ? i : j));
    return {true, first};
  } else if constexpr (std::ranges::sized_range<const A> && std::ranges::sized_range<const B>) {
    if (std::ranges::size(a) != std::ranges::size(b)) return {true, 0};
    std::size_t k = 0;
    auto y = std::ranges::begin(b);
    for (auto x = std::ranges::begin(a); x != std::ranges::end(a); ++x, ++y, ++k)
      if (!same(*x, *y)) return {true, k / std::max<std::size_t>(inner, 1)};
    return {true, no_unit};
  } else {
    return {};
  }
}

/// The laws of a partitioned split type S on a value of type T.
template <class S, class T>
class partitioned_laws {
  static constexpr bool stateful = split::has_state<S, T>;
  using state_type = std::conditional_t<stateful, split::state_t<S, T>, std::monostate>;
  using element = typename S::template element<T>;
  using ops = oa::detail::partitioned_ops<S, T>;

 public:
  partitioned_laws(const T& x, const split_check_options& opt, split_check& out)
      : x_(x), opt_(opt), out_(out), shape_(S::shape_of(x)), whole_(S::host_region(x, {0, shape_.units})),
        storage_(whole_), map_(whole_, shape_.units) {
    if constexpr (stateful) state_ = S::state_of(x);
    out_.sample = "a value of " + units_text(shape_.units) + " (" + std::to_string(shape_.inner) +
                  (shape_.inner == 1 ? " element" : " elements") + " of " + std::to_string(shape_.elem_bytes) +
                  " bytes each)";
  }

  void run() {
    if (!check_whole()) return;  // nothing else can be read safely
    const auto cs = chunkings_for(shape_.units, opt_.chunk_units);
    out_.chunkings = cs.size();
    for (const chunking& c : cs) check_chunking(c);
    if (opt_.empty_chunks) check_empty_chunks();
    if constexpr (split::partitioned_result_split<S, T>) check_make();
  }

 private:
  const void* state() const {
    if constexpr (stateful) return &state_;
    return nullptr;
  }
  template <class V>
  auto view_of(const region& g, range r) const {
    if constexpr (stateful)
      return S::template make_view<V>(g, shape_, r, state_);
    else
      return S::template make_view<V>(g, shape_, r);
  }
  region packed(std::byte* buffer, range r) const { return ops::packed_region(buffer, shape_, r, state()); }
  std::size_t unit_at(std::ptrdiff_t offset) const { return map_.unit_at(offset); }
  std::ptrdiff_t offset(const region& g) const { return offset_of(g, whole_.data); }

  // ---- shape, whole region --------------------------------------------------------
  bool check_whole() {
    if (shape_.elem_bytes != sizeof(element))
      out_.fail("shape", "", no_unit,
                "shape_of(value).elem_bytes is " + std::to_string(shape_.elem_bytes) + ", but element<T> has " +
                    std::to_string(sizeof(element)) + " bytes");
    const std::string w = region_call({0, shape_.units});
    if (whole_.rows > 1 && whole_.pitch < whole_.width) {
      out_.fail("whole region", "", no_unit,
                w + " has rows of " + std::to_string(whole_.width) + " bytes " + std::to_string(whole_.pitch) +
                    " bytes apart: its rows overlap");
      return false;
    }
    if (whole_.bytes() > shape_.bytes()) {
      out_.fail("whole region", "", no_unit,
                w + " holds " + std::to_string(whole_.bytes()) + " bytes, more than the " +
                    std::to_string(shape_.bytes()) + " shape_of(value) gives (units x inner x elem_bytes)");
      return false;
    }
    if (whole_.bytes() > 0 && !whole_.data) {
      out_.fail("whole region", "", no_unit, w + " holds " + std::to_string(whole_.bytes()) + " bytes at a null pointer");
      return false;
    }
    if constexpr (requires { x_.data(); x_.size(); }) {
      using E = std::remove_cv_t<std::remove_pointer_t<decltype(x_.data())>>;
      if constexpr (std::is_same_v<E, element>) {
        const auto* first = reinterpret_cast<const std::byte*>(x_.data());
        const std::ptrdiff_t at = offset_of(whole_, first);
        const auto elements = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(x_.size()) * sizeof(element));
        if (whole_.bytes() > 0 && (at < 0 || at + static_cast<std::ptrdiff_t>(storage_.extent()) > elements)) {
          out_.fail("whole region", "", no_unit,
                    w + " spans bytes [" + std::to_string(at) + ", " +
                        std::to_string(at + static_cast<std::ptrdiff_t>(storage_.extent())) +
                        ") of the value's elements, which hold " + std::to_string(elements) + " bytes (data(), size())");
          return false;
        }
      }
    }
    return true;
  }

  // ---- one chunking ----------------------------------------------------------------
  void check_chunking(const chunking& c) {
    std::vector<region> host(c.chunks.size());
    for (std::size_t i = 0; i < c.chunks.size(); ++i) host[i] = S::host_region(x_, c.chunks[i]);
    std::vector<byte_run> runs;
    const bool tiled = check_tiling(c, host, runs);
    if (tiled && c.one_unit) map_.set_exact(runs);
    if (tiled && map_.exact())
      for (std::size_t i = 0; i < c.chunks.size(); ++i)
        if (!check_offsets(c, c.chunks[i], host[i])) break;
    // Each chunk staged as the engine stages it: into a device buffer of its own.
    std::vector<std::vector<std::byte>> buffers(c.chunks.size());
    std::vector<region> staged(c.chunks.size());
    bool packed_ok = true;
    for (std::size_t i = 0; i < c.chunks.size() && packed_ok; ++i) {
      buffers[i].resize(std::max<std::size_t>(c.chunks[i].size() * shape_.unit_bytes(), 1));
      staged[i] = packed(buffers[i].data(), c.chunks[i]);
      packed_ok = check_packed(c, c.chunks[i], host[i], staged[i], buffers[i]);
    }
    if (!tiled || !packed_ok) return;  // reading or writing through these regions is not safe
    for (std::size_t i = 0; i < c.chunks.size(); ++i) copy_region(staged[i], host[i]);
    for (std::size_t i = 0; i < c.chunks.size(); ++i)
      if (!check_view(c, c.chunks[i], host[i], staged[i])) break;
    check_round_trip(c, host, staged);
    if constexpr (split::partitioned_result_split<S, T>) {
      rebuild_made(c, staged, "round trip", [&](const region& to, std::size_t i) { copy_region(to, staged[i]); });
      using V = typename S::template view<const T>;
      if constexpr (split::contract::has_store<S, V> && std::is_same_v<std::remove_cvref_t<V>, T>)
        rebuild_made(c, staged, "store", [&](const region& to, std::size_t i) {
          S::store(view_of<const T>(staged[i], c.chunks[i]), to, shape_, c.chunks[i]);
        });
    }
  }

  /// tiling: the chunks' regions lie in the whole region, overlap nowhere, cover it all.
  bool check_tiling(const chunking& c, const std::vector<region>& host, std::vector<byte_run>& runs) {
    for (std::size_t i = 0; i < host.size(); ++i) {
      const region& g = host[i];
      const range r = c.chunks[i];
      if (g.rows > 1 && g.pitch < g.width) {
        out_.fail("tiling", c.text(), r.begin,
                  region_call(r) + " has rows of " + std::to_string(g.width) + " bytes " + std::to_string(g.pitch) +
                      " bytes apart: its rows overlap");
        return false;
      }
      if (g.bytes() == 0) continue;
      const std::ptrdiff_t at = offset(g);
      const auto end = at + static_cast<std::ptrdiff_t>(extent(g));
      const std::size_t before = runs.size();
      if (at >= 0 && end <= static_cast<std::ptrdiff_t>(storage_.extent())) append_runs(g, whole_.data, i, runs);
      bool inside = runs.size() > before;
      for (std::size_t k = before; k < runs.size() && inside; ++k) inside = storage_.holds(runs[k]);
      if (!inside) {
        out_.fail("tiling", c.text(), r.begin,
                  region_call(r) + " reaches " + bytes_text(at, end) + " relative to the value's storage, outside " +
                      region_call({0, shape_.units}) + " (" + std::to_string(whole_.rows) + " rows of " +
                      std::to_string(whole_.width) + " bytes, " + std::to_string(whole_.pitch) + " apart)");
        return false;
      }
    }
    // In chunk order, so that the chunk named is the first to overlap an earlier one.
    if (const auto twice = first_overlap(runs)) {
      const auto [run, earlier] = *twice;
      const range ra = c.chunks[earlier.owner], rb = c.chunks[run.owner];
      std::string hint;
      if (rb.begin > 0 && host[run.owner].data == whole_.data)
        hint = "; it starts where the value's storage starts: host_region must add the chunk's offset (begin " +
               std::to_string(rb.begin) + ") to where it points";
      else if (host[run.owner].data == host[earlier.owner].data)
        hint = "; both start at byte " + std::to_string(offset(host[run.owner]));
      out_.fail("tiling", c.text(), rb.begin,
                region_call(rb) + " covers " + bytes_text(std::max(run.lo, earlier.lo), std::min(run.hi, earlier.hi)) +
                    " of the value's storage, which " + region_call(ra) + " covers too" + hint);
      return false;
    }
    sort_runs(runs);
    const byte_run gap = storage_.first_gap(runs);
    if (gap.hi > gap.lo) {
      const std::size_t u = unit_at(gap.lo);
      out_.fail("tiling", c.text(), u,
                bytes_text(gap.lo, gap.hi) + " of the value's storage (" + region_call({0, shape_.units}) +
                    ") are in no chunk's host region" +
                    (u == no_unit ? std::string() : ": unit " + std::to_string(u) + "'s bytes are missing"));
      return false;
    }
    return true;
  }

  /// offsets: chunk r's region holds exactly the storage of its units.
  bool check_offsets(const chunking& c, range r, const region& g) {
    std::vector<std::size_t> covered(r.size(), 0);
    std::size_t foreign = no_unit;
    std::vector<byte_run> runs;
    append_runs(g, whole_.data, 0, runs);
    for (const byte_run& run : runs)
      map_.overlaps(run, [&](std::size_t u, std::size_t bytes) {
        if (u >= r.begin && u < r.end)
          covered[u - r.begin] += bytes;
        else if (foreign == no_unit)
          foreign = u;
      });
    std::size_t missing = no_unit;
    for (std::size_t u = r.begin; u < r.end && missing == no_unit; ++u)
      if (covered[u - r.begin] != map_.bytes_of(u)) missing = u;
    if (missing == no_unit && foreign == no_unit) return true;
    const std::ptrdiff_t want = map_.first_byte(r.begin), got = offset(g);
    std::string what;
    if (g.bytes() > 0 && want >= 0 && got != want) {
      const std::size_t there = unit_at(got);
      what = "it starts at byte " + std::to_string(got) +
             (there == no_unit ? std::string() : ", in unit " + std::to_string(there) + "'s storage") +
             ", where unit " + std::to_string(r.begin) + " starts at byte " + std::to_string(want);
      if (got == 0 && r.begin > 0)
        what += ": host_region must add the chunk's offset (begin " + std::to_string(r.begin) + ") to where it points";
    } else if (missing != no_unit) {
      what = "unit " + std::to_string(missing) + "'s storage is missing from it";
    } else {
      what = "it also holds unit " + std::to_string(foreign) + "'s storage";
    }
    out_.fail("offsets", c.text(), missing != no_unit ? missing : r.begin,
              region_call(r) + " must hold units " + std::to_string(r.begin) + " to " + std::to_string(r.end - 1) +
                  " (each where its chunk of one unit lies); " + what);
    return false;
  }

  /// packed region: the host region's shape, within the chunk's device buffer.
  bool check_packed(const chunking& c, range r, const region& host, const region& p, const std::vector<std::byte>& buf) {
    const std::string call = "packed_region(buffer, shape, " + range_text(r) + ")";
    const std::size_t cap = r.size() * shape_.unit_bytes();
    std::string what;
    if (p.width != host.width || p.rows != host.rows)
      what = call + " has " + std::to_string(p.rows) + " rows of " + std::to_string(p.width) + " bytes, " +
             region_call(r) + " " + std::to_string(host.rows) + " rows of " + std::to_string(host.width) +
             ": the engine copies one into the other";
    else if (p.rows > 1 && p.pitch < p.width)
      what = call + " has rows of " + std::to_string(p.width) + " bytes " + std::to_string(p.pitch) +
             " bytes apart: its rows overlap";
    else if (p.bytes() > 0 && (offset_of(p, buf.data()) < 0 ||
                               offset_of(p, buf.data()) + static_cast<std::ptrdiff_t>(extent(p)) >
                                   static_cast<std::ptrdiff_t>(cap)))
      what = call + " spans " +
             bytes_text(offset_of(p, buf.data()), offset_of(p, buf.data()) + static_cast<std::ptrdiff_t>(extent(p))) +
             " of a chunk's device buffer, which has " + std::to_string(cap) + " (units x unit bytes)";
    if (what.empty()) return true;
    out_.fail("packed region", c.text(), r.begin, what);
    return false;
  }

  /// view: a chunk's views in place (read-only and writable) and staged
  /// (read-only, in its device buffer).
  bool check_view(const chunking& c, range r, const region& host, const region& staged) {
    const auto in_place = view_of<const T>(host, r);
    const auto writable = view_of<T>(host, r);
    const auto on_device = view_of<const T>(staged, r);
    using V = std::remove_cvref_t<decltype(in_place)>;
    constexpr bool copy = std::is_same_v<V, T> && !std::is_trivially_copyable_v<V>;  // owns a copy of the chunk
    std::string what;
    if constexpr (!copy && requires { in_place.data(); in_place.size(); writable.data(); }) {
      const auto* at = reinterpret_cast<const std::byte*>(in_place.data());
      const std::size_t bytes = static_cast<std::size_t>(in_place.size()) * sizeof(element);
      if (host.bytes() > 0 && at != host.data)
        what = "make_view over " + region_call(r) + " points at byte " +
               std::to_string(reinterpret_cast<std::uintptr_t>(at) - reinterpret_cast<std::uintptr_t>(whole_.data)) +
               " of the value's storage, not at the region's first byte (" + std::to_string(offset(host)) + ")";
      else if (bytes != host.bytes())
        what = "make_view over " + region_call(r) + " holds " + std::to_string(bytes) +
               " bytes of elements, the region " + std::to_string(host.bytes());
      else if (staged.bytes() > 0 && reinterpret_cast<const std::byte*>(on_device.data()) != staged.data)
        what = "make_view over a chunk's device buffer points elsewhere than the region it is given";
      else if (reinterpret_cast<const std::byte*>(writable.data()) != at)
        what = "make_view<T> (writable) over " + region_call(r) + " points elsewhere than make_view<const T>";
    }
    if constexpr (requires { in_place.first; }) {
      if (what.empty() && whole_.rows <= 1 && host.bytes() > 0) {
        const auto want = static_cast<std::size_t>(offset(host)) / sizeof(element);
        if (static_cast<std::size_t>(in_place.first) != want || static_cast<std::size_t>(on_device.first) != want)
          what = "the view of chunk " + range_text(r) + " says its first element is element " +
                 std::to_string(in_place.first) + " (" + std::to_string(on_device.first) +
                 " staged), but its region starts at element " + std::to_string(want);
      }
    }
    std::size_t unit = r.begin;
    if (what.empty()) {
      const view_difference d = compare_views(in_place, on_device, r.size(), shape_.inner);
      const view_difference w = compare_views(in_place, writable, r.size(), shape_.inner);
      if (d.unit != no_unit) {
        unit = r.begin + d.unit;
        what = "the view of chunk " + range_text(r) + " staged in its device buffer reads unit " +
               std::to_string(unit) + " differently from the view over " + region_call(r) +
               ": make_view must take the layout (pitch) from the region it is given";
      } else if (w.unit != no_unit) {
        unit = r.begin + w.unit;
        what = "make_view<T> (writable) over " + region_call(r) + " reads unit " + std::to_string(unit) +
               " differently from make_view<const T>";
      } else {
        return true;
      }
    }
    out_.fail("view", c.text(), unit, what);
    return false;
  }

  /// The first byte of the whole region where `rebuilt` (laid out as
  /// `layout`, whose bytes start at `base`) differs from the value.
  std::ptrdiff_t first_difference(const std::byte* base, const region& layout) const {
    for (std::size_t k = 0; k < whole_.rows; ++k) {
      const std::byte* want = whole_.data + k * whole_.pitch;
      const std::byte* got = base + k * layout.pitch;
      for (std::size_t b = 0; b < whole_.width; ++b)
        if (want[b] != got[b]) return static_cast<std::ptrdiff_t>(k * whole_.pitch + b);
    }
    return -1;
  }
  /// Fills a region laid out as the whole with the complement of the value's bytes: nothing matches until written.
  void fill_unlike(std::byte* base, const region& layout) const {
    for (std::size_t k = 0; k < whole_.rows; ++k)
      for (std::size_t b = 0; b < whole_.width; ++b) base[k * layout.pitch + b] = ~whole_.data[k * whole_.pitch + b];
  }
  void fail_rebuilt(const char* law, const chunking& c, std::ptrdiff_t at, const std::string& how) {
    const std::size_t u = unit_at(at);
    out_.fail(law, c.text(), u,
              how + " differs from the value at byte " + std::to_string(at) + " of its storage" +
                  (u == no_unit ? std::string() : " (unit " + std::to_string(u) + ")"));
  }

  /// round trip: each chunk from its device buffer back into a copy of the value's layout.
  void check_round_trip(const chunking& c, const std::vector<region>& host, const std::vector<region>& staged) {
    std::vector<std::byte> copy(std::max<std::size_t>(storage_.extent(), 1));
    fill_unlike(copy.data(), whole_);
    for (std::size_t i = 0; i < host.size(); ++i)
      copy_region({copy.data() + offset(host[i]), host[i].width, host[i].rows, host[i].pitch}, staged[i]);
    const std::ptrdiff_t at = first_difference(copy.data(), whole_);
    if (at >= 0) fail_rebuilt("round trip", c, at, "the value rebuilt from its chunks (host_region -> packed_region -> back)");
  }

  /// A value made by make<T> with the sample's shape and state, its chunks'
  /// regions written by `write(region, chunk index)`, compared with the sample.
  template <class Write>
  void rebuild_made(const chunking& c, const std::vector<region>& staged, const char* law, Write&& write) {
    void* object = nullptr;
    const std::shared_ptr<void> owner = ops::make(shape_, state(), object);
    const T& y = *static_cast<const T*>(object);
    if (!same_layout(y)) return;
    const region wy = S::host_region(y, {0, shape_.units});
    fill_unlike(wy.data, wy);
    for (std::size_t i = 0; i < c.chunks.size(); ++i) {
      const region to = S::host_region(y, c.chunks[i]);
      const std::ptrdiff_t at = offset_of(to, wy.data);
      if (to.width != staged[i].width || to.rows != staged[i].rows ||
          (to.bytes() > 0 && (at < 0 || at + static_cast<std::ptrdiff_t>(extent(to)) > static_cast<std::ptrdiff_t>(extent(wy))))) {
        out_.fail(law, c.text(), c.chunks[i].begin,
                  "in a value make<T> created, host_region(made, " + range_text(c.chunks[i]) +
                      ") is not laid out as in the value");
        return;
      }
      write(to, i);
    }
    const std::ptrdiff_t at = first_difference(wy.data, wy);
    const std::string how = std::string("a value make<T> created, each chunk ") +
                            (std::string_view(law) == "store" ? "stored into it (store) from its view (make_view)"
                                                              : "copied into it from its device buffer");
    if (at >= 0) return fail_rebuilt(law, c, at, how);
    if constexpr (std::equality_comparable<T>) {
      const T plain = x_;  // a sample that is not equal to its own copy (NaN elements) says nothing here
      if (plain == x_ && !(y == x_))
        out_.fail(law, c.text(), no_unit,
                  how + ", has every element right but does not compare equal to the value (operator==): make<T> "
                        "or the split type's state leaves out something the value has");
    }
  }

  /// make: a value of the sample's shape, laid out as the sample (checked once).
  bool same_layout(const T& y) {
    const split::shape got = S::shape_of(y);
    const region wy = S::host_region(y, {0, shape_.units});
    std::string what;
    if (!(got == shape_))
      what = "make<T>(shape) with " + units_text(shape_.units) + " of " + std::to_string(shape_.inner) +
             " gives a value whose shape_of says " + units_text(got.units) + " of " + std::to_string(got.inner);
    else if (wy.width != whole_.width || wy.rows != whole_.rows || (wy.rows > 1 && wy.pitch < wy.width))
      what = "a value make<T> created has a whole region of " + std::to_string(wy.rows) + " rows of " +
             std::to_string(wy.width) + " bytes, the sample " + std::to_string(whole_.rows) + " rows of " +
             std::to_string(whole_.width);
    else if (wy.bytes() > 0 && !wy.data)
      what = "a value make<T> created has a whole region at a null pointer";
    if (what.empty()) return true;
    out_.fail("make", "", no_unit, what);
    return false;
  }

  // ---- empty chunks, made values ---------------------------------------------------
  void check_empty_chunks() {
    std::byte buffer[1];
    for (std::size_t b : {std::size_t{0}, shape_.units / 2, shape_.units}) {
      const region h = S::host_region(x_, {b, b});
      const region p = packed(buffer, {b, b});
      if (h.bytes() != 0 || p.bytes() != 0) {
        out_.fail("empty chunk", "", b,
                  (h.bytes() ? region_call({b, b}) : "packed_region(buffer, shape, " + range_text({b, b}) + ")") +
                      " holds " + std::to_string(h.bytes() ? h.bytes() : p.bytes()) + " bytes; an empty chunk has none");
        return;
      }
    }
  }

  void check_make() {
    {
      void* object = nullptr;
      const std::shared_ptr<void> owner = ops::make(shape_, state(), object);
      const T& y = *static_cast<const T*>(object);
      same_layout(y);
      if constexpr (stateful && std::equality_comparable<state_type>)
        if (!(state_type(S::state_of(y)) == state_))
          out_.fail("state", "", no_unit,
                    "a value make<T>(shape, state) created from the sample's state has another state (state_of)");
    }
    if constexpr (!stateful) {
      const split::shape none{0, shape_.inner, shape_.elem_bytes};
      const T e = S::template make<T>(none);
      const std::size_t units = S::shape_of(e).units, bytes = S::host_region(e, {0, 0}).bytes();
      if (units != 0 || bytes != 0)
        out_.fail("empty value", "", no_unit,
                  "make<T>(shape) of 0 units gives a value of " + units_text(units) + " whose " +
                      region_call({0, 0}) + " holds " + std::to_string(bytes) + " bytes");
    }
  }

  const T& x_;
  const split_check_options& opt_;
  split_check& out_;
  split::shape shape_;
  region whole_;
  whole_storage storage_;
  unit_map map_;
  state_type state_{};
};

template <class S, class R>
void reduction_laws(std::span<const R> p, split_check& out) {
  out.sample = std::to_string(p.size()) + (p.size() == 1 ? " partial" : " partials");
  const R id = S::template identity<R>();
  const auto merge = [](std::span<const R> q) { return R(S::template merge<R>(q)); };
  const auto combine = [](const R& a, const R& b) { return R(S::template combine<R>(a, b)); };
  const std::string i_text = "identity<R>() (" + value_text(id) + ")";
  if (const R m = merge({}); !same_value(m, id))
    out.fail("identity", "", no_unit, "merge of no partials gives " + value_text(m) + ", not " + i_text);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const R left = combine(id, p[i]), right = combine(p[i], id);
    if (!same_value(left, p[i]) || !same_value(right, p[i]))
      out.fail("identity", "", i,
               std::string("combine(") + (same_value(left, p[i]) ? "partial, identity" : "identity, partial") +
                   ") gives " + value_text(same_value(left, p[i]) ? right : left) + " for partial " +
                   value_text(p[i]) + "; " + i_text + " must leave a partial as it is on either side");
  }
  R folded = id;
  for (std::size_t k = 0; k < p.size(); ++k) {
    folded = combine(folded, p[k]);
    if (const R m = merge(p.first(k + 1)); !same_value(m, folded)) {
      out.fail("chunk order", "", k,
               "merge of partials 0 to " + std::to_string(k) + " gives " + value_text(m) +
                   "; combine folded over them in chunk order from " + i_text + " gives " + value_text(folded) +
                   ": merge must combine every partial once, in chunk order");
      break;
    }
  }
  const R all = merge(p);
  for (std::size_t k = 1; k < p.size(); ++k) {
    const R two = combine(merge(p.first(k)), merge(p.subspan(k)));
    if (!same_value(two, all)) {
      out.fail("associativity", "", k,
               "merging partials 0 to " + std::to_string(k - 1) + " and " + std::to_string(k) + " to " +
                   std::to_string(p.size() - 1) + " apart and combining the two gives " + value_text(two) +
                   "; merging all at once gives " + value_text(all) + ": results would depend on the chunk size");
      break;
    }
  }
}

template <class T>
void broadcast_laws(const T& value, split_check& out) {
  out.sample = "a value of " + std::to_string(sizeof(T)) + " bytes";
  if constexpr (std::equality_comparable<T>) {
    const T copy = value;
    if (!(copy == value) && (value == value))
      out.fail("copy", "", no_unit, "a copy of the value, which every chunk sees, does not compare equal to it");
  }
}

}  // namespace detail

/// Checks split type S's laws on a sample: for a partitioned split type a
/// value it splits, for a reduction a std::vector (or array, span) of
/// partials, for a broadcast one a value. See the top of this file.
template <class S, class T>
split_check check_split_type(const T& value, const split_check_options& options = {}) {
  static_assert(split::contract::has_kind<S> && split::contract::has_name<S>,
                "oa::testing::check_split_type: S has no `kind` and `name`: not a split type");
  split_check out;
  out.split_type = S::name;
  if constexpr (S::kind == split::split_kind::partitioned) {
    static_assert(split::partitioned_split<S, T>,
                  "oa::testing::check_split_type: S does not split T (oa::split::partitioned_split<S, T>: accepts<T> "
                  "and every member; an annotation using S names the member missing)");
    detail::partitioned_laws<S, T>(value, options, out).run();
  } else if constexpr (S::kind == split::split_kind::reduction) {
    static_assert(std::ranges::contiguous_range<const T>,
                  "oa::testing::check_split_type: a reduction split type is checked on a sample of partials (a "
                  "std::vector<R>, std::array or std::span)");
    using R = std::ranges::range_value_t<T>;
    static_assert(split::reduction_split<S, R>,
                  "oa::testing::check_split_type: S is not a reduction of the sample's partials (identity<R>, "
                  "combine<R>, merge<R>)");
    detail::reduction_laws<S, R>(std::span<const R>(std::ranges::data(value), std::ranges::size(value)), out);
  } else {
    static_assert(split::broadcast_split<S, T>, "oa::testing::check_split_type: S does not accept T");
    detail::broadcast_laws(value, out);
  }
  return out;
}

}  // namespace oa::testing
