#pragma once
// Distributed dense matrices over a process grid, and their product by
// SUMMA: rank (r, c) of a rows x cols grid holds the block of rows
// [row_layout.offset(r), ...) and columns [col_layout.offset(c), ...), and
// C = A B goes panel by panel along k: the ranks holding a panel of A's
// columns send it along their grid row, those holding the panel of B's rows
// along their grid column, and every rank adds the product of the two
// panels it received to its block of C through oa::linalg::gemm (out of
// core on its devices).

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "oa/core/runtime.hpp"
#include "oa/linalg/gemm.hpp"
#include "oa/dist/vector.hpp"

namespace oa::dist {

/// A rows x cols grid of ranks, rank = row * cols + col.
struct grid {
  int rows = 1, cols = 1;
  int row_of(int rank) const noexcept { return rank / cols; }
  int col_of(int rank) const noexcept { return rank % cols; }
  int rank_at(int row, int col) const noexcept { return row * cols + col; }
  bool operator==(const grid&) const = default;

  /// The grid closest to square with `ranks` ranks (rows <= cols).
  static grid near_square(int ranks) {
    if (ranks < 1) throw oa::invalid_argument("oa::dist::grid::near_square", "ranks", "must be at least 1");
    int r = static_cast<int>(std::sqrt(static_cast<double>(ranks)));
    while (ranks % r != 0) --r;
    return {r, ranks / r};
  }
};

template <class S>
class matrix {
  static_assert(std::is_same_v<S, float> || std::is_same_v<S, double>, "oa::dist::matrix: float or double");

 public:
  using local_type = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

  /// Rank c.rank()'s block `block` of a rows x cols matrix over grid `g`
  /// (rows and columns cut evenly over the grid's rows and columns).
  matrix(std::size_t rows, std::size_t cols, dist::grid g, local_type block, communicator& c = world())
      : rows_(rows), cols_(cols), grid_(g), block_(std::move(block)), comm_(&c) {
    if (g.rows < 1 || g.cols < 1 || g.rows * g.cols != c.size())
      throw oa::invalid_argument("oa::dist::matrix", "grid",
                                 std::to_string(g.rows) + " x " + std::to_string(g.cols) + " for a run of " +
                                     std::to_string(c.size()) + " ranks");
    if (static_cast<std::size_t>(block_.rows()) != local_rows() || static_cast<std::size_t>(block_.cols()) != local_cols())
      throw oa::invalid_argument("oa::dist::matrix", "block",
                                 std::to_string(block_.rows()) + " x " + std::to_string(block_.cols()) +
                                     " where rank " + std::to_string(c.rank()) + " holds " +
                                     std::to_string(local_rows()) + " x " + std::to_string(local_cols()));
  }

  std::size_t rows() const noexcept { return rows_; }
  std::size_t cols() const noexcept { return cols_; }
  const dist::grid& grid() const noexcept { return grid_; }
  communicator& comm() const noexcept { return *comm_; }
  layout row_layout() const { return layout::even(rows_, grid_.rows); }
  layout col_layout() const { return layout::even(cols_, grid_.cols); }
  std::size_t local_rows() const { return row_layout().count(grid_.row_of(comm_->rank())); }
  std::size_t local_cols() const { return col_layout().count(grid_.col_of(comm_->rank())); }
  /// This rank's block (read only: its shape is the layout's).
  const local_type& local() const noexcept { return block_; }

