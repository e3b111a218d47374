// The split-type laws. Chunk ranges tile the units exactly. A chunk copied
// from its host region into a packed buffer (as the engine stages it) and
// viewed there reads the right elements, and the packed chunks copied back
// into a fresh value rebuild the original. Views of host regions read and
// write exactly their chunk. Reductions merge per-chunk partials into the
// result over the whole. Every law is checked over a table of sizes, chunk
// plans and value types, with random contents. A split type whose values
// carry unsplit state (examples/stateful: geo::Series) passes the same laws,
// and the state reaches every chunk's view and every result, through the
// engine on the host and emulated devices.

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <span>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "oa/core/annotate.hpp"
#include "oa/core/host_pages.hpp"
#include "oa/split_types/all.hpp"
#include "stateful/geo_oa.hpp"
#include "support.hpp"

namespace {

namespace split = oa::split;
using split::range;
using split::shape;

constexpr std::size_t none = static_cast<std::size_t>(-1);

std::mt19937_64& rng() {
  static std::mt19937_64 g(20240611);
  return g;
}

template <class E>
E random_element() {
  if constexpr (std::is_integral_v<E>)
    return static_cast<E>(std::uniform_int_distribution<std::int64_t>(-1'000'000'000'000, 1'000'000'000'000)(rng()));
  else
    return static_cast<E>(std::uniform_real_distribution<double>(-1e3, 1e3)(rng()));
}

// ---- chunk plans ------------------------------------------------------------------

/// A chunk's host region and its packed device region hold the same bytes
/// in the same shape; the packed one is contiguous.
void check_staging_regions(const oa::region& h, const oa::region& p, const shape& sh, const range& r) {
  CHECK(h.width == p.width);
  CHECK(h.rows == p.rows);
  CHECK(h.bytes() == r.size() * sh.unit_bytes());
  CHECK(p.contiguous());
}

/// Stages a contiguous chunk as the engine does: host and packed regions
/// agree, and the host one is copied into the packed one.
void stage_contiguous_chunk(const oa::region& h, const oa::region& p, const shape& sh, const range& r) {
  check_staging_regions(h, p, sh, r);
  CHECK(h.contiguous());
  oa::copy_region(p, h);
}

/// First index of `z` that is not `x` with chunk r overwritten by -1, -2, ..., or `none`.
template <class E>
std::size_t chunk_write_mismatch(const E* z, const E* x, std::size_t n, range r) {
  for (std::size_t i = 0; i < n; ++i) {
    const bool inside = i >= r.begin && i < r.end;
    const E want = inside ? static_cast<E>(-static_cast<double>(i - r.begin) - 1) : x[i];
    if (!(z[i] == want)) return i;
  }
  return none;
}

/// Checks that `rs` tiles [0, units): in order, no gap, no overlap, none empty.
void check_tiling(const std::vector<range>& rs, std::size_t units) {
  std::size_t next = 0;
  bool ordered = true, nonempty = true;
  for (const range& r : rs) {
    ordered = ordered && r.begin == next;
    nonempty = nonempty && r.end > r.begin;
    next = r.end;
  }
  CHECK(ordered);
  CHECK(nonempty);
  CHECK(next == units);
}

/// Every way of cutting `units` the tests try: fixed sizes and even counts.
std::vector<std::vector<range>> plans_for(std::size_t units) {
  std::vector<std::vector<range>> out;
  for (std::size_t c : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, std::size_t{64},
                        std::max<std::size_t>(units, 1), units + 5})
    out.push_back(split::chunks(units, c));
  for (std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{10},
                        std::size_t{16}, std::max<std::size_t>(units, 1), units + 3})
    out.push_back(split::even_chunks(units, k));
  return out;
}

const std::size_t unit_counts[] = {0, 1, 2, 3, 5, 8, 63, 64, 65, 1000, 4099};

/// A split type's region of chunk r in a packed buffer (templated on T for matrices).
template <class S, class T>
oa::region packed_region_of(std::byte* buffer, const shape& s, range r) {
  if constexpr (requires { S::packed_region(buffer, s, r); })
    return S::packed_region(buffer, s, r);
  else
    return S::template packed_region<T>(buffer, s, r);
}

/// A packed buffer holding every chunk at unit offset r.begin (never null).
struct packed_buffer {
  std::vector<std::byte> bytes;
  shape s;
  explicit packed_buffer(const shape& sh) : bytes(sh.bytes() + 16), s(sh) {}
  std::byte* at(range r) { return bytes.data() + r.begin * s.unit_bytes(); }
};

TEST_CASE("chunks: equal chunks but the last, tiling the units") {
  for (std::size_t units : unit_counts)
    for (std::size_t c : {1, 2, 3, 7, 64, 4099, 5000}) {
      CAPTURE(units);
      CAPTURE(c);
      const auto rs = split::chunks(units, c);
      check_tiling(rs, units);
      CHECK(rs.size() == (units + c - 1) / c);
      for (std::size_t i = 0; i + 1 < rs.size(); ++i) CHECK(rs[i].size() == c);
      if (!rs.empty()) CHECK(rs.back().size() == units - (rs.size() - 1) * c);
    }
  CHECK_THROWS_AS(split::chunks(10, 0), std::invalid_argument);
}

