// Matrix products through the engine: tile plans under a budget, results
// against Eigen on every device for every storage order, transpose and
// beta, and what happens when the device fails.

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <oa/linalg/gemm.hpp>
#include <atomic>
#include <random>

#include "core/tiling.hpp"
#include "support.hpp"

namespace {

using oa::detail::held_panel;
using oa::detail::plan_tiles;
using oa::detail::tile_plan;
using oa::detail::tiling_problem;
using oa::linalg::op;
using oa_test::config_scope;
using oa_test::contains;
using oa_test::h100_rates;

using oa_test::random_matrix;

template <class M>
double max_rel(const M& got, const M& ref) {
  // Relative to the largest entry: entries near zero come from cancellation.
  const double scale = std::max(1.0, static_cast<double>(ref.cwiseAbs().maxCoeff()));
  return static_cast<double>((got - ref).cwiseAbs().maxCoeff()) / scale;
}

using MatrixXdR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixXfR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class S>
double tolerance() {
  return std::is_same_v<S, double> ? 1e-12 : 1e-5;
}

}  // namespace

TEST_CASE("tile plans stay in the budget and near the I/O lower bound") {
  for (std::size_t eb : {std::size_t{8}, std::size_t{4}}) {
    const std::size_t n = 4096;
    const std::size_t operands = 3 * n * n * eb;
    for (std::size_t times : {4, 16}) {
      tiling_problem p{n, n, n, eb, false, operands / times, 256};
      const tile_plan t = plan_tiles(p);
      CAPTURE(eb);
      CAPTURE(times);
      CAPTURE(t.describe());
      CHECK(t.device_bytes <= p.budget);
      CHECK(t.kt >= 256);
      const double lb = oa::detail::io_lower_bound_bytes(n, eb, p.budget);
      CHECK(static_cast<double>(t.bytes_moved) <= 2.0 * lb);
      CHECK(t.bytes_moved == oa::detail::tile_plan_traffic(p, t.mt, t.nt, t.hold));
    }
  }
}

TEST_CASE("a panel is held when it saves bytes: a tall product") {
  // A is 8192 x 512: its row panels are cheap to hold, B is read once per row panel otherwise.
  tiling_problem p{8192, 512, 512, 8, false, std::size_t{12} << 20, 256};
  const tile_plan t = plan_tiles(p);
  CAPTURE(t.describe());
  CHECK(t.device_bytes <= p.budget);
  // Everything moves once: A, B and C.
  CHECK(t.bytes_moved == (8192 * 512 + 512 * 512 + 8192 * 512) * 8);
}

TEST_CASE("a budget too small for the smallest tiles names the budget that would do") {
  tiling_problem p{100, 100, 100, 8, true, 1000, 256};
  const std::string msg = oa_test::message_of([&] { plan_tiles(p); });
  CHECK(contains(msg, "1280 bytes"));
  CHECK(contains(msg, "OA_DEVICE_MEMORY"));
  CHECK_THROWS_AS(plan_tiles(p), oa::plan_error);
}

namespace {

tiling_problem square(std::size_t n, std::size_t eb, std::size_t budget, const oa::device_rates& r = {}) {
  tiling_problem p{n, n, n, eb, false, budget, 1};
  p.rates = r;
  return p;
}

bool aligned_or_whole(std::size_t extent, std::size_t len) { return extent % 64 == 0 || extent == len; }

}  // namespace

TEST_CASE("timed tile plans: within the budget, extents and steps in multiples of 64, near the I/O lower bound") {
  for (std::size_t n : {std::size_t{4096}, std::size_t{5000}, std::size_t{16384}})
    for (std::size_t eb : {std::size_t{4}, std::size_t{8}})
      for (std::size_t times : {4, 16}) {
        const tiling_problem p = square(n, eb, 3 * n * n * eb / times, h100_rates());
        const tile_plan t = plan_tiles(p);
        CAPTURE(n);
        CAPTURE(eb);
        CAPTURE(times);
        CAPTURE(t.describe());
        CHECK(t.device_bytes <= p.budget);
        CHECK(t.device_bytes == oa::detail::tile_plan_bytes(p, t.mt, t.nt, t.kt, t.hold, t.c_buffers, t.lookahead));
        CHECK(aligned_or_whole(t.mt, n));
        CHECK(aligned_or_whole(t.nt, n));
        CHECK(aligned_or_whole(t.kt, n));
        CHECK(t.lookahead >= 2);
        CHECK(static_cast<double>(t.bytes_moved) <= 1.4 * oa::detail::io_lower_bound_bytes(n, eb, p.budget));
        CHECK(t.predicted_seconds > 0);
        CHECK(t.predicted_seconds == oa::detail::predict_tile_plan(p, t).seconds);
        CHECK(contains(t.describe(), "steps ahead, copy/compute"));
      }
}

