// oa::testing::check_split_type on every split type oa ships (split_types/,
// those oa::stl's annotations use, examples/stateful's), on sample values of
// each type they split, and on split types broken on purpose, whose broken
// law it must name with the chunking and the first unit that is wrong.

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <oa/annotations/stl.hpp>
#include <oa/testing/split_type.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "stateful/geo_oa.hpp"

// geo has no ==; with this one the round trip compares Series whole
// (samples, name, scale), not only their samples.
namespace geo {
bool operator==(const Series& a, const Series& b) {
  return a.values == b.values && a.name == b.name && a.scale == b.scale;
}
}  // namespace geo

namespace {

namespace split = oa::split;
using oa::testing::check_split_type;
using oa::testing::split_check;

/// n distinct elements: i * 1.5 + 1 (no two equal, none zero).
template <class E>
std::vector<E> distinct(std::size_t n) {
  std::vector<E> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<E>(static_cast<double>(i) * 1.5 + 1);
  return v;
}
template <class M>
M distinct_matrix(Eigen::Index rows, Eigen::Index cols) {
  M m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<typename M::Scalar>(i + 1);
  return m;
}

const std::size_t sizes[] = {0, 1, 2, 7, 100, 1001};

/// Every law holds: the message says so, or names what broke.
#define CHECK_LAWS(...)                 \
  do {                                  \
    const split_check r_ = __VA_ARGS__; \
    INFO(r_.message());                 \
    CHECK(r_);                          \
  } while (false)

// ---- split types broken on purpose -------------------------------------------------

/// The bug of the issue: every chunk's region starts at the value's first element.
struct forgot_offset : split::contiguous {
  static constexpr const char* name = "lib::forgot_offset";
  template <class T>
  static oa::region host_region(const T& x, split::range r) {
    const std::size_t w = r.size() * sizeof(double);
    return {split::detail::bytes_of(x.data()), w, 1, w};
  }
};
/// Each chunk reaches one element into the next.
struct overlapping : split::contiguous {
  static constexpr const char* name = "lib::overlapping";
  template <class T>
  static oa::region host_region(const T& x, split::range r) {
    const std::size_t end = std::min<std::size_t>(r.end + 1, x.size()), w = (end - r.begin) * sizeof(double);
    return {split::detail::bytes_of(x.data()) + r.begin * sizeof(double), w, 1, w};
  }
};
/// Right offsets, but the last element of a chunk of several left out
/// unless the chunk ends the value.
struct short_chunks : split::contiguous {
  static constexpr const char* name = "lib::short_chunks";
  template <class T>
  static oa::region host_region(const T& x, split::range r) {
    const bool cut = r.size() > 1 && r.end < x.size();
    const std::size_t w = (cut ? r.size() - 1 : r.size()) * sizeof(double);
    return {split::detail::bytes_of(x.data()) + r.begin * sizeof(double), w, 1, w};
  }
};
/// A device buffer's region one element wider than the chunk.
struct wide_packed : split::contiguous {
  static constexpr const char* name = "lib::wide_packed";
  static oa::region packed_region(std::byte* buffer, const split::shape& s, split::range r) {
    const std::size_t w = (r.size() + 1) * s.unit_bytes();
    return {buffer, w, 1, w};
  }
};
/// Views one element too short.
struct short_view : split::contiguous {
  static constexpr const char* name = "lib::short_view";
  template <class T>
  static view<T> make_view(const oa::region& g, const split::shape& s, split::range r) {
    auto v = split::contiguous::make_view<T>(g, s, r);
    return v.first(r.size() > 0 ? r.size() - 1 : 0);
  }
};
/// make gives one element more than asked for.
struct bad_make : split::contiguous {
  static constexpr const char* name = "lib::bad_make";
  template <class T>
  static T make(const split::shape& s) {
    return T(s.units + 1);
  }
};
/// An empty range's region holds an element.
struct nonempty_empty : split::contiguous {
  static constexpr const char* name = "lib::nonempty_empty";
  template <class T>
  static oa::region host_region(const T& x, split::range r) {
    const std::size_t n = r.size() == 0 && r.end < x.size() ? 1 : r.size(), w = n * sizeof(double);
    return {split::detail::bytes_of(x.data()) + r.begin * sizeof(double), w, 1, w};
  }
};

/// Chunks of one unit right, but a chunk of several holds the units of its
/// mirror image: [0, 5) of 10 holds units 5 to 9. The chunks still tile the value.
struct mirrored_chunks : split::contiguous {
  static constexpr const char* name = "lib::mirrored_chunks";
  template <class T>
  static oa::region host_region(const T& x, split::range r) {
    const std::size_t first = r.size() > 1 ? x.size() - r.end : r.begin, w = r.size() * sizeof(double);
    return {split::detail::bytes_of(x.data()) + first * sizeof(double), w, 1, w};
  }
};
/// Views that are copies of their chunk, stored back reversed.
struct reversed_store : split::contiguous {
  static constexpr const char* name = "lib::reversed_store";
  template <class T>
  using view = std::vector<double>;
  template <class T>
  static std::vector<double> make_view(const oa::region& g, const split::shape&, split::range r) {
    const auto* p = reinterpret_cast<const double*>(g.data);
    return {p, p + r.size()};
  }
  static void store(const std::vector<double>& v, const oa::region& g, const split::shape&, split::range) {
    std::reverse_copy(v.begin(), v.end(), reinterpret_cast<double*>(g.data));
  }
};
/// Column-major rows whose views take the outer stride from the chunk
/// (right for a device buffer, wrong in place) instead of from the region.
struct stride_from_chunk : split::rows {
  static constexpr const char* name = "lib::stride_from_chunk";
  template <class T>
  static view<T> make_view(const oa::region& g, const split::shape& s, split::range r) {
    using E = split::detail::like_const<std::remove_reference_t<T>, element<T>>;
    const auto n = static_cast<Eigen::Index>(r.size()), inner = static_cast<Eigen::Index>(s.inner);
    return view<T>(reinterpret_cast<E*>(g.data), n, inner, Eigen::OuterStride<>(n));
  }
};
/// geo::Series whose results lose their name: the split type's state has
/// it, and make leaves it out.
struct name_state {
  std::string name;
  double scale = 1.0;
  bool operator==(const name_state&) const = default;
};
struct loses_name : geo::oa::series_split {
  static constexpr const char* name = "lib::loses_name";
  template <class T>
  using state = name_state;
  static name_state state_of(const geo::Series& s) { return {s.name, s.scale}; }
  template <class T>
  static view<T> make_view(const oa::region& g, const split::shape& s, split::range r, const name_state& st) {
    return series_split::make_view<T>(g, s, r, {st.name, st.scale});
  }
  template <class T>
  static T make(const split::shape& s, const name_state& st) {
    return geo::Series{std::vector<double>(s.units), "", st.scale};
  }
};

/// A merge that drops the last chunk's partial.
struct drops_last {
  static constexpr split::split_kind kind = split::split_kind::reduction;
  static constexpr const char* name = "lib::drops_last";
  template <class R>
  static R identity() {
    return R(0);
  }
  template <class R>
  static R combine(const R& a, const R& b) {
    return a + b;
  }
  template <class R>
  static R merge(std::span<const R> p) {
    R acc = 0;
    for (std::size_t i = 0; i + 1 < p.size(); ++i) acc += p[i];
    return p.size() == 1 ? p[0] : acc;
  }
};
/// "The first partial wins", merged from the back: the last chunk wins.
struct merged_backwards {
  static constexpr split::split_kind kind = split::split_kind::reduction;
  static constexpr const char* name = "lib::merged_backwards";
  template <class R>
  static R identity() {
    return R(-1);
  }
  template <class R>
  static R combine(const R& a, const R& b) {
    return a < 0 ? b : a;
  }
  template <class R>
  static R merge(std::span<const R> p) {
    R acc = identity<R>();
    for (std::size_t i = p.size(); i-- > 0;) acc = combine(acc, p[i]);
    return acc;
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Where check_split_type<S>(sample) first found `law` broken; it must have.
template <class S, class T>
oa::testing::split_law_failure broken(const T& sample, const char* law, const oa::testing::split_check_options& opt = {}) {
  const split_check r = check_split_type<S>(sample, opt);
  INFO(r.message());
  REQUIRE(r.broke(law));
  return *r.failure(law);
}

/// The failure's detail says `part` (shown whole when it does not).
#define CHECK_SAYS(failure, part) CHECK_MESSAGE(contains((failure).detail, part), (failure).detail)

/// The failure names this chunking and unit, and says `part`.
void check_found(const oa::testing::split_law_failure& f, const std::string& chunking, std::size_t unit,
                 const std::string& part) {
  CHECK(f.chunking == chunking);
  CHECK(f.unit == unit);
  CHECK_SAYS(f, part);
}

}  // namespace

TEST_CASE("contiguous and indexed: every law on vectors, spans and Eigen vectors of every size") {
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const std::vector<double> d = distinct<double>(n);
    const std::vector<std::int64_t> i = distinct<std::int64_t>(n);
    std::vector<float> f = distinct<float>(n);
    CHECK_LAWS(check_split_type<split::contiguous>(d));
    CHECK_LAWS(check_split_type<split::contiguous>(i));
    CHECK_LAWS(check_split_type<split::contiguous>(std::span<const float>(f)));
    CHECK_LAWS(check_split_type<split::contiguous>(std::span<float>(f)));
    const auto e = static_cast<Eigen::Index>(n);
    CHECK_LAWS(check_split_type<split::contiguous>(Eigen::ArrayXd(Eigen::ArrayXd::LinSpaced(e, 1, 2.0 * e + 1))));
    CHECK_LAWS(check_split_type<split::contiguous>(Eigen::VectorXf(Eigen::VectorXf::LinSpaced(e, 1, float(e + 1)))));
    CHECK_LAWS(check_split_type<split::contiguous>(Eigen::RowVectorXd(Eigen::RowVectorXd::LinSpaced(e, 1, 2.0 * e))));
    CHECK_LAWS(check_split_type<split::indexed>(d));
    CHECK_LAWS(check_split_type<split::indexed>(std::span<const float>(f)));
  }
}

TEST_CASE("blocks: every law, with a short last block, and the blocks oa::stl's scans and sort use") {
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const std::vector<double> d = distinct<double>(n);
    CHECK_LAWS(check_split_type<split::blocks<1>>(d));
    CHECK_LAWS(check_split_type<split::blocks<4>>(d));
    CHECK_LAWS(check_split_type<split::blocks<64>>(distinct<std::int32_t>(n)));
  }
  CHECK_LAWS(check_split_type<oa::stl::detail::scan_blocks>(distinct<double>(2 * oa::stl::detail::scan_block + 5)));
  CHECK_LAWS(check_split_type<oa::stl::detail::sort_runs>(distinct<std::int64_t>(oa::stl::detail::sort_run + 7)));
}