TEST_CASE("even_chunks: sizes differ by at most one, never empty") {
  for (std::size_t units : unit_counts)
    for (std::size_t n : {1, 2, 3, 4, 7, 10, 64, 4099, 5000}) {
      CAPTURE(units);
      CAPTURE(n);
      const auto rs = split::even_chunks(units, n);
      check_tiling(rs, units);
      CHECK(rs.size() == std::min(units, n));
      if (!rs.empty()) {
        auto [lo, hi] = std::minmax_element(rs.begin(), rs.end(),
                                            [](const range& a, const range& b) { return a.size() < b.size(); });
        CHECK(hi->size() - lo->size() <= 1);
      }
    }
  CHECK_THROWS_AS(split::even_chunks(10, 0), std::invalid_argument);
}

TEST_CASE("chunk plans: the documented edge cases") {
  CHECK(split::chunks(0, 4).empty());
  CHECK(split::even_chunks(0, 4).empty());
  // More chunks than units: one unit each.
  CHECK(split::even_chunks(3, 10) == std::vector<range>{{0, 1}, {1, 2}, {2, 3}});
  // An uneven last chunk.
  CHECK(split::chunks(10, 3) == std::vector<range>{{0, 3}, {3, 6}, {6, 9}, {9, 10}});
  CHECK(split::even_chunks(10, 3) == std::vector<range>{{0, 4}, {4, 7}, {7, 10}});
  CHECK(split::chunks(5, 5) == std::vector<range>{{0, 5}});
  CHECK(split::chunks(5, 50) == std::vector<range>{{0, 5}});
  CHECK(range{2, 9}.size() == 7);
}

// ---- contiguous -------------------------------------------------------------------

/// A value of T with n random elements, and the storage behind it for spans.
template <class T>
struct sample {
  T x;
  explicit sample(std::size_t n, bool random = true) : x(sized(n)) {
    if (random)
      for (std::size_t i = 0; i < n; ++i) x.data()[i] = random_element<std::remove_cvref_t<decltype(x.data()[0])>>();
  }
  static T sized(std::size_t n) {
    if constexpr (requires { T(static_cast<Eigen::Index>(n)).derived(); })
      return T(static_cast<Eigen::Index>(n));
    else
      return T(n);
  }
};
template <class E>
struct sample<std::span<E>> {
  std::vector<E> store;
  std::span<E> x;
  explicit sample(std::size_t n, bool random = true) : store(n), x(store) {
    if (random)
      for (auto& e : store) e = random_element<E>();
  }
};

/// First index in [0, n) where a[i] != b[i], or `none`.
template <class P, class Q>
std::size_t mismatch_at(P a, Q b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!(a[i] == b[i])) return i;
  return none;
}

template <class T>
void contiguous_laws() {
  using S = split::contiguous;
  using E = S::element<T>;
  static_assert(S::accepts<T>);
  for (std::size_t n : unit_counts) {
    CAPTURE(n);
    sample<T> s(n);
    const T& x = s.x;
    const shape sh = S::shape_of(x);
    CHECK(sh == shape{n, 1, sizeof(E)});
    for (const auto& rs : plans_for(n)) {
      CAPTURE(rs.size());
      check_tiling(rs, n);
      packed_buffer buf(sh);
      for (const range& r : rs) {
        CAPTURE(r.begin);
        CAPTURE(r.end);
        const oa::region h = S::host_region(x, r);
        const oa::region p = packed_region_of<S, T>(buf.at(r), sh, r);
        stage_contiguous_chunk(h, p, sh, r);
        // The staged chunk, viewed on the "device".
        auto v = S::make_view<const T>(p, sh, r);
        REQUIRE(static_cast<std::size_t>(v.size()) == r.size());
        CHECK(mismatch_at(v.data(), x.data() + r.begin, r.size()) == none);
        // The chunk viewed in place.
        auto w = S::make_view<const T>(h, sh, r);
        CHECK(w.data() == x.data() + r.begin);
        CHECK(static_cast<std::size_t>(w.size()) == r.size());
      }
      // Merge: every packed chunk back into a fresh value.
      auto merge_into = [&](T& y) {
        for (const range& r : rs) oa::copy_region(S::host_region(y, r), packed_region_of<S, T>(buf.at(r), sh, r));
        CHECK(mismatch_at(y.data(), x.data(), n) == none);
      };
      if constexpr (S::makeable<T>) {
        T y = S::make<T>(sh);
        CHECK(S::shape_of(y) == sh);
        merge_into(y);
      } else {
        sample<T> y(n, false);
        merge_into(y.x);
      }
      // Writing through a mutable view of a host region changes exactly that chunk.
      for (std::size_t pick : {std::size_t{0}, rs.size() / 2, rs.size() - 1}) {
        if (pick >= rs.size()) continue;
        const range r = rs[pick];
        sample<T> z(n, false);
        std::copy_n(x.data(), n, z.x.data());
        auto m = S::make_view<T>(S::host_region(z.x, r), sh, r);
        for (std::size_t i = 0; i < r.size(); ++i) m.data()[i] = static_cast<E>(-static_cast<double>(i) - 1);
        CHECK(chunk_write_mismatch<E>(z.x.data(), x.data(), n, r) == none);
      }
    }
  }
  if constexpr (S::makeable<T>) CHECK(S::make<T>(shape{0, 1, sizeof(E)}).size() == 0);
}

TEST_CASE_TEMPLATE("contiguous: split, view and merge", T, std::vector<double>, std::vector<std::int64_t>,
                   std::span<float>, Eigen::ArrayXd, Eigen::VectorXf, Eigen::RowVectorXd) {
  contiguous_laws<T>();
}

