#pragma once
// Distributed dense matrices over a process grid, and their product by
// SUMMA: rank (r, c) of a rows x cols grid holds the block of rows
// [row_layout.offset(r), ...) and columns [col_layout.offset(c), ...), and
// C = A B goes panel by panel along k: the ranks holding a panel of A's
// columns broadcast it along their grid row, those holding the panel of B's
// rows along their grid column, and every rank adds the product of the two
// panels it received to its block of C through oa::linalg::gemm (out of
// core on its devices) while the next panels move.

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "oa/core/backoff.hpp"
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

  /// An oa::invalid_argument naming `call` unless the grid has `ranks` ranks.
  void check(const char* call, int ranks) const {
    if (rows < 1 || cols < 1 || rows * cols != ranks)
      throw oa::invalid_argument(call, "grid",
                                 std::to_string(rows) + " x " + std::to_string(cols) + " for a run of " +
                                     std::to_string(ranks) + " ranks");
  }

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
    g.check("oa::dist::matrix", c.size());
    if (static_cast<std::size_t>(block_.rows()) != local_rows() || static_cast<std::size_t>(block_.cols()) != local_cols())
      throw oa::invalid_argument("oa::dist::matrix", "block",
                                 std::to_string(block_.rows()) + " x " + std::to_string(block_.cols()) +
                                     " where this rank holds " +
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
  /// A key of the shape and grid, which the ranks of a collective agree on.
  std::uint64_t shape_key() const { return row_layout().key() ^ (col_layout().key() << 1); }

  /// The whole matrix on rank `root`, an empty one elsewhere (a collective).
  local_type gather(int root) const {
    // The root is checked, and agreed, in a collective: a bad one on any
    // rank fails every rank's call.
    (void)comm_->exchange(
        "oa::dist::matrix::gather",
        [&] {
          detail::check_root("oa::dist::matrix::gather", root, comm_->size());
          return std::vector<std::byte>{};
        },
        detail::root_key(root) ^ shape_key());
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm_->size()), 0), from;
    counts[static_cast<std::size_t>(root)] = static_cast<std::size_t>(block_.size());
    const std::vector<S> all = all_to_all<S>(*comm_, "oa::dist::matrix::gather",
                                             std::span<const S>(block_.data(), static_cast<std::size_t>(block_.size())),
                                             counts, &from);
    if (comm_->rank() != root) return {};
    local_type whole(static_cast<Eigen::Index>(rows_), static_cast<Eigen::Index>(cols_));
    const layout rl = row_layout(), cl = col_layout();
    std::size_t at = 0;
    for (int r = 0; r < comm_->size(); ++r) {
      const auto br = static_cast<Eigen::Index>(rl.count(grid_.row_of(r))), bc = static_cast<Eigen::Index>(cl.count(grid_.col_of(r)));
      whole.block(static_cast<Eigen::Index>(rl.offset(grid_.row_of(r))), static_cast<Eigen::Index>(cl.offset(grid_.col_of(r))), br, bc) =
          Eigen::Map<const local_type>(all.data() + at, br, bc);
      at += from[static_cast<std::size_t>(r)];
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
  g.check("oa::dist::generate_matrix", c.size());
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

namespace detail {

/// The panels of k a product goes through: cut at every cut of A's columns
/// and of B's rows, and no wider than gemm_panel_bytes allows for the
/// largest block of rows or columns.
template <class S>
std::vector<std::pair<std::size_t, std::size_t>> panels(const matrix<S>& a, const matrix<S>& b) {
  const layout ak = a.col_layout(), bk = b.row_layout();
  std::vector<std::size_t> cuts{0, a.cols()};
  for (int i = 1; i < a.grid().cols; ++i) cuts.push_back(ak.offset(i));
  for (int i = 1; i < a.grid().rows; ++i) cuts.push_back(bk.offset(i));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const std::size_t widest = std::max<std::size_t>({a.row_layout().count(0), b.col_layout().count(0), 1});
  const std::size_t kb = std::max<std::size_t>(1, gemm_panel_bytes / sizeof(S) / widest);
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t p = 0; p + 1 < cuts.size(); ++p)
    for (std::size_t k0 = cuts[p]; k0 < cuts[p + 1]; k0 += kb) out.emplace_back(k0, std::min(cuts[p + 1], k0 + kb));
  return out;
}

/// One step of SUMMA on this rank: the panels [k0, k1) of A (broadcast by
/// the grid column holding it along each grid row) and of B (by the grid
/// row holding it along each grid column), begun when the step is made and
/// received by wait().
template <class S>
class summa_step {
 public:
  using block = typename matrix<S>::local_type;

  /// `row` and `col`: this rank's grid row and grid column, numbered by
  /// grid column and grid row.
  summa_step(const matrix<S>& a, const matrix<S>& b, std::size_t k0, std::size_t k1, communicator& row,
             communicator& col, const char* call) {
    const grid g = a.grid();
    const int me = a.comm().rank(), pr = g.row_of(me), pc = g.col_of(me);
    const layout ak = a.col_layout(), bk = b.row_layout();
    int owner_col = 0, owner_row = 0;  // the grid column holding A's panel, the grid row holding B's
    while (owner_col + 1 < g.cols && ak.offset(owner_col + 1) <= k0) ++owner_col;
    while (owner_row + 1 < g.rows && bk.offset(owner_row + 1) <= k0) ++owner_row;
    const auto w = static_cast<Eigen::Index>(k1 - k0);
    // Each panel made (and, where it lives, filled) in its broadcast's
    // agreement: a rank that cannot make it fails every rank's call.
    a_sent_ = row.broadcast(call, owner_col, [&] {
      a_.resize(static_cast<Eigen::Index>(a.local_rows()), w);
      if (pc == owner_col) a_ = a.local().middleCols(static_cast<Eigen::Index>(k0 - ak.offset(pc)), w);
      return bytes_of(a_);
    });
    b_sent_ = col.broadcast(call, owner_row, [&] {
      b_.resize(w, static_cast<Eigen::Index>(b.local_cols()));
      if (pr == owner_row) b_ = b.local().middleRows(static_cast<Eigen::Index>(k0 - bk.offset(pr)), w);
      return bytes_of(b_);
    });
  }

  /// Moves the broadcasts on; whether both have finished.
  bool done() { return a_sent_->done() && b_sent_->done(); }

  /// The panels, once both broadcasts finish.
  std::pair<const block&, const block&> wait() {
    a_sent_->wait();
    b_sent_->wait();
    return {a_, b_};
  }

 private:
  static std::span<std::byte> bytes_of(block& m) {
    return {reinterpret_cast<std::byte*>(m.data()), static_cast<std::size_t>(m.size()) * sizeof(S)};
  }
  block a_, b_;  // written by the broadcasts until they finish: declared before them, destroyed after
  std::unique_ptr<communicator::request> a_sent_, b_sent_;
};

/// `work` on a thread of its own, on the caller's runtime, while this
/// thread begins the next step (`begin()`: its panels agreed and posted)
/// and moves its broadcasts on (MPI moves a non-blocking collective only
/// when called, and only this thread calls it), so that neither the
/// agreement nor the transfer holds the product up. What `work` throws is
/// kept in `failed`; what begin() throws (agreed on every rank) is thrown
/// once the work is done. With no thread to be had, the work runs here
/// first.
template <class S, class F, class B>
std::unique_ptr<summa_step<S>> overlapped(F&& work, B&& begin, std::exception_ptr& failed) {
  std::atomic<bool> finished{false};
  runtime& rt = runtime::current();  // the caller's, which the thread would not see
  std::thread worker;
  try {
    worker = std::thread([&] {
      try {
        const runtime::use on(rt);
        work();
      } catch (...) {
        failed = std::current_exception();
      }
      finished.store(true, std::memory_order_release);
    });
  } catch (...) {
    try {
      work();
    } catch (...) {
      failed = std::current_exception();
    }
    return begin();
  }
  std::unique_ptr<summa_step<S>> next;
  try {
    next = begin();
    // Until its broadcasts finish or the work does (then it is only waited for).
    oa::detail::backoff wait({.first = std::chrono::microseconds(10), .most = std::chrono::microseconds(100)});
    while (next && !finished.load(std::memory_order_acquire) && !next->done()) wait.pause();
  } catch (...) {
    worker.join();
    throw;
  }
  worker.join();
  return next;
}

}  // namespace detail