TEST_CASE("timed tile plans keep copies at most 0.8 of compute where a plan does, and beat the fewest-bytes plan") {
  const tiling_problem timed = square(16384, 8, std::size_t{1536} << 20, h100_rates());
  const tile_plan t = plan_tiles(timed);
  CAPTURE(t.describe());
  CHECK(t.copy_per_compute <= 0.8);
  CHECK(t.copy_per_compute == doctest::Approx(oa::detail::predict_tile_plan(timed, t).copy_per_compute));
  // The plan the H100 ran (fewest bytes, dims 3277 and 1821 misaligned), under the same model.
  const tile_plan old = plan_tiles(square(16384, 8, std::size_t{1536} << 20));
  CHECK(oa::detail::predict_tile_plan(timed, old).seconds > t.predicted_seconds);
  // At 16x the link cannot keep up with any plan: the fastest is chosen all the same.
  const tile_plan link_bound = plan_tiles(square(16384, 8, std::size_t{384} << 20, h100_rates()));
  CHECK(link_bound.copy_per_compute > 0.8);
  CHECK(link_bound.device_bytes <= std::size_t{384} << 20);
}

TEST_CASE("without rates, tile plans are the fewest-bytes plans the H100 ran") {
  oa::device_rates flops_only;
  flops_only.gemm_flops[1] = 55.77e12;  // no link rate: not timed
  for (const oa::device_rates& r : {oa::device_rates{}, flops_only}) {
    const tile_plan a = plan_tiles(square(16384, 8, std::size_t{1536} << 20, r));
    CHECK(a.describe() == "C tiles 8192x3277 (2x5), k steps of 1821 (9), A row panels held, 2 C tiles in flight");
    CHECK(a.lookahead == 2);
    CHECK(a.predicted_seconds == 0);
    const tile_plan b = plan_tiles(square(8192, 8, std::size_t{96} << 20, r));
    CHECK(b.describe() == "C tiles 4096x2048 (2x4), k steps of 328 (25), 1 C tile in flight");
  }
}

TEST_CASE("the step model: flops at the in-core rate, C through device memory, misaligned extents slower") {
  oa::device_rates r = h100_rates();
  r.gemm_flops[1] = 61.58e12;  // in-core at n=8192
  // The H100's n=8192 tiles: 0.129 ms a step measured (compute_seconds / 200 steps).
  CHECK(oa::detail::predicted_step_seconds(r, 8, 4096, 2048, 328, true) == doctest::Approx(0.134e-3).epsilon(0.01));
  const double flops = 2.0 * 4096 * 2048 * 320 / r.gemm_flops[1], c = 4096.0 * 2048 * 8 / r.kernel_bytes;
  CHECK(oa::detail::predicted_step_seconds(r, 8, 4096, 2048, 320, false) == doctest::Approx(flops + c));
  CHECK(oa::detail::predicted_step_seconds(r, 8, 4096, 2048, 321, false) ==
        doctest::Approx(flops * 321 / 320 / r.gemm_unaligned + c));
  CHECK(oa::detail::predicted_step_seconds(oa::device_rates{}, 8, 64, 64, 64, true) == 0);
}

TEST_CASE("timed tile plans for odd sizes and tiny budgets: a plan within the budget, or the clear error") {
  // Too small for any tile: the same error as without rates.
  const tiling_problem none{100, 100, 100, 8, true, 1000, 256, false, true, h100_rates()};
  CHECK(contains(oa_test::message_of([&] { plan_tiles(none); }), "1280 bytes"));
  CHECK_THROWS_AS(plan_tiles(none), oa::plan_error);
  for (std::size_t budget : {std::size_t{3000}, std::size_t{20000}, std::size_t{200000}})
    for (int lookahead : {0, 4}) {
      tiling_problem p{37, 51, 29, 8, true, budget, 1, false, true, h100_rates()};
      p.lookahead = lookahead;
      const tile_plan t = plan_tiles(p);
      CAPTURE(budget);
      CAPTURE(t.describe());
      CHECK(t.device_bytes <= budget);
      CHECK(t.device_bytes == oa::detail::tile_plan_bytes(p, t.mt, t.nt, t.kt, t.hold, t.c_buffers, t.lookahead));
      if (lookahead) CHECK(t.lookahead == lookahead);
    }
}

namespace {

/// Plans every contraction with these rates and lookahead while it lives.
struct tiling_scope {
  explicit tiling_scope(oa::detail::tiling_override o) { oa::detail::override_tiling(std::move(o)); }
  ~tiling_scope() { oa::detail::override_tiling(std::nullopt); }
};

using oa_test::integer_matrix;

}  // namespace