TEST_CASE("contiguous: a read-only span stays read-only, a mutable one writable") {
  using S = split::contiguous;
  std::vector<double> store{1, 2, 3, 4};
  std::span<const double> c(store);
  std::span<double> m(store);
  const range r{1, 3};
  auto vc = S::make_view<std::span<const double>>(S::host_region(c, r), S::shape_of(c), r);
  static_assert(std::is_same_v<decltype(vc), std::span<const double>>);
  auto vm = S::make_view<std::span<double>>(S::host_region(m, r), S::shape_of(m), r);
  static_assert(std::is_same_v<decltype(vm), std::span<double>>);
  auto vk = S::make_view<const std::span<double>>(S::host_region(m, r), S::shape_of(m), r);
  static_assert(std::is_same_v<decltype(vk), std::span<const double>>);
  vm[0] = 20;
  CHECK(store == std::vector<double>{1, 20, 3, 4});
  CHECK(vc[1] == 3);
}

TEST_CASE("contiguous: a made vector has its length and zeros, its storage seen first; faulting pages in writes no byte") {
  using S = split::contiguous;
  // Large enough that its pages are faulted in on several threads first.
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{3} << 20}) {
    CAPTURE(n);
    const auto v = S::make<std::vector<double>>(shape{n, 1, sizeof(double)}, &oa::detail::fault_in);
    CHECK(v.size() == n);
    CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x == 0; }));
    // The hook sees the storage the vector then fills, before it fills it.
    static std::pair<void*, std::size_t> seen;
    const auto w = S::make<std::vector<double>>(shape{n, 1, sizeof(double)},
                                                [](void* p, std::size_t b) noexcept { seen = {p, b}; });
    CHECK(seen.second == n * sizeof(double));
    if (n > 0) CHECK(seen.first == w.data());
  }
  // Memory already written keeps every byte, at any offset and length.
  std::vector<std::uint8_t> bytes((std::size_t{24} << 20) + 12345);
  std::mt19937_64 g(7);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(g());
  const std::vector<std::uint8_t> before = bytes;
  oa::detail::fault_in(bytes.data() + 3, bytes.size() - 7);
  oa::detail::fault_in(bytes.data(), 100);
  oa::detail::fault_in(nullptr, 1 << 30);
  CHECK(bytes == before);

  // Fresh memory is resident after it, every page (where the kernel has
  // MADV_POPULATE_WRITE: Linux 5.14 on).
  const std::size_t len = std::size_t{16} << 20, page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* fresh = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(fresh != MAP_FAILED);
  const auto resident = [&] {
    std::vector<unsigned char> in(len / page);
    REQUIRE(mincore(fresh, len, in.data()) == 0);
    return static_cast<std::size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; }));
  };
  CHECK(resident() == 0);
  oa::detail::fault_in(fresh, len);
  if (madvise(fresh, page, 23 /* MADV_POPULATE_WRITE */) == 0)
    CHECK(resident() == len / page);
  else
    MESSAGE("this kernel has no MADV_POPULATE_WRITE: pages fault in on first write");
  munmap(fresh, len);
}

TEST_CASE("contiguous: accepts, makeable and shape_of") {
  using S = split::contiguous;
  CHECK(S::accepts<std::vector<double>>);
  CHECK(S::accepts<const std::vector<std::int64_t>&>);
  CHECK(S::accepts<std::span<float>>);
  CHECK(S::accepts<std::span<const double>>);
  CHECK(S::accepts<Eigen::ArrayXd>);
  CHECK(S::accepts<Eigen::VectorXf>);
  CHECK(S::accepts<Eigen::RowVectorXd>);
  CHECK(S::accepts<Eigen::Array<std::int32_t, 1, Eigen::Dynamic>>);
  CHECK_FALSE(S::accepts<std::list<double>>);
  CHECK_FALSE(S::accepts<std::vector<bool>>);
  CHECK_FALSE(S::accepts<std::vector<std::string>>);
  CHECK_FALSE(S::accepts<std::span<double, 4>>);
  CHECK_FALSE(S::accepts<Eigen::Vector3d>);
  CHECK_FALSE(S::accepts<Eigen::MatrixXd>);
  CHECK_FALSE(S::accepts<Eigen::ArrayXXf>);
  CHECK_FALSE(S::accepts<double>);
  CHECK(S::makeable<std::vector<double>>);
  CHECK(S::makeable<Eigen::VectorXf>);
  CHECK_FALSE(S::makeable<std::span<float>>);
  CHECK(S::kind == split::split_kind::partitioned);

  CHECK(S::shape_of(std::vector<std::int64_t>(7)) == shape{7, 1, 8});
  CHECK(S::shape_of(Eigen::VectorXf(5)) == shape{5, 1, 4});
  CHECK(S::shape_of(Eigen::RowVectorXd(3)) == shape{3, 1, 8});
  const shape s = S::shape_of(Eigen::ArrayXd(9));
  CHECK(s.unit_bytes() == 8);
  CHECK(s.bytes() == 72);
  CHECK(S::make<std::vector<double>>(shape{4, 1, 8}).size() == 4);
  CHECK(S::make<Eigen::RowVectorXd>(shape{6, 1, 8}).cols() == 6);
}

// ---- rows and cols ------------------------------------------------------------------

template <class T>
T random_matrix(std::size_t rows, std::size_t cols) {
  T x(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) x(i, j) = random_element<typename T::Scalar>();
  return x;
}

/// Element k of unit u: (u, k) for rows, (k, u) for cols.
template <bool ByRows, class M>
decltype(auto) unit_elem(M& m, std::size_t u, std::size_t k) {
  const auto a = static_cast<Eigen::Index>(u), b = static_cast<Eigen::Index>(k);
  return ByRows ? m(a, b) : m(b, a);
}