using row_major = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

TEST_CASE_TEMPLATE("rows and cols: every law, in either storage order, empty dimensions too", M, Eigen::MatrixXd,
                   row_major, Eigen::ArrayXXf) {
  const std::pair<Eigen::Index, Eigen::Index> dims[] = {{37, 11}, {1, 1}, {1, 9}, {9, 1}, {0, 5}, {5, 0}, {0, 0}};
  for (const auto& d : dims) {
    CAPTURE(d.first);
    CAPTURE(d.second);
    const M m = distinct_matrix<M>(d.first, d.second);
    CHECK_LAWS(check_split_type<split::rows>(m));
    CHECK_LAWS(check_split_type<split::cols>(m));
  }
}

TEST_CASE("broadcast: a copy is the value") {
  struct no_equality {
    int a;
  };
  CHECK_LAWS(check_split_type<split::broadcast>(2.5));
  CHECK_LAWS(check_split_type<split::broadcast>(distinct<int>(5)));
  CHECK_LAWS(check_split_type<split::broadcast>(no_equality{3}));
}

TEST_CASE("reductions: sum, product, min and max, and oa::stl's first-of reductions") {
  CHECK_LAWS(check_split_type<split::sum>(std::vector<double>{3, -1, 4, 1, -5, 9, 2}));
  CHECK_LAWS(check_split_type<split::sum>(std::vector<std::int64_t>{1, 2, 3}));
  CHECK_LAWS(check_split_type<split::sum>(std::vector<double>{}));
  CHECK_LAWS(check_split_type<split::product>(std::vector<double>{2, -3, 0.5, 4}));
  CHECK_LAWS(check_split_type<split::min>(std::vector<double>{3, -1, 4, -1, std::nan(""), 2}));
  CHECK_LAWS(check_split_type<split::max>(std::vector<float>{3, -1, 4, 1, 5}));
  CHECK_LAWS(check_split_type<split::max>(std::vector<std::int64_t>{-7, 3, 3, 2}));
  // Each names itself in a check's report (and a reduction without a name is "reduce").
  CHECK(check_split_type<split::sum>(std::vector<double>{1}).split_type == "sum");
  CHECK(check_split_type<split::product>(std::vector<double>{1}).split_type == "product");
  CHECK(check_split_type<split::min>(std::vector<double>{1}).split_type == "min");
  CHECK(check_split_type<split::max>(std::vector<double>{1}).split_type == "max");
  CHECK(check_split_type<split::reduce<oa::stl::detail::only_partial>>(std::vector<double>{1}).split_type == "reduce");
  // Ties: the earlier chunk's position wins; an empty chunk's (index -1) yields.
  using position = oa::stl::position<double>;
  const std::vector<position> found{{4, 0}, {-1, 1}, {}, {-1, 3}, {7, 4}, {-1, 5}};
  CHECK_LAWS(check_split_type<split::reduce<oa::stl::detail::first_of<position, true>>>(found));
  CHECK_LAWS(check_split_type<split::reduce<oa::stl::detail::first_of<position, false>>>(found));
}

