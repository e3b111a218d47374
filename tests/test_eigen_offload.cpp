// Plain Eigen code built with oa_offload (the hooks are force-included): each
// product form is computed twice, by Eigen (threshold out of reach) and by
// the engine, on random inputs, and the report says which one ran it. Built
// twice, the second time with -fopenmp (Eigen's threads).

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cstdint>
#include <limits>
#include <random>

#include "oa/oa.hpp"
#include "support.hpp"

#if !defined(OA_OFFLOAD)
#error "test_eigen_offload is built with oa_offload()"
#endif

using oa_test::config_scope;

namespace {

using oa_test::random_matrix;

template <class A, class B>
double rel_error(const A& got, const B& ref) {
  const double scale = std::max(1.0, static_cast<double>(ref.cwiseAbs().maxCoeff()));
  return static_cast<double>((got - ref).cwiseAbs().maxCoeff()) / scale;
}

oa::config with_gemm_min(oa::config c, std::uint64_t min) {
  c.offload_gemm_min = min;
  return c;
}

/// Products the engine ran since the last clear_reports().
std::size_t engine_products() {
  std::size_t n = 0;
  for (const auto& r : oa::reports()) n += r.op == "gemm" && r.error.empty();
  return n;
}

std::size_t declined(const std::string& reason_part) {
  std::size_t n = 0;
  for (const auto& d : oa::not_offloaded())
    if (d.op == "gemm" && d.reason.find(reason_part) != std::string::npos) n += d.count;
  return n;
}

/// Runs `f` with Eigen (threshold out of reach), then through the engine on
/// `cfg`, on the same inputs; `f` returns the result. Checks the engine ran
/// `expected` products and both agree.
template <class F>
void differential(const oa::config& cfg, std::size_t expected, double tol, F f) {
  decltype(f()) ref;
  {
    config_scope eigen(with_gemm_min(cfg, std::numeric_limits<std::uint64_t>::max()));
    ref = f();
    CHECK(engine_products() == 0);
  }
  config_scope engine(with_gemm_min(cfg, 0));
  const auto got = f();
  CHECK(engine_products() == expected);
  CHECK(rel_error(got, ref) <= tol);
}

template <class M>
constexpr double tolerance() {
  return std::is_same_v<typename M::Scalar, double> ? 1e-12 : 2e-5;
}

using MatrixXdR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixXfR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace

TEST_CASE_TEMPLATE("every product form Eigen sends to GEMM runs through the engine and matches Eigen", M,
                   Eigen::MatrixXd, Eigen::MatrixXf, MatrixXdR, MatrixXfR) {
  using S = typename M::Scalar;
  constexpr double tol = tolerance<M>();
  const Eigen::Index m = 97, n = 83, k = 71;
  const M A = random_matrix<M>(m, k, 1), B = random_matrix<M>(k, n, 2), C0 = random_matrix<M>(m, n, 3);
  const M At = A.transpose(), Bt = B.transpose();
  // The host device, and the emulated one with a budget smaller than the operands.
  for (const oa::config& cfg : {oa_test::host_config(), oa_test::emulated_config(48 << 10)}) {
    CAPTURE(cfg.device);
    differential(cfg, 1, tol, [&] { return M(A * B); });
    differential(cfg, 1, tol, [&] {
      M C = C0;
      C.noalias() += S(2) * At.transpose() * B;
      return C;
    });
    differential(cfg, 1, tol, [&] {
      M C = C0;
      C -= A * Bt.adjoint();
      return C;
    });
    differential(cfg, 1, tol, [&] {
      M C = C0;
      C.noalias() = (S(0.5) * A) * (B * S(3));
      return C;
    });
    differential(cfg, 1, tol, [&] {
      // Blocks of larger matrices: strided operands and destination.
      M big = random_matrix<M>(m + 20, n + 30, 4);
      big.block(5, 7, m, n).noalias() += A.block(0, 0, m, k) * B.block(0, 0, k, n);
      return big;
    });
    differential(cfg, 1, tol, [&] {
      // Aliasing: Eigen evaluates into a temporary, which the engine fills.
      M X = random_matrix<M>(m, m, 5);
      const M Y = random_matrix<M>(m, m, 6);
      X = X * Y;
      return X;
    });
    differential(cfg, 1, tol, [&] {
      using Map = Eigen::Map<const M, 0, Eigen::OuterStride<>>;
      const M storage = random_matrix<M>(m + 9, k + 9, 7);
      const Map view(storage.data(), m, k, Eigen::OuterStride<>(M::IsRowMajor ? k + 9 : m + 9));
      return M(view * B);
    });
  }
}

TEST_CASE("below OA_OFFLOAD_GEMM_MIN Eigen computes the product; at it, the engine") {
  const Eigen::Index m = 64, n = 48, k = 32;
  const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(m, k, 11), B = random_matrix<Eigen::MatrixXd>(k, n, 12);
  const auto at_threshold = static_cast<std::uint64_t>(m * n * k);
  {
    config_scope cs(with_gemm_min(oa_test::host_config(), at_threshold + 1));
    const Eigen::MatrixXd C = A * B;
    CHECK(engine_products() == 0);
    CHECK(declined("below OA_OFFLOAD_GEMM_MIN") == 1);
    CHECK(rel_error(C, (A.lazyProduct(B)).eval()) <= 1e-12);
  }
  {
    config_scope cs(with_gemm_min(oa_test::host_config(), at_threshold));
    const Eigen::MatrixXd C = A * B;
    CHECK(engine_products() == 1);
    CHECK(declined("below") == 0);
    CHECK(rel_error(C, (A.lazyProduct(B)).eval()) <= 1e-12);
  }
}

TEST_CASE("a product out of core on the emulated device stays within its budget, and the report shows it") {
  const std::size_t budget = 256 << 10;  // the three 300x300 operands are 2.1 MB
  config_scope cs(with_gemm_min(oa_test::emulated_config(budget), 0));
  const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(300, 300, 21), B = random_matrix<Eigen::MatrixXd>(300, 300, 22);
  Eigen::MatrixXd C = Eigen::MatrixXd::Zero(300, 300);
  C.noalias() += A * B;
  CHECK(rel_error(C, (A.lazyProduct(B)).eval()) <= 1e-12);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].op == "gemm");
  CHECK(reps[0].calls == std::vector<std::string>{"Eigen::gemm"});
  CHECK(reps[0].dims == "m=300 n=300 k=300");
  CHECK(reps[0].device.rfind("emulated", 0) == 0);
  CHECK(reps[0].peak_device_bytes <= budget);
  CHECK(reps[0].h2d_bytes >= 3 * 300 * 300 * sizeof(double));
  CHECK(reps[0].d2h_bytes >= 300 * 300 * sizeof(double));
}