/// First (unit, element) of chunk r where `v` (units from 0) differs from `x`'s chunk, as a flat index.
template <bool ByRows, class V, class M>
std::size_t chunk_mismatch(const V& v, const M& x, range r, std::size_t inner) {
  for (std::size_t u = r.begin; u < r.end; ++u)
    for (std::size_t k = 0; k < inner; ++k)
      if (!(unit_elem<ByRows>(v, u - r.begin, k) == unit_elem<ByRows>(x, u, k))) return (u - r.begin) * inner + k;
  return none;
}

template <class S, class T>
void dense_laws() {
  constexpr bool by_rows = std::is_same_v<S, split::rows>;
  using E = typename S::template element<T>;
  static_assert(S::template accepts<T>);
  // Strided on the host: row blocks of column-major, column blocks of row-major storage.
  constexpr bool strided = by_rows != bool(T::IsRowMajor);
  const std::pair<std::size_t, std::size_t> dims[] = {{0, 0},  {0, 3},   {3, 0},   {1, 1},  {1, 7},  {7, 1},
                                                      {5, 3},  {3, 5},   {64, 17}, {17, 64}, {130, 33}, {33, 130}};
  for (const auto& dim : dims) {
    const std::size_t nr = dim.first, nc = dim.second;
    CAPTURE(nr);
    CAPTURE(nc);
    const T x = random_matrix<T>(nr, nc);
    const std::size_t units = by_rows ? nr : nc, inner = by_rows ? nc : nr;
    // Matrices with units but no inner elements (3x0 by rows) are included:
    // their chunks are empty regions with no storage behind them.
    const shape sh = S::shape_of(x);
    CHECK(sh == shape{units, inner, sizeof(E)});
    for (const auto& rs : plans_for(units)) {
      CAPTURE(rs.size());
      check_tiling(rs, units);
      packed_buffer buf(sh);
      for (const range& r : rs) {
        CAPTURE(r.begin);
        CAPTURE(r.end);
        const oa::region h = S::host_region(x, r);
        const oa::region p = packed_region_of<S, T>(buf.at(r), sh, r);
        check_staging_regions(h, p, sh, r);
        if (strided) {
          CHECK(h.rows == inner);
          CHECK(h.width == r.size() * sizeof(E));
          if (inner > 1) CHECK(h.pitch == units * sizeof(E));
        } else {
          CHECK(h.contiguous());
        }
        oa::copy_region(p, h);
        const auto v = S::template make_view<const T>(p, sh, r);
        CHECK(static_cast<std::size_t>(by_rows ? v.rows() : v.cols()) == r.size());
        CHECK(static_cast<std::size_t>(by_rows ? v.cols() : v.rows()) == inner);
        CHECK(chunk_mismatch<by_rows>(v, x, r, inner) == none);
        // In place: strided views of the host storage where the chunk is not one run.
        const auto w = S::template make_view<const T>(h, sh, r);
        CHECK(chunk_mismatch<by_rows>(w, x, r, inner) == none);
      }
      T y = S::template make<T>(sh);
      CHECK(S::shape_of(y) == sh);
      for (const range& r : rs) oa::copy_region(S::host_region(y, r), packed_region_of<S, T>(buf.at(r), sh, r));
      CHECK((y.rows() == x.rows() && y.cols() == x.cols()));
      CHECK((y.array() == x.array()).all());
      for (std::size_t pick : {std::size_t{0}, rs.size() / 2, rs.size() - 1}) {
        if (pick >= rs.size()) continue;
        const range r = rs[pick];
        T z = x;
        auto m = S::template make_view<T>(S::host_region(z, r), sh, r);
        for (std::size_t u = 0; u < r.size(); ++u)
          for (std::size_t k = 0; k < inner; ++k) unit_elem<by_rows>(m, u, k) = static_cast<E>(-static_cast<double>(u * inner + k) - 1);
        std::size_t wrong = none;
        for (std::size_t u = 0; u < units; ++u)
          for (std::size_t k = 0; k < inner; ++k) {
            const bool inside = u >= r.begin && u < r.end;
            const E want = inside ? static_cast<E>(-static_cast<double>((u - r.begin) * inner + k) - 1)
                                  : unit_elem<by_rows>(x, u, k);
            if (wrong == none && !(unit_elem<by_rows>(z, u, k) == want)) wrong = u * inner + k;
          }
        CHECK(wrong == none);
      }
    }
  }
}

using col_major = Eigen::MatrixXd;
using row_major = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

TEST_CASE_TEMPLATE("rows: split, view and merge", T, col_major, row_major, Eigen::ArrayXXf) {
  dense_laws<split::rows, T>();
}

TEST_CASE_TEMPLATE("cols: split, view and merge", T, col_major, row_major, Eigen::ArrayXXf) {
  dense_laws<split::cols, T>();
}