TEST_CASE_TEMPLATE("timed plans on the emulated device: loads steps ahead, prefetched panels, exact products", S,
                   double, float) {
  using M = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  // A slow link: plans hold panels where that saves bytes.
  oa::device_rates slow;
  slow.h2d = slow.d2h = 1e8, slow.both_ways = 1.5e8, slow.kernel_bytes = 1e11;
  slow.gemm_flops[0] = slow.gemm_flops[1] = 1e11;
  struct shape {
    Eigen::Index m, n, k;
  };
  std::uint64_t seed = 11;
  int held_lines = 0;
  for (int lookahead : {3, 5}) {
    tiling_scope scope_rates({slow, lookahead});
    for (const shape sh : {shape{300, 260, 200}, shape{257, 129, 190}, shape{96, 520, 70}})
      for (std::size_t budget : {std::size_t{96} << 10, std::size_t{256} << 10})
        for (op ob : {op::none, op::transpose}) {
          config_scope scope(oa_test::emulated_config(budget * sizeof(S) / 8));
          const M A = integer_matrix<M>(sh.m, sh.k, seed++);
          const M B = ob == op::none ? integer_matrix<M>(sh.k, sh.n, seed++) : integer_matrix<M>(sh.n, sh.k, seed++);
          const M C0 = integer_matrix<M>(sh.m, sh.n, seed++);
          const M ref = S(0.5) * C0 + A * (ob == op::none ? M(B) : M(B.transpose()));
          M C = C0;
          oa::clear_reports();
          oa::linalg::gemm(S(1), A, B, S(0.5), C, op::none, ob);
          oa::evaluate();
          const oa::stage_report rep = oa_test::run_total();
          CAPTURE(rep.tiling);
          CHECK(bool(C == ref));
          CHECK(contains(rep.tiling, "loads " + std::to_string(lookahead) + " steps ahead"));
          CHECK(rep.peak_device_bytes <= budget * sizeof(S) / 8);
          // A held panel over more than one line: the next line's is prefetched.
          const tile_plan t = plan_tiles([&] {
            tiling_problem p{std::size_t(sh.m), std::size_t(sh.n), std::size_t(sh.k), sizeof(S), true,
                             budget * sizeof(S) / 8, 256, false, true, slow};
            p.lookahead = lookahead;
            return p;
          }());
          CHECK(rep.tiling.rfind(t.describe(), 0) == 0);  // then how C is written back, if in blocks
          CHECK(rep.peak_device_bytes == t.device_bytes);  // lookahead piece buffers per streamed operand
          if (t.hold == held_panel::a_rows && t.tiles_m() > 1 && t.tiles_n() > 1) ++held_lines;
          if (t.hold == held_panel::b_cols && t.tiles_n() > 1 && t.tiles_m() > 1) ++held_lines;
        }
  }
  CHECK(held_lines > 0);
}

TEST_CASE_TEMPLATE("products match Eigen on every device, order, transpose and beta", M, Eigen::MatrixXd,
                   Eigen::MatrixXf, MatrixXdR, MatrixXfR) {
  using S = typename M::Scalar;
  const Eigen::Index m = 150, n = 130, k = 170;
  // Budgets: the host; the emulated device with room for a few tiles; and
  // with room for thin ones only.
  const std::size_t small = 3 * 64 * 64 * sizeof(S) + 4 * 64 * 64 * sizeof(S);
  const std::vector<oa::config> configs{oa_test::host_config(), oa_test::emulated_config(std::size_t{1} << 20),
                                        oa_test::emulated_config(small)};
  std::uint64_t seed = 1;
  for (const auto& cfg : configs) {
    config_scope scope(cfg);
    for (op oa_ : {op::none, op::transpose})
      for (op ob : {op::none, op::transpose})
        for (S beta : {S(0), S(0.5)}) {
          CAPTURE(cfg.device);
          CAPTURE(cfg.device_memory);
          CAPTURE(int(oa_));
          CAPTURE(int(ob));
          CAPTURE(beta);
          const M A = oa_ == op::none ? random_matrix<M>(m, k, seed++) : random_matrix<M>(k, m, seed++);
          const M B = ob == op::none ? random_matrix<M>(k, n, seed++) : random_matrix<M>(n, k, seed++);
          const M C0 = random_matrix<M>(m, n, seed++);
          const S alpha = S(1.5);
          M ref = beta * C0;
          ref.noalias() += alpha * (oa_ == op::none ? M(A) : M(A.transpose())) * (ob == op::none ? M(B) : M(B.transpose()));

          M C = C0;
          oa::linalg::gemm(alpha, A, B, beta, C, oa_, ob);  // in place
          CHECK(bool(C == C0));  // nothing yet: lazy
          oa::evaluate();
          CHECK(max_rel(C, ref) <= tolerance<S>());

          // A new matrix from a lazy C, which stays as it was.
          oa::lazy<M> c_lazy = oa::hold(C0);
          oa::lazy<M> R = oa::linalg::gemm(alpha, A, B, beta, c_lazy, oa_, ob);
          CHECK(max_rel(R.get(), ref) <= tolerance<S>());
          CHECK(bool(c_lazy.get() == C0));
        }
    if (cfg.device == "emulated") {
      const oa::stage_report t = oa_test::run_total();
      CHECK(t.peak_device_bytes <= cfg.device_memory);
      CHECK(t.h2d_bytes > 0);
    }
  }
}