namespace {
// An annotated CPU function that uses an Eigen product itself: it runs on an
// engine thread, where the hook leaves the product to Eigen.
inline constexpr auto rotate_cols = oa::annotate<"test::rotate_cols">(
    oa::cpu([](const auto& m, auto& out) {
      Eigen::MatrixXd r = Eigen::MatrixXd::Identity(m.rows(), m.rows()) * 2.0;
      out = r * m;
    }),
    oa::args(oa::in<oa::split::cols>("m"), oa::out<oa::split::cols, Eigen::MatrixXd>("out")));
}  // namespace

TEST_CASE("an Eigen product inside an annotated CPU function runs with Eigen, where it is") {
  config_scope cs(with_gemm_min(oa_test::host_config(), 0));
  const Eigen::MatrixXd m = random_matrix<Eigen::MatrixXd>(40, 400, 31);
  oa::lazy<Eigen::MatrixXd> r = rotate_cols(m);
  CHECK(rel_error(r.get(), (2.0 * m).eval()) <= 1e-15);
  CHECK(declined("inside the engine") >= 1);
}

TEST_CASE("a failing engine leaves the product to Eigen, C intact, and says why") {
  // A budget smaller than the smallest tiles: the engine refuses the plan.
  config_scope cs(with_gemm_min(oa_test::emulated_config(1024), 0));
  const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(200, 200, 41), B = random_matrix<Eigen::MatrixXd>(200, 200, 42);
  Eigen::MatrixXd C = random_matrix<Eigen::MatrixXd>(200, 200, 43);
  const Eigen::MatrixXd ref = C + A.lazyProduct(B);
  C.noalias() += A * B;
  CHECK(rel_error(C, ref) <= 1e-12);
  CHECK(declined("the engine failed") == 1);
  oa::evaluate();  // the failure was handled: nothing left to throw
}