TEST_CASE("rows and cols: accepts, shape_of and make") {
  CHECK(split::rows::accepts<col_major>);
  CHECK(split::rows::accepts<row_major>);
  CHECK(split::rows::accepts<Eigen::ArrayXXf>);
  CHECK(split::cols::accepts<const col_major&>);
  CHECK(split::cols::accepts<Eigen::Array<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>);
  CHECK_FALSE(split::rows::accepts<Eigen::VectorXd>);
  CHECK_FALSE(split::rows::accepts<Eigen::RowVectorXd>);
  CHECK_FALSE(split::cols::accepts<Eigen::ArrayXd>);
  CHECK_FALSE(split::rows::accepts<Eigen::Matrix3d>);
  CHECK_FALSE(split::cols::accepts<std::vector<double>>);
  CHECK_FALSE(split::rows::accepts<std::span<double>>);
  CHECK(std::string(split::rows::name) == "rows");
  CHECK(std::string(split::cols::name) == "cols");

  CHECK(split::rows::shape_of(col_major(5, 3)) == shape{5, 3, 8});
  CHECK(split::cols::shape_of(col_major(5, 3)) == shape{3, 5, 8});
  CHECK(split::rows::shape_of(Eigen::ArrayXXf(2, 9)) == shape{2, 9, 4});
  CHECK(split::cols::shape_of(row_major(4, 6)) == shape{6, 4, 8});
  const auto a = split::rows::make<row_major>(shape{7, 2, 8});
  CHECK((a.rows() == 7 && a.cols() == 2));
  const auto b = split::cols::make<Eigen::ArrayXXf>(shape{7, 2, 4});
  CHECK((b.rows() == 2 && b.cols() == 7));
  const auto e = split::rows::make<col_major>(shape{0, 3, 8});
  CHECK((e.rows() == 0 && e.cols() == 3));
}

// ---- broadcast ------------------------------------------------------------------------

TEST_CASE("broadcast: accepts copyable values") {
  CHECK(split::broadcast::accepts<double>);
  CHECK(split::broadcast::accepts<const std::vector<double>&>);
  CHECK(split::broadcast::accepts<Eigen::Matrix3d>);
  CHECK_FALSE(split::broadcast::accepts<std::unique_ptr<int>>);
  CHECK(split::broadcast::kind == split::split_kind::broadcast);
}

// ---- reductions -----------------------------------------------------------------------

/// Per-chunk partials of `xs` under Op's fold.
template <class Red, class R>
std::vector<R> partials_of(const std::vector<R>& xs, const std::vector<range>& rs) {
  std::vector<R> out;
  for (const range& r : rs) {
    R acc = Red::template identity<R>();
    for (std::size_t i = r.begin; i < r.end; ++i) acc = Red::template combine<R>(acc, xs[i]);
    out.push_back(acc);
  }
  return out;
}

template <class Red, class R>
R fold_all(const std::vector<R>& xs) {
  R acc = Red::template identity<R>();
  for (const R& x : xs) acc = Red::template combine<R>(acc, x);
  return acc;
}

template <class R>
std::vector<R> random_values(std::size_t n) {
  std::vector<R> xs(n);
  for (auto& x : xs) x = random_element<R>();
  return xs;
}

TEST_CASE_TEMPLATE("min and max: merged partials equal the reduction over the whole", R, std::int64_t, double, float) {
  for (std::size_t n : unit_counts) {
    const auto xs = random_values<R>(n);
    for (const auto& rs : plans_for(n)) {
      CAPTURE(n);
      CAPTURE(rs.size());
      const auto lo = split::min::merge<R>(partials_of<split::min, R>(xs, rs));
      const auto hi = split::max::merge<R>(partials_of<split::max, R>(xs, rs));
      if (n == 0) continue;
      CHECK(lo == *std::min_element(xs.begin(), xs.end()));
      CHECK(hi == *std::max_element(xs.begin(), xs.end()));
    }
  }
}

TEST_CASE("sum: exact for int64_t, within 1e-12 relative for double") {
  for (std::size_t n : unit_counts) {
    const auto is = random_values<std::int64_t>(n);
    std::vector<double> ds(n);
    for (auto& d : ds) d = std::uniform_real_distribution<double>(0.0, 1e3)(rng());
    const std::int64_t whole_i = std::accumulate(is.begin(), is.end(), std::int64_t{0});
    long double whole_d = 0;
    for (double d : ds) whole_d += d;
    for (const auto& rs : plans_for(n)) {
      CAPTURE(n);
      CAPTURE(rs.size());
      CHECK(split::sum::merge<std::int64_t>(partials_of<split::sum, std::int64_t>(is, rs)) == whole_i);
      const double got = split::sum::merge<double>(partials_of<split::sum, double>(ds, rs));
      CHECK(std::abs(got - static_cast<double>(whole_d)) <= 1e-12 * static_cast<double>(whole_d));
    }
  }
}

TEST_CASE("reductions: identities for no partials") {
  CHECK(split::sum::merge<double>({}) == 0.0);
  CHECK(split::sum::merge<std::int64_t>({}) == 0);
  CHECK(split::min::merge<double>({}) == std::numeric_limits<double>::infinity());
  CHECK(split::max::merge<float>({}) == -std::numeric_limits<float>::infinity());
  CHECK(split::min::merge<std::int64_t>({}) == std::numeric_limits<std::int64_t>::max());
  CHECK(split::max::merge<std::int64_t>({}) == std::numeric_limits<std::int64_t>::lowest());
  CHECK(split::sum::kind == split::split_kind::reduction);
  // The identity is neutral for every value.
  for (double x : {-1e300, -1.0, 0.0, 2.5, 1e300}) {
    CHECK(split::min::combine(split::min::identity<double>(), x) == x);
    CHECK(split::max::combine(split::max::identity<double>(), x) == x);
    CHECK(split::sum::combine(split::sum::identity<double>(), x) == x);
  }
}

// User-defined reductions: Op with identity<R>() and operator().
struct product {
  template <class R>
  static R identity() {
    return R(1);
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    return a * b;
  }
};

/// The value of largest magnitude; the first one on ties.
struct max_abs {
  template <class R>
  static R identity() {
    return R(0);
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    return std::abs(b) > std::abs(a) ? b : a;
  }
};