TEST_CASE("oa::stl's only_partial is a reduction of one chunk: every law but a right identity") {
  // It keeps the last partial: fine for the calls of one unit it serves (one
  // chunk, one partial), not as a reduction over several chunks.
  const split_check r = check_split_type<split::reduce<oa::stl::detail::only_partial>>(std::vector<double>{4, 2});
  INFO(r.message());
  REQUIRE(r.failures.size() == 1);
  CHECK(r.broke("identity"));
  CHECK(contains(r.message(), "combine(partial, identity) gives 0 for partial 4"));
}

TEST_CASE("a split type with unsplit state (examples/stateful): every law, its state carried") {
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const geo::Series s{distinct<double>(n), "depth " + std::to_string(n), 0.25};
    CHECK_LAWS(check_split_type<geo::oa::series_split>(s));
  }
}

TEST_CASE("a host_region that forgets the chunk's offset: tiling broken, the offset named") {
  const split_check r = check_split_type<forgot_offset>(distinct<double>(100));
  INFO(r.message());
  CHECK(!r);
  const auto* f = r.failure("tiling");
  REQUIRE(f != nullptr);
  CHECK(f->chunking == "chunks of one unit ([0, 1) [1, 2) [2, 3) ... [98, 99) [99, 100))");
  CHECK(f->unit == 1);
  CHECK(contains(f->detail, "host_region(value, [1, 2)) covers bytes [0, 8) of the value's storage, which "
                            "host_region(value, [0, 1)) covers too"));
  CHECK(contains(f->detail, "host_region must add the chunk's offset (begin 1)"));
  const std::string m = r.message();
  CHECK(m.rfind("oa::testing::check_split_type<lib::forgot_offset>: ", 0) == 0);
  CHECK(contains(m, "law 'tiling', chunks of one unit"));
  CHECK(contains(m, ", unit 1: "));
  // Nothing is read or written through regions that do not tile the value.
  CHECK(!r.broke("round trip"));
  std::ostringstream printed;
  printed << r;
  CHECK(printed.str() == m);
  CHECK_THROWS_WITH_AS(r.throw_if_broken(), m.c_str(), oa::testing::split_law_error);
}