TEST_CASE("a product of products chains through lazy values, and its tiles are reported") {
  config_scope scope(oa_test::emulated_config(std::size_t{256} << 10));
  const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(120, 90, 7), B = random_matrix<Eigen::MatrixXd>(90, 110, 8),
                        D = random_matrix<Eigen::MatrixXd>(110, 60, 9);
  oa::lazy<Eigen::MatrixXd> AB = oa::linalg::product(A, B);
  oa::lazy<Eigen::MatrixXd> ABD = oa::linalg::product(AB, D);
  const Eigen::MatrixXd ref = (A * B) * D;
  CHECK(max_rel(ABD.get(), ref) <= 1e-12);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 2);
  for (const auto& r : reps) {
    CHECK(r.calls == std::vector<std::string>{"oa::linalg::product"});
    CHECK(contains(r.tiling, "C tiles"));
    CHECK(r.peak_device_bytes <= std::size_t{256} << 10);
  }
}

TEST_CASE("mismatched shapes are refused naming the function and the argument") {
  const Eigen::MatrixXd A(4, 5), B(6, 3);
  Eigen::MatrixXd C(4, 3);
  std::string msg = oa_test::message_of([&] { oa::linalg::gemm(1.0, A, B, 0.0, C); });
  CHECK(contains(msg, "oa::linalg::gemm"));
  CHECK(contains(msg, "B"));
  CHECK(contains(msg, "inner dimensions"));
  const Eigen::MatrixXd B2(5, 3);
  Eigen::MatrixXd C2(4, 4);
  msg = oa_test::message_of([&] { oa::linalg::gemm(1.0, A, B2, 0.0, C2); });
  CHECK(contains(msg, "C"));
  CHECK(contains(msg, "4x4"));
  CHECK_THROWS_AS(oa::linalg::product(A, B), oa::invalid_argument);
}

TEST_CASE("empty and degenerate products") {
  config_scope scope(oa_test::emulated_config(std::size_t{1} << 20));
  const Eigen::MatrixXd A(3, 0), B(0, 4);
  Eigen::MatrixXd C = Eigen::MatrixXd::Constant(3, 4, 2.0);
  oa::linalg::gemm(1.0, A, B, 0.5, C);  // k = 0: C = beta C
  oa::evaluate();
  CHECK(bool(C == Eigen::MatrixXd::Constant(3, 4, 1.0)));
  const Eigen::MatrixXd E(0, 5), F(5, 2);
  CHECK(oa::linalg::product(E, F).get().size() == 0);
}

namespace {
/// Records C = A B in place like oa::linalg::gemm, with a step that throws on
/// its `fail_at`-th call (as a cuBLAS error would).
void record_failing_product(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B, Eigen::MatrixXd& C, int fail_at) {
  namespace d = oa::detail;
  auto g = d::current_graph();
  std::lock_guard lock(g->mutex());
  const auto* ops = oa::linalg::detail::ops<Eigen::MatrixXd>();
  d::call_node node;
  node.name = "failing product";
  node.units = static_cast<std::size_t>(C.cols());
  node.args.push_back({d::arg_role::in, d::bind_value<oa::split::cols, Eigen::MatrixXd>(*g, A, ops, "p", "A", false),
                       nullptr});
  node.args.push_back({d::arg_role::in, d::bind_value<oa::split::cols, Eigen::MatrixXd>(*g, B, ops, "p", "B", false),
                       nullptr});
  auto vc = d::bind_value<oa::split::cols, Eigen::MatrixXd>(*g, C, ops, "p", "C", true);
  auto nv = std::make_shared<d::value_state>();
  nv->label = "C of failing product";
  nv->ops = ops;
  nv->shape = vc->shape;
  nv->object = vc->object;
  nv->user_storage = true;
  nv->status = d::value_status::pending;
  nv->owner = g->weak_from_this();
  g->set_user_version(vc->object, nv);
  node.args.push_back({d::arg_role::mut, vc, nv});
  auto desc = std::make_shared<d::contraction_desc>();
  desc->m = static_cast<std::size_t>(A.rows()), desc->n = static_cast<std::size_t>(B.cols());
  desc->k = static_cast<std::size_t>(A.cols());
  desc->reads_c = true;
  desc->elem_bytes = 8;
  desc->storage = {&oa::linalg::detail::storage<Eigen::MatrixXd>, &oa::linalg::detail::storage<Eigen::MatrixXd>,
                   &oa::linalg::detail::storage<Eigen::MatrixXd>};
  auto calls = std::make_shared<std::atomic<int>>(0);
  desc->cpu = [inner = oa::linalg::detail::cpu_step<double>(1.0, 1.0, false, false), calls, fail_at](
                  const oa::matrix_block& a, const oa::matrix_block& b, const oa::matrix_block& c, bool first,
                  const oa::stream_view& v) {
    if (++*calls == fail_at) throw std::runtime_error("step " + std::to_string(fail_at) + " failed");
    inner(a, b, c, first, v);
  };
  node.contraction = std::move(desc);
  nv->producer = g->add(std::move(node));
}
}  // namespace