/// x -> a x + b maps modulo 2^64, composed left to right: associative, not commutative.
struct affine {
  std::uint64_t a = 1, b = 0;
  friend bool operator==(const affine&, const affine&) = default;
};
struct compose {
  template <class R>
  static R identity() {
    return R{};
  }
  template <class R>
  R operator()(const R& f, const R& g) const {
    return R{g.a * f.a, g.a * f.b + g.b};
  }
};

TEST_CASE("reduce<Op>: user-defined reductions merge in chunk order") {
  using prod = split::reduce<product>;
  using mabs = split::reduce<max_abs>;
  using comp = split::reduce<compose>;
  CHECK(prod::merge<double>({}) == 1.0);
  CHECK(comp::merge<affine>({}) == affine{});
  for (std::size_t n : unit_counts) {
    std::vector<std::uint64_t> us(n);
    for (auto& u : us) u = rng()() | 1;
    std::vector<double> ds = random_values<double>(n);
    if (n > 2) ds[n / 2] = -2e3;  // ties in magnitude: the first wins
    if (n > 2) ds[n - 1] = 2e3;
    std::vector<affine> fs(n);
    for (auto& f : fs) f = {rng()(), rng()()};
    for (const auto& rs : plans_for(n)) {
      CAPTURE(n);
      CAPTURE(rs.size());
      CHECK(prod::merge<std::uint64_t>(partials_of<prod, std::uint64_t>(us, rs)) == fold_all<prod>(us));
      CHECK(mabs::merge<double>(partials_of<mabs, double>(ds, rs)) == fold_all<mabs>(ds));
      CHECK(comp::merge<affine>(partials_of<comp, affine>(fs, rs)) == fold_all<comp>(fs));
    }
    if (n > 2) CHECK(mabs::merge<double>(partials_of<mabs, double>(ds, split::chunks(n, 1))) == -2e3);
  }
  // Chunk order matters for a non-commutative Op: reversed partials differ.
  const std::vector<affine> two{{2, 1}, {3, 0}};
  CHECK(comp::merge<affine>(two) == affine{6, 3});
  CHECK(comp::merge<affine>(std::vector<affine>{two[1], two[0]}) == affine{6, 1});
}

TEST_CASE("reductions: the engine's merge over raw partial bytes") {
  const auto xs = random_values<std::int64_t>(1000);
  const auto rs = split::even_chunks(xs.size(), 7);
  const auto ps = partials_of<split::sum, std::int64_t>(xs, rs);
  const oa::detail::value_ops& ops = oa::detail::reduction_ops<split::sum, std::int64_t>::table;
  CHECK(ops.kind == split::split_kind::reduction);
  CHECK(ops.partial_bytes == sizeof(std::int64_t));
  std::int64_t out = 42;
  ops.merge(reinterpret_cast<const std::byte*>(ps.data()), ps.size(), &out);
  CHECK(out == std::accumulate(xs.begin(), xs.end(), std::int64_t{0}));
  ops.merge(nullptr, 0, &out);
  CHECK(out == 0);
  void* object = nullptr;
  auto owner = oa::detail::reduction_ops<split::max, double>::table.make(shape{}, nullptr, object);
  CHECK(*static_cast<double*>(object) == -std::numeric_limits<double>::infinity());
}

// ---- the contract ------------------------------------------------------------------

TEST_CASE("contract: the split types of oa meet their concepts") {
  static_assert(split::partitioned_result_split<split::contiguous, std::vector<double>>);
  static_assert(split::partitioned_result_split<split::contiguous, Eigen::ArrayXd>);
  static_assert(split::partitioned_split<split::contiguous, std::span<const float>>);
  static_assert(!split::partitioned_result_split<split::contiguous, std::span<float>>);  // cannot own storage
  static_assert(!split::partitioned_split<split::contiguous, std::list<double>>);       // not accepted
  static_assert(split::partitioned_result_split<split::rows, Eigen::MatrixXd>);
  static_assert(split::partitioned_result_split<split::cols, Eigen::ArrayXXf>);
  static_assert(split::broadcast_split<split::broadcast, double>);
  static_assert(split::reduction_split<split::sum, double>);
  static_assert(split::reduction_split<split::reduce<compose>, affine>);
  static_assert(!split::has_state<split::contiguous, std::vector<double>>);
  static_assert(!split::partitioned_split<split::sum, std::vector<double>>);  // another kind
  CHECK(true);
}

/// Everything but host_region: the concept says no, and which requirement fails.
struct without_host_region {
  static constexpr split::split_kind kind = split::split_kind::partitioned;
  static constexpr const char* name = "without_host_region";
  template <class T>
  static constexpr bool accepts = true;
  template <class T>
  static constexpr bool makeable = false;
  template <class T>
  using element = double;
  template <class T>
  using view = std::span<const double>;
  static shape shape_of(const std::vector<double>& x) { return {x.size(), 1, 8}; }
  static oa::region packed_region(std::byte* b, const shape&, range r) { return {b, r.size() * 8, 1, r.size() * 8}; }
  template <class T>
  static view<T> make_view(const oa::region& g, const shape&, range r) {
    return {reinterpret_cast<const double*>(g.data), r.size()};
  }
};

TEST_CASE("contract: one concept per requirement names what is missing") {
  using T = std::vector<double>;
  static_assert(!split::partitioned_split<without_host_region, T>);
  static_assert(!split::contract::has_host_region<without_host_region, T>);
  static_assert(split::contract::has_shape_of<without_host_region, T>);
  static_assert(split::contract::has_packed_region<without_host_region, T>);
  static_assert(split::contract::has_make_view<without_host_region, T>);
  static_assert(split::contract::has_element<without_host_region, T>);
  static_assert(!split::contract::has_kind<int>);
  CHECK(true);
}