  /// The whole matrix on rank `root`, an empty one elsewhere (a collective).
  local_type gather(int root) const {
    if (root < 0 || root >= comm_->size())
      throw oa::invalid_argument("oa::dist::matrix::gather", "root",
                                 std::to_string(root) + " is not a rank of " + std::to_string(comm_->size()));
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm_->size()), 0);
    counts[static_cast<std::size_t>(root)] = static_cast<std::size_t>(block_.size()) * sizeof(S);
    std::vector<S> all;
    const auto from = comm_->all_to_all("oa::dist::matrix::gather",
                                        std::as_bytes(std::span<const S>(block_.data(), static_cast<std::size_t>(block_.size()))),
                                        counts, [&](std::size_t bytes) {
                                          all.resize(bytes / sizeof(S));
                                          return reinterpret_cast<std::byte*>(all.data());
                                        });
    if (comm_->rank() != root) return {};
    local_type whole(static_cast<Eigen::Index>(rows_), static_cast<Eigen::Index>(cols_));
    const layout rl = row_layout(), cl = col_layout();
    std::size_t at = 0;
    for (int r = 0; r < comm_->size(); ++r) {
      const auto br = static_cast<Eigen::Index>(rl.count(grid_.row_of(r))), bc = static_cast<Eigen::Index>(cl.count(grid_.col_of(r)));
      whole.block(static_cast<Eigen::Index>(rl.offset(grid_.row_of(r))), static_cast<Eigen::Index>(cl.offset(grid_.col_of(r))), br, bc) =
          Eigen::Map<const local_type>(all.data() + at, br, bc);
      at += from[static_cast<std::size_t>(r)] / sizeof(S);
    }
    return whole;
  }

 private:
  std::size_t rows_, cols_;
  dist::grid grid_;
  local_type block_;
  communicator* comm_;
};

/// A rows x cols matrix over grid `g`, each rank computing its block:
/// element (i, j) is f(i, j) (global indices). Not a collective.
template <class S, class F>
matrix<S> generate_matrix(std::size_t rows, std::size_t cols, F f, grid g = grid::near_square(world().size()),
                          communicator& c = world()) {
  if (g.rows * g.cols != c.size())
    throw oa::invalid_argument("oa::dist::generate_matrix", "grid",
                               std::to_string(g.rows) + " x " + std::to_string(g.cols) + " for a run of " +
                                   std::to_string(c.size()) + " ranks");
  const layout rl = layout::even(rows, g.rows), cl = layout::even(cols, g.cols);
  const int pr = g.row_of(c.rank()), pc = g.col_of(c.rank());
  typename matrix<S>::local_type b(static_cast<Eigen::Index>(rl.count(pr)), static_cast<Eigen::Index>(cl.count(pc)));
  for (Eigen::Index j = 0; j < b.cols(); ++j)
    for (Eigen::Index i = 0; i < b.rows(); ++i)
      b(i, j) = static_cast<S>(f(rl.offset(pr) + static_cast<std::size_t>(i), cl.offset(pc) + static_cast<std::size_t>(j)));
  return matrix<S>(rows, cols, g, std::move(b), c);
}

/// Bytes of a panel sent in one step of the product, at most: wider
/// panels move in fewer steps, narrower ones hold less memory.
inline constexpr std::size_t gemm_panel_bytes = std::size_t{32} << 20;