TEST_CASE("a failing step leaves the caller's C as it was, and the error reaches the caller") {
  for (const auto& cfg : {oa_test::host_config(), oa_test::emulated_config(std::size_t{256} << 10)}) {
    CAPTURE(cfg.device);
    config_scope scope(cfg);
    const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(200, 200, 1), B = random_matrix<Eigen::MatrixXd>(200, 200, 2);
    const Eigen::MatrixXd C0 = random_matrix<Eigen::MatrixXd>(200, 200, 3);
    Eigen::MatrixXd C = C0;
    record_failing_product(A, B, C, 2);
    const std::string msg = oa_test::message_of([] { oa::evaluate(); });
    CHECK(contains(msg, "step 2 failed"));
    CHECK(bool(C == C0));
    CHECK(oa::reports().back().rollback_bytes == 200 * 200 * 8);
    CHECK(contains(oa::reports().back().error, "step 2 failed"));
  }
}

TEST_CASE("a device fault in one step: the product is done again on the host") {
  oa::config c = oa_test::emulated_config(std::size_t{256} << 10);
  c.fail_launch = 3;
  config_scope scope(c);
  const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(200, 200, 1), B = random_matrix<Eigen::MatrixXd>(200, 200, 2);
  const Eigen::MatrixXd C0 = random_matrix<Eigen::MatrixXd>(200, 200, 3);
  Eigen::MatrixXd C = C0;
  const Eigen::MatrixXd ref = A * B + C0;
  oa::linalg::gemm(1.0, A, B, 1.0, C);
  oa::evaluate();
  CHECK(max_rel(C, ref) <= 1e-12);
  CHECK(oa::reports().back().host_reruns > 0);
}

TEST_CASE("a device lost during a product: the product is done on the host") {
  oa::config c = oa_test::emulated_config(std::size_t{256} << 10);
  c.fail_launch = 2;
  c.fail_sticky = true;
  config_scope scope(c);
  const Eigen::MatrixXf A = random_matrix<Eigen::MatrixXf>(150, 170, 4), B = random_matrix<Eigen::MatrixXf>(170, 160, 5);
  Eigen::MatrixXf C = random_matrix<Eigen::MatrixXf>(150, 160, 6);
  const Eigen::MatrixXf ref = (2.0f * A * B + C).eval();
  oa::linalg::gemm(2.0f, A, B, 1.0f, C);
  oa::evaluate();
  CHECK(max_rel(C, ref) <= 1e-5);
  const auto r = oa::reports().back();
  CHECK(!r.device_fault.empty());
  CHECK(r.host_reruns > 0);
}

namespace {
// Element-wise work on a matrix's columns: with a device function, and without.
inline constexpr auto scale_cols = oa::annotate<"test::scale_cols">(
    oa::cpu([](const auto& a, const double& s, auto& out) { out = a * s; }),
    oa::args(oa::in<oa::split::cols>, oa::scalar<double>, oa::out<oa::split::cols, Eigen::MatrixXd>),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));
inline constexpr auto scale_cols_cpu_only = oa::annotate<"test::scale_cols_cpu_only">(
    oa::cpu([](const auto& a, const double& s, auto& out) { out = a * s; }),
    oa::args(oa::in<oa::split::cols>, oa::scalar<double>, oa::out<oa::split::cols, Eigen::MatrixXd>));

struct product_then_scale {
  Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(256, 192, 11), B = random_matrix<Eigen::MatrixXd>(192, 160, 12);
  Eigen::MatrixXd ref = 3.0 * (A * B);
  std::size_t c_bytes = 256 * 160 * sizeof(double);
};
}  // namespace