// ---- a split type with unsplit state: geo::Series ---------------------------------------

using geo::Series;
using geo::oa::series_split;
using geo::oa::series_state;

Series random_series(std::size_t n, std::string name, double scale) {
  Series s{std::vector<double>(n), std::move(name), scale};
  for (double& v : s.values) v = std::uniform_real_distribution<double>(-10.0, 10.0)(rng());
  return s;
}

TEST_CASE("stateful: the split type declares its state and meets the contract") {
  static_assert(split::has_state<series_split, Series>);
  static_assert(split::has_state<series_split, const Series&>);
  static_assert(std::is_same_v<split::state_t<series_split, Series>, series_state>);
  static_assert(split::partitioned_result_split<series_split, Series>);
  const Series s = random_series(5, "depth", 0.25);
  const series_state st = series_split::state_of(s);
  CHECK(st.name == "depth");
  CHECK(st.scale == 0.25);
  CHECK(series_split::shape_of(s) == shape{5, 1, sizeof(double)});
  const Series made = series_split::make<Series>(shape{3, 1, 8}, st);
  CHECK(made.values.size() == 3);
  CHECK(made.name == "depth");
  CHECK(made.scale == 0.25);
}

TEST_CASE("stateful: split, view and merge through the engine's copy path") {
  using ops_t = oa::detail::partitioned_ops<series_split, Series>;
  const oa::detail::value_ops& ops = ops_t::table;
  CHECK(ops.kind == split::split_kind::partitioned);
  for (std::size_t n : unit_counts) {
    CAPTURE(n);
    const Series x = random_series(n, "elevation " + std::to_string(n), 0.5 + static_cast<double>(n));
    const series_state st = series_split::state_of(x);
    const shape sh = ops.shape_of(&x);
    CHECK(sh == shape{n, 1, sizeof(double)});
    for (const auto& rs : plans_for(n)) {
      CAPTURE(rs.size());
      check_tiling(rs, n);
      packed_buffer buf(sh);
      for (const range& r : rs) {
        CAPTURE(r.begin);
        CAPTURE(r.end);
        const oa::region h = ops.host_region(&x, r);
        const oa::region p = ops.packed_region(buf.at(r), sh, r, &st);
        stage_contiguous_chunk(h, p, sh, r);
        // The staged chunk, viewed on the "device", carries the state.
        const geo::view v = series_split::make_view<const Series>(p, sh, r, st);
        REQUIRE(v.values.size() == r.size());
        CHECK(mismatch_at(v.values.data(), x.values.data() + r.begin, r.size()) == none);
        CHECK(v.name == x.name);
        CHECK(v.scale == x.scale);
        // The chunk viewed in place.
        const geo::view w = series_split::make_view<const Series>(h, sh, r, st);
        CHECK(w.values.data() == x.values.data() + r.begin);
        CHECK(w.name == x.name);
      }
      // Merge: the engine makes the result from the recorded state and copies every chunk back.
      void* object = nullptr;
      const std::shared_ptr<void> owner = ops.make(sh, &st, object);
      REQUIRE(object != nullptr);
      Series& y = *static_cast<Series*>(object);
      CHECK(ops.shape_of(&y) == sh);
      for (const range& r : rs) oa::copy_region(ops.host_region(&y, r), ops.packed_region(buf.at(r), sh, r, &st));
      CHECK(y.values == x.values);
      CHECK(y.name == x.name);
      CHECK(y.scale == x.scale);
      // A mutable view of a host region writes exactly its chunk, and sees the state.
      for (std::size_t pick : {std::size_t{0}, rs.size() / 2, rs.size() - 1}) {
        if (pick >= rs.size()) continue;
        const range r = rs[pick];
        Series z = x;
        const geo::mut_view m = series_split::make_view<Series>(ops.host_region(&z, r), sh, r, st);
        CHECK(m.name == x.name);
        for (std::size_t i = 0; i < r.size(); ++i) m.values[i] = -static_cast<double>(i) - 1;
        CHECK(chunk_write_mismatch<double>(z.values.data(), x.values.data(), n, r) == none);
      }
    }
  }
  // Without a recorded state the engine refuses to make a result that would lose it.
  void* object = nullptr;
  CHECK_THROWS_AS(ops.make(shape{2, 1, 8}, nullptr, object), oa::error);
}

TEST_CASE("stateful: the documented chunk-plan edge cases") {
  const Series x = random_series(10, "edge", 2.0);
  const series_state st = series_split::state_of(x);
  const shape sh = series_split::shape_of(x);
  // Empty input: no chunk, and a result of no samples still carries the state.
  CHECK(split::chunks(0, 4).empty());
  const Series e = series_split::make<Series>(shape{0, 1, 8}, st);
  CHECK((e.values.empty() && e.name == "edge" && e.scale == 2.0));
  // More chunks than units, and an uneven last chunk: every view sees the state.
  for (const auto& rs : {split::even_chunks(10, 16), split::chunks(10, 3)}) {
    check_tiling(rs, 10);
    std::size_t seen = 0;
    for (const range& r : rs) {
      const geo::view v = series_split::make_view<const Series>(series_split::host_region(x, r), sh, r, st);
      CHECK(v.values.size() == r.size());
      CHECK(v.name == "edge");
      seen += v.values.size();
    }
    CHECK(seen == 10);
  }
  CHECK(split::chunks(10, 3).back().size() == 1);
}