TEST_CASE("chunks that overlap, and chunks that leave units out") {
  const auto over = broken<overlapping>(distinct<double>(10), "tiling");
  CHECK(over.unit == 1);
  CHECK_SAYS(over, "host_region(value, [1, 2)) covers bytes [8, 16)");

  check_found(broken<short_chunks>(distinct<double>(10), "tiling"), "two even chunks ([0, 5) [5, 10))", 4,
              "bytes [32, 40) of the value's storage (host_region(value, [0, 10))) are in no chunk's host region: "
              "unit 4's bytes are missing");
}

TEST_CASE("chunks that tile the value but hold other units than theirs: offsets broken") {
  check_found(broken<mirrored_chunks>(distinct<double>(10), "offsets"), "two even chunks ([0, 5) [5, 10))", 0,
              "host_region(value, [0, 5)) must hold units 0 to 4 (each where its chunk of one unit lies); it starts "
              "at byte 40, in unit 5's storage, where unit 0 starts at byte 0");
}

TEST_CASE("packed regions, views, make, store, state and empty chunks that break their laws") {
  CHECK_SAYS(broken<wide_packed>(distinct<double>(10), "packed region"), "has 1 rows of 16 bytes");
  CHECK_SAYS(broken<short_view>(distinct<double>(10), "view"), "holds 0 bytes of elements, the region 8");
  check_found(broken<stride_from_chunk>(distinct_matrix<Eigen::MatrixXd>(37, 11), "view"),
              "chunks of one unit ([0, 1) [1, 2) [2, 3) ... [35, 36) [36, 37))", 0,
              "must take the layout (pitch) from the region it is given");

  CHECK_SAYS(broken<bad_make>(distinct<double>(10), "make"), "gives a value whose shape_of says 11 units");
  CHECK_SAYS(broken<bad_make>(distinct<double>(10), "empty value"), "make<T>(shape) of 0 units gives a value of 1 unit whose");

  // Chunks of one unit read the same reversed: one chunk shows it.
  check_found(broken<reversed_store>(distinct<double>(10), "store"), "one chunk ([0, 10))", 0,
              "each chunk stored into it (store) from its view (make_view) differs from the value at byte");

  const geo::Series series{distinct<double>(10), "depth", 0.25};
  CHECK_SAYS(broken<loses_name>(series, "state"), "has another state");
  CHECK_SAYS(broken<loses_name>(series, "round trip"), "has every element right but does not compare equal");

  const auto empty = broken<nonempty_empty>(distinct<double>(10), "empty chunk");
  CHECK(empty.unit == 0);
  // A split type never asked for empty ranges says so.
  CHECK_LAWS(check_split_type<nonempty_empty>(distinct<double>(10), {.empty_chunks = false}));
}

TEST_CASE("merges that drop a chunk or take the chunks out of order") {
  const auto dropped = broken<drops_last>(std::vector<double>{1, 2, 4, 8}, "chunk order");
  CHECK(dropped.unit == 1);
  CHECK_SAYS(dropped, "merge of partials 0 to 1 gives 1; combine folded over them");
  const auto backwards = broken<merged_backwards>(std::vector<int>{5, 3, 9}, "chunk order");
  CHECK(backwards.unit == 1);
  CHECK_SAYS(backwards, "merge of partials 0 to 1 gives 3");
}

TEST_CASE("options: chunk sizes of the author's own") {
  const split_check r = check_split_type<split::contiguous>(distinct<double>(50), {.chunk_units = {8, 49}});
  INFO(r.message());
  CHECK(r);
  CHECK(r.chunkings == 7);
  CHECK(contains(r.message(), "every law holds on a value of 50 units (1 element of 8 bytes each), cut 7 ways"));
}