TEST_CASE("a product's result read by element-wise work on the device stays there") {
  config_scope scope(oa_test::emulated_config(std::size_t{2} << 20));
  product_then_scale t;
  SUBCASE("the product is a temporary: it never crosses the link") {
    oa::lazy<Eigen::MatrixXd> R = scale_cols(oa::linalg::product(t.A, t.B), 3.0);
    CHECK(max_rel(R.get(), t.ref) <= 1e-12);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 2);
    CHECK(reps[0].resident_bytes == t.c_bytes);
    CHECK(reps[0].d2h_bytes == 0);                    // not written back: nobody needs it on the host
    CHECK(reps[1].resident_bytes_saved == t.c_bytes);  // read where it was computed
    CHECK(reps[1].h2d_bytes == 0);                     // nothing else to copy in
    CHECK(reps[1].d2h_bytes == t.c_bytes);             // the scaled result comes back
    CHECK(reps[1].peak_device_bytes <= std::size_t{2} << 20);
  }
  SUBCASE("the product is held too: it comes back once, and is not copied in again") {
    oa::lazy<Eigen::MatrixXd> P = oa::linalg::product(t.A, t.B);
    oa::lazy<Eigen::MatrixXd> R = scale_cols(P, 3.0);
    CHECK(max_rel(R.get(), t.ref) <= 1e-12);
    CHECK(max_rel(P.get(), Eigen::MatrixXd(t.A * t.B)) <= 1e-12);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 2);
    CHECK(reps[0].d2h_bytes == t.c_bytes);
    CHECK(reps[1].resident_bytes_saved == t.c_bytes);
    CHECK(reps[1].h2d_bytes == 0);
  }
  SUBCASE("a reader on the host gets the value written back first") {
    oa::lazy<Eigen::MatrixXd> R = scale_cols_cpu_only(oa::linalg::product(t.A, t.B), 3.0);
    CHECK(max_rel(R.get(), t.ref) <= 1e-12);
    CHECK(oa::reports().back().device == "host");
  }
}

TEST_CASE("a device fault while reading a resident product") {
  product_then_scale t;
  {
    // With this budget the product is one tile in one step: launch #1; the
    // scaling's first chunk is launch #2.
    config_scope scope(oa_test::emulated_config(std::size_t{2} << 20));
    (void)scale_cols(oa::linalg::product(t.A, t.B), 3.0).get();
    REQUIRE(contains(oa::reports().front().tiling, "(1x1), k steps of 192 (1)"));
  }
  oa::config c = oa_test::emulated_config(std::size_t{2} << 20);
  c.fail_launch = 2;
  SUBCASE("the device survives: the value is written back, the chunk re-runs on the host") {
    config_scope scope(c);
    oa::lazy<Eigen::MatrixXd> R = scale_cols(oa::linalg::product(t.A, t.B), 3.0);
    CHECK(max_rel(R.get(), t.ref) <= 1e-12);
    CHECK(oa::reports().back().host_reruns > 0);
  }
  SUBCASE("the device is lost with the only copy: the error says so and reaches the caller") {
    c.fail_sticky = true;
    config_scope scope(c);
    oa::lazy<Eigen::MatrixXd> R = scale_cols(oa::linalg::product(t.A, t.B), 3.0);
    const std::string msg = oa_test::message_of([&] { (void)R.get(); });
    CHECK(contains(msg, "result of oa::linalg::product was kept only in the memory of emulated"));
    CHECK_THROWS_AS((void)R.get(), oa::device_fault);
  }
}

TEST_CASE("the pager evicts a resident product when a stage needs its room, and writes it back first") {
  config_scope scope(oa_test::emulated_config(std::size_t{2} << 20));
  product_then_scale t;
  const Eigen::MatrixXd other = random_matrix<Eigen::MatrixXd>(512, 600, 13);  // more than the budget
  oa::lazy<Eigen::MatrixXd> R;
  oa::lazy<Eigen::MatrixXd> Q;
  {
    oa::lazy<Eigen::MatrixXd> P = oa::linalg::product(t.A, t.B);  // kept on the device for R
    Q = scale_cols(other, 2.0);                                    // a stage that wants the whole budget
    R = scale_cols(P, 3.0);                                        // reads P after it
  }
  CHECK(max_rel(R.get(), t.ref) <= 1e-12);
  CHECK(max_rel(Q.get(), Eigen::MatrixXd(2.0 * other)) <= 1e-12);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 3);
  CHECK(reps[0].resident_bytes == t.c_bytes);
  CHECK(reps[0].d2h_bytes == 0);
  CHECK(reps[1].evicted_bytes == t.c_bytes);          // made room
  CHECK(reps[1].d2h_bytes >= t.c_bytes);              // the product went back before its copy was dropped
  CHECK(reps[2].resident_bytes_saved == 0);           // read from the host after that
  for (const auto& r : reps) CHECK(r.peak_device_bytes <= std::size_t{2} << 20);
}