/// C = A B over the grid they share (SUMMA): panel by panel along k, the
/// panels of A broadcast along the grid rows and those of B along the grid
/// columns (each on a communicator of its own), each rank adding the
/// product of the two it received to its block of C. The next panels move
/// while a rank computes with the current ones (two of each held at once).
/// A rank whose product fails goes on broadcasting (the others need its
/// panels) and the failure is agreed at the end. A collective.
template <class S>
matrix<S> gemm(const matrix<S>& a, const matrix<S>& b) {
  const char* call = "oa::dist::gemm";
  if (&a.comm() != &b.comm())
    throw oa::invalid_argument(call, "b", "made over another communicator than A");
  // The operands checked, and their shapes agreed, in a collective: what is
  // wrong on any rank fails every rank's call.
  communicator& c = a.comm();
  (void)c.exchange(
      call,
      [&] {
        if (a.cols() != b.rows())
          throw oa::invalid_argument(call, "b",
                                     std::to_string(b.rows()) + " rows for A's " + std::to_string(a.cols()) + " columns");
        if (!(a.grid() == b.grid()))
          throw oa::invalid_argument(call, "b",
                                     "over a " + std::to_string(b.grid().rows) + " x " + std::to_string(b.grid().cols) +
                                         " grid, A over " + std::to_string(a.grid().rows) + " x " +
                                         std::to_string(a.grid().cols));
        return std::vector<std::byte>{};
      },
      a.shape_key() ^ (b.shape_key() << 2));
  const grid g = a.grid();
  const std::string shape = std::to_string(g.rows) + " x " + std::to_string(g.cols);
  communicator& row = c.split_kept(call, "oa::dist grid rows, " + shape, g.row_of(c.rank()), g.col_of(c.rank()));
  communicator& col = c.split_kept(call, "oa::dist grid columns, " + shape, g.col_of(c.rank()), g.row_of(c.rank()));
  using block = typename matrix<S>::local_type;
  block cm = block::Zero(static_cast<Eigen::Index>(a.local_rows()), static_cast<Eigen::Index>(b.local_cols()));
  std::exception_ptr failed;
  const auto ps = detail::panels(a, b);
  // Step i + 1 begins while step i's product runs.
  const auto begin = [&](std::size_t i) {
    return i < ps.size() ? std::make_unique<detail::summa_step<S>>(a, b, ps[i].first, ps[i].second, row, col, call)
                         : nullptr;
  };
  std::unique_ptr<detail::summa_step<S>> now = begin(0);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    // Named, not bound: clang before 16 cannot capture a structured binding.
    const auto panels = now->wait();
    const auto& ap = panels.first;
    const auto& bp = panels.second;
    const auto next = [&] { return begin(i + 1); };
    if (failed || cm.size() == 0) {
      now = next();
      continue;
    }
    now = detail::overlapped<S>([&] {
      oa::linalg::gemm(S(1), ap, bp, S(1), cm);
      oa::evaluate();
    }, next, failed);
  }
  (void)c.exchange(call, [&] {
    if (failed) std::rethrow_exception(failed);
    return std::vector<std::byte>{};
  });
  return matrix<S>(a.rows(), b.cols(), a.grid(), std::move(cm), c);
}

}  // namespace oa::dist