/// What the CPU function's views saw, chunk by chunk.
struct state_log {
  std::mutex m;
  std::set<std::pair<std::string, double>> seen;
  std::size_t chunks = 0;
  void record(std::string_view name, double scale) {
    std::lock_guard lock(m);
    seen.emplace(std::string(name), scale);
    ++chunks;
  }
  void clear() {
    std::lock_guard lock(m);
    seen.clear();
    chunks = 0;
  }
};
state_log& log_of_views() {
  static state_log l;
  return l;
}

// geo::rescale with a probe: records the state each chunk's views carry. Its
// device function is element-wise, so the emulated device takes the stage.
inline constexpr auto probed_rescale = oa::annotate<"test::probed_rescale">(
    oa::cpu([](geo::view in, double factor, geo::mut_view out) {
      log_of_views().record(in.name, in.scale);
      log_of_views().record(out.name, out.scale);
      geo::chunk::rescale(in, factor, out);
    }),
    oa::args(oa::in<series_split>("series"), oa::scalar<double>("factor"), oa::out<series_split, Series>("out")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));

std::vector<oa::config> stateful_devices() {
  return {oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 20)};
}

TEST_CASE("stateful: views see the state, results carry it, a reduction over a result uses it") {
  const std::size_t n = 100003;  // 800 kB a series: several chunks in a 1 MiB device budget
  const Series b = random_series(n, "elevation", 0.5);
  // The plain program.
  const Series r_ref = geo::rescale(b, 2.0);
  const Series r2_ref = geo::rescale(r_ref, 3.0);
  const double t_ref = geo::total(r2_ref);
  Series c_ref = b;
  geo::clamp(c_ref, -1.0, 2.0);
  const double tc_ref = geo::total(c_ref);

  for (const auto& cfg : stateful_devices()) {
    CAPTURE(cfg.device);
    oa_test::config_scope cs(cfg);
    log_of_views().clear();
    auto r = probed_rescale(b, 2.0);        // a result made from b
    auto r2 = geo::oa::rescale(r, 3.0);     // from a pending result: its recorded state
    auto t = geo::oa::total(r2);            // uses r2's scale
    CHECK(t.get() == doctest::Approx(t_ref).epsilon(1e-12));
    const Series& rv = r.get();
    CHECK(rv.name == "elevation");
    CHECK(rv.scale == 0.5);
    CHECK(rv.values == r_ref.values);
    CHECK(r2.get().name == "elevation");
    CHECK(r2.get().scale == 0.5);
    CHECK(r2.get().values == r2_ref.values);
    {
      std::lock_guard lock(log_of_views().m);
      CHECK(log_of_views().chunks >= 2);
      CHECK(log_of_views().seen == std::set<std::pair<std::string, double>>{{"elevation", 0.5}});
    }
    if (cfg.device == "emulated") {
      std::size_t on_device = 0, chunks = 0;
      for (const auto& rep : oa::reports())
        if (rep.device.find("emulated") != std::string::npos) {
          ++on_device;
          chunks += rep.chunks;
        }
      CHECK(on_device >= 1);
      CHECK(chunks >= 2);
    }
    // In place on the caller's Series: the bounds are in physical units (the scale).
    Series c = b;
    geo::oa::clamp(c, -1.0, 2.0);
    auto tc = geo::oa::total(c);
    CHECK(tc.get() == doctest::Approx(tc_ref).epsilon(1e-12));
    CHECK(c.values == c_ref.values);
    CHECK(c.name == "elevation");
    // The caller's object through oa::ref, and a temporary the call keeps.
    CHECK(geo::oa::total(oa::ref(b)).get() == doctest::Approx(geo::total(b)).epsilon(1e-12));
    CHECK(geo::oa::total(Series{{1.0, 2.0, 3.0}, "tmp", 4.0}).get() == 24.0);
  }
}

// A split type that says what a result's state is: from the argument it is
// made from, or, when no argument has state, a default.
struct derived_series_split : series_split {
  static constexpr const char* name = "derived_series";
  template <class R>
  static series_state result_state(const series_state& from) {
    return {from.name + " (derived)", from.scale};
  }
  template <class R>
  static series_state result_state() {
    return {"unnamed", 1.0};
  }
};

inline constexpr auto derived_rescale = oa::annotate<"test::derived_rescale">(
    oa::cpu(&geo::chunk::rescale),
    oa::args(oa::in<derived_series_split>("series"), oa::scalar<double>("factor"),
             oa::out<derived_series_split, Series>("out")));

inline constexpr auto series_from_values = oa::annotate<"test::series_from_values">(
    oa::cpu([](std::span<const double> in, geo::mut_view out) {
      std::copy(in.begin(), in.end(), out.values.begin());
    }),
    oa::args(oa::in<split::contiguous>("values"), oa::out<derived_series_split, Series>("out")));

TEST_CASE("stateful: a split type's result_state decides a result's state") {
  for (const auto& cfg : stateful_devices()) {
    CAPTURE(cfg.device);
    oa_test::config_scope cs(cfg);
    const Series b = random_series(1000, "depth", 0.125);
    auto r = derived_rescale(b, 2.0);
    CHECK(r.get().name == "depth (derived)");
    CHECK(r.get().scale == 0.125);
    CHECK(r.get().values == geo::rescale(b, 2.0).values);
    const std::vector<double> v{1.0, 2.0, 3.0};
    auto s = series_from_values(v);
    CHECK(s.get().name == "unnamed");
    CHECK(s.get().scale == 1.0);
    CHECK(s.get().values == v);
  }
}

}  // namespace