namespace {
/// A link slow against the products: timed plans, as on a GPU.
oa::device_rates slow_link() {
  oa::device_rates r;
  r.h2d = r.d2h = 1e8, r.both_ways = 1.5e8, r.kernel_bytes = 1e11;
  r.gemm_flops[0] = r.gemm_flops[1] = 1e11;
  return r;
}

/// C = 1.5 op(A) op(B) + beta C0 in place on `cfg`'s device, one C tile
/// buffer, written back in at most `blocks` blocks (1: whole); C and the
/// report. Planned by fewest bytes (no rates), so that the plan does not
/// depend on `blocks`: the same tiles and k steps either way.
template <class M>
std::pair<M, oa::stage_report> one_buffer_product(const oa::config& cfg, const M& A, const M& B, const M& C0,
                                                  typename M::Scalar beta, op ob, int blocks) {
  tiling_scope over({oa::device_rates{}, 2, blocks, 1});
  config_scope scope(cfg);
  M C = C0;
  oa::clear_reports();
  oa::linalg::gemm(typename M::Scalar(1.5), A, B, beta, C, op::none, ob);
  oa::evaluate();
  return {C, oa_test::run_total()};
}
}  // namespace

TEST_CASE("C tiles written back in blocks: offsets in multiples of 64 or 8, the tile covered, small tiles whole") {
  using oa::detail::c_write_blocks;
  const auto covers = [](const std::vector<oa::detail::c_block>& b, std::size_t outer) {
    bool ok = !b.empty() && b.front().begin == 0 && b.back().end == outer;
    for (std::size_t j = 0; j + 1 < b.size(); ++j) ok = ok && b[j].end == b[j + 1].begin && b[j].begin < b[j].end;
    return ok;
  };
  for (std::size_t outer : {16, 37, 100, 129, 520, 1000, 4096, 5504, 8192})
    for (int blocks : {1, 4, 8}) {
      CAPTURE(outer);
      CAPTURE(blocks);
      const auto b = c_write_blocks(outer, 300, blocks);
      CHECK(covers(b, outer));
      CHECK(b.size() <= static_cast<std::size_t>(blocks));
      const std::size_t align = b.size() > 1 && b[0].end >= 64 ? 64 : 8;
      for (const auto& bl : b) {
        CHECK(bl.begin % align == 0);
        if (b.size() > 1) CHECK(bl.end - bl.begin >= 8);  // never one column: another kernel path
      }
    }
  CHECK(c_write_blocks(8192, 8192, 8).size() == 8);
  CHECK(c_write_blocks(1000, 4096, 8)[0].end == 128);
  CHECK(c_write_blocks(1000, 19, 8).size() == 1);  // too few rows: Eigen may sum another way
  CHECK(c_write_blocks(15, 300, 8).size() == 1);
}

TEST_CASE("the time model: with one C buffer, blocks hide most of the write-back") {
  tiling_problem p{16384, 16384, 16384, 8, false, std::size_t{384} << 20, 256};
  p.rates.h2d = 54.7e9, p.rates.d2h = 55.2e9, p.rates.both_ways = 88.4e9, p.rates.kernel_bytes = 3e12;
  p.rates.gemm_flops[0] = p.rates.gemm_flops[1] = 55.8e12;
  p.c_buffers = 1;
  tile_plan t = plan_tiles(p);
  REQUIRE(t.c_buffers == 1);
  CHECK(t.c_blocks == oa::detail::default_c_blocks);
  const double blocked = oa::detail::predict_tile_plan(p, t).seconds;
  t.c_blocks = 1;
  const double whole = oa::detail::predict_tile_plan(p, t).seconds;
  CAPTURE(t.describe());
  CHECK(blocked < whole);
  // At most the tiles' write-back is saved.
  const double back = static_cast<double>(t.mt * t.nt * 8) / p.rates.d2h * static_cast<double>(t.tiles_m() * t.tiles_n());
  CHECK(whole - blocked < back);
}