/// C = A B over the grid they share (SUMMA). A collective.
template <class S>
matrix<S> gemm(const matrix<S>& a, const matrix<S>& b) {
  const char* call = "oa::dist::gemm";
  if (a.cols() != b.rows())
    throw oa::invalid_argument(call, "b", std::to_string(b.rows()) + " rows for A's " + std::to_string(a.cols()) + " columns");
  if (!(a.grid() == b.grid()) || &a.comm() != &b.comm())
    throw oa::invalid_argument(call, "b", "laid out over another grid than A");
  communicator& c = a.comm();
  const grid g = a.grid();
  const int me = c.rank(), pr = g.row_of(me), pc = g.col_of(me);
  const layout ak = a.col_layout(), bk = b.row_layout();  // k cut over the grid's columns (A), rows (B)
  const auto m = static_cast<Eigen::Index>(a.local_rows()), n = static_cast<Eigen::Index>(b.local_cols());
  typename matrix<S>::local_type cm = matrix<S>::local_type::Zero(m, n);

  // Panel bounds: every cut of A's and of B's k, and no panel wider than
  // gemm_panel_bytes allows for the largest block of rows or columns.
  std::vector<std::size_t> cuts{0, a.cols()};
  for (int i = 1; i < g.cols; ++i) cuts.push_back(ak.offset(i));
  for (int i = 1; i < g.rows; ++i) cuts.push_back(bk.offset(i));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const std::size_t widest = std::max<std::size_t>({a.row_layout().count(0), b.col_layout().count(0), 1});
  const std::size_t kb = std::max<std::size_t>(1, gemm_panel_bytes / sizeof(S) / widest);

  std::exception_ptr failed;  // this rank's product failed: it goes on sending until all agree at the end
  for (std::size_t p = 0; p + 1 < cuts.size(); ++p)
    for (std::size_t k0 = cuts[p]; k0 < cuts[p + 1]; k0 += kb) {
      const std::size_t k1 = std::min(cuts[p + 1], k0 + kb), w = k1 - k0;
      int owner_col = 0, owner_row = 0;  // the grid column holding A's panel, the grid row holding B's
      while (owner_col + 1 < g.cols && ak.offset(owner_col + 1) <= k0) ++owner_col;
      while (owner_row + 1 < g.rows && bk.offset(owner_row + 1) <= k0) ++owner_row;
      // To each rank: A's panel (if this rank holds it and the rank is in its
      // grid row), then B's (if this rank holds it and the rank is in its grid column).
      const std::size_t a_bytes = static_cast<std::size_t>(m) * w * sizeof(S);
      const std::size_t b_bytes = w * static_cast<std::size_t>(n) * sizeof(S);
      std::vector<std::size_t> counts(static_cast<std::size_t>(c.size()), 0);
      std::vector<S> send;
      for (int r = 0; r < c.size(); ++r) {
        if (pc == owner_col && g.row_of(r) == pr) {
          const auto panel = a.local().middleCols(static_cast<Eigen::Index>(k0 - ak.offset(pc)), static_cast<Eigen::Index>(w));
          const std::size_t at = send.size();
          send.resize(at + static_cast<std::size_t>(panel.size()));
          Eigen::Map<typename matrix<S>::local_type>(send.data() + at, panel.rows(), panel.cols()) = panel;
          counts[static_cast<std::size_t>(r)] += a_bytes;
        }
        if (pr == owner_row && g.col_of(r) == pc) {
          const auto panel = b.local().middleRows(static_cast<Eigen::Index>(k0 - bk.offset(pr)), static_cast<Eigen::Index>(w));
          const std::size_t at = send.size();
          send.resize(at + static_cast<std::size_t>(panel.size()));
          Eigen::Map<typename matrix<S>::local_type>(send.data() + at, panel.rows(), panel.cols()) = panel;
          counts[static_cast<std::size_t>(r)] += b_bytes;
        }
      }
      std::vector<S> got;
      const auto from = c.all_to_all(call, std::as_bytes(std::span<const S>(send)), counts, [&](std::size_t bytes) {
        got.resize(bytes / sizeof(S));
        return reinterpret_cast<std::byte*>(got.data());
      });
      if (failed) continue;
      // Received in rank order: A's panel from (pr, owner_col), B's from
      // (owner_row, pc); from this rank itself, A's before B's.
      const int a_from = g.rank_at(pr, owner_col), b_from = g.rank_at(owner_row, pc);
      std::size_t at = 0, a_at = 0, b_at = 0;
      for (int r = 0; r < c.size(); ++r) {
        if (r == a_from) a_at = at;
        if (r == b_from) b_at = at + (r == a_from ? a_bytes / sizeof(S) : 0);
        at += from[static_cast<std::size_t>(r)] / sizeof(S);
      }
      try {
        const typename matrix<S>::local_type ap = Eigen::Map<const typename matrix<S>::local_type>(got.data() + a_at, m, static_cast<Eigen::Index>(w));
        const typename matrix<S>::local_type bp = Eigen::Map<const typename matrix<S>::local_type>(got.data() + b_at, static_cast<Eigen::Index>(w), n);
        if (m > 0 && n > 0) {
          oa::linalg::gemm(S(1), ap, bp, S(1), cm);
          oa::evaluate();
        }
      } catch (...) {
        failed = std::current_exception();
      }
    }
  (void)c.exchange(call, [&] {
    if (failed) std::rethrow_exception(failed);
    return std::vector<std::byte>{};
  });
  return matrix<S>(a.rows(), b.cols(), g, std::move(cm), c);
}

}  // namespace oa::dist