TEST_CASE_TEMPLATE("one C buffer written back in blocks: the unsplit plan's bits, for odd shapes, orders and beta", M,
                   Eigen::MatrixXd, Eigen::MatrixXf, MatrixXdR, MatrixXfR) {
  using S = typename M::Scalar;
  struct shape {
    Eigen::Index m, n, k;
  };
  std::uint64_t seed = 31;
  int blocked_runs = 0;
  // Tiles of one k step (the first is the last) and of several.
  for (const shape sh : {shape{300, 260, 200}, shape{257, 129, 190}, shape{96, 520, 70}, shape{131, 203, 45},
                         shape{120, 200, 1100}, shape{77, 301, 1500}})
    for (std::size_t budget : {std::size_t{256} << 10, std::size_t{640} << 10})
      for (S beta : {S(0), S(0.5)})
        for (op ob : {op::none, op::transpose}) {
          CAPTURE(sh.m);
          CAPTURE(sh.n);
          CAPTURE(sh.k);
          CAPTURE(budget);
          CAPTURE(beta);
          const oa::config cfg = oa_test::emulated_config(budget * sizeof(S) / 8);
          const M A = random_matrix<M>(sh.m, sh.k, seed++);
          const M B = ob == op::none ? random_matrix<M>(sh.k, sh.n, seed++) : random_matrix<M>(sh.n, sh.k, seed++);
          const M C0 = random_matrix<M>(sh.m, sh.n, seed++);
          const auto [blocked, rep] = one_buffer_product(cfg, A, B, C0, beta, ob, 0);
          const auto [whole, rep1] = one_buffer_product(cfg, A, B, C0, beta, ob, 1);
          const std::string tiling = rep.tiling;
          CAPTURE(tiling);
          CHECK(contains(rep.tiling, "1 C tile in flight"));
          CHECK_FALSE(contains(rep1.tiling, "written back in"));
          CHECK(contains(rep.tiling, rep1.tiling));  // the same plan
          if (contains(rep.tiling, "written back in")) ++blocked_runs;
          CHECK(bool(blocked == whole));  // bit for bit
          M ref = beta * C0;
          ref.noalias() += S(1.5) * A * (ob == op::none ? M(B) : M(B.transpose()));
          CHECK(max_rel(blocked, ref) <= tolerance<S>());
          CHECK(rep.peak_device_bytes <= budget * sizeof(S) / 8);
        }
  MESSAGE(blocked_runs);
  CHECK(blocked_runs >= 24);
}

TEST_CASE("a device fault on a block of a blocked write-back: the tile re-runs on the host, bit for bit") {
  using M = Eigen::MatrixXd;
  // Several k steps per tile: faults in first, middle and last steps' launches and copies.
  const M A = random_matrix<M>(157, 900, 41), B = random_matrix<M>(900, 229, 42), C0 = random_matrix<M>(157, 229, 43);
  const oa::config base = oa_test::emulated_config(std::size_t{640} << 10);
  const auto [ref, rep] = one_buffer_product(base, A, B, C0, 0.5, op::none, 0);
  const std::string tiling = rep.tiling;
  CAPTURE(tiling);
  REQUIRE(contains(rep.tiling, "written back in"));
  REQUIRE(rep.host_reruns == 0);
  int rerun = 0;
  for (int kind = 0; kind < 3; ++kind)
    for (std::uint64_t nth = 1; nth <= 64; ++nth) {
      CAPTURE(kind);
      CAPTURE(nth);
      oa::config c = base;
      (kind == 1 ? c.fail_copy : c.fail_launch) = nth;
      c.fail_sticky = kind == 2 && nth % 8 == 1;
      if (kind == 2 && !c.fail_sticky) continue;
      const auto [got, r] = one_buffer_product(c, A, B, C0, 0.5, op::none, 0);
      CHECK(r.error.empty());
      CHECK(bool(got == ref));
      if (r.host_reruns > 0) ++rerun;
    }
  CHECK(rerun >= 100);
}

// The CPU twin of test_cuda's: the device's product rates measured at a larger budget first, as on a GPU.
TEST_CASE("a product with a budget too small for the smallest tiles is an error at get(), not a crash") {
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(300, 300), B = Eigen::MatrixXd::Random(300, 300);
  {
    oa_test::config_scope big(oa_test::emulated_config(std::size_t{256} << 20, 10));
    CHECK(oa::linalg::product(A, B).get().isApprox(A * B));
  }
  oa_test::config_scope cs(oa_test::emulated_config(1024, 10));
  const Eigen::MatrixXd A0 = A;
  oa::lazy<Eigen::MatrixXd> P = oa::linalg::product(A, B);
  const std::string msg = oa_test::message_of([&] { P.get(); });
  CAPTURE(msg);
  std::string where;
  for (const auto& r : oa::reports()) where += r.device + ": " + r.placement_reason + "; " + r.error + "\n";
  INFO(where);
  CHECK(msg.find("OA_DEVICE_MEMORY") != std::string::npos);
  CHECK_THROWS_AS(P.get(), oa::plan_error);
  CHECK(A == A0);
}
