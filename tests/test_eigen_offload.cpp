// Plain Eigen code built with oa_offload (the hooks are force-included): each
// product form is computed twice, by Eigen (threshold out of reach) and by
// the engine, on random inputs, and the report says which one ran it. Built
// twice, the second time with -fopenmp (Eigen's threads).

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/kernel_source.hpp"
#include "oa/annotations/eigen_array.hpp"
#include "oa/oa.hpp"
#include "support.hpp"
#if defined(OA_HAS_CUDA)
#include "cuda/nvrtc_compiler.hpp"
#endif

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

oa::config with_elements_min(oa::config c, std::uint64_t min) {
  c.offload_elements_min = min;
  return c;
}

/// Stages of Eigen assignments the engine ran since the last clear_reports().
std::size_t engine_cwise() {
  std::size_t n = 0;
  for (const auto& r : oa::reports()) n += r.op == "cwise" && r.error.empty();
  return n;
}

std::size_t declined_cwise(const std::string& reason_part) {
  std::size_t n = 0;
  for (const auto& d : oa::not_offloaded())
    if (d.op == "cwise" && d.reason.find(reason_part) != std::string::npos) n += d.count;
  return n;
}

/// Runs `f` with Eigen (thresholds out of reach), then through the engine on
/// `cfg`; checks the engine ran at least one assignment stage and both agree.
template <class F>
void cwise_differential(const oa::config& cfg, double tol, F f) {
  decltype(f()) ref;
  {
    config_scope eigen(with_elements_min(cfg, std::numeric_limits<std::uint64_t>::max()));
    ref = f();
    CHECK(engine_cwise() == 0);
  }
  config_scope engine(with_elements_min(cfg, 0));
  const auto got = f();
  CHECK(engine_cwise() >= 1);
  CHECK(got.rows() == ref.rows());
  CHECK(got.cols() == ref.cols());
  double err = 0;
  for (Eigen::Index j = 0; j < ref.cols(); ++j)
    for (Eigen::Index i = 0; i < ref.rows(); ++i) {
      const double r = static_cast<double>(ref(i, j)), g = static_cast<double>(got(i, j));
      err = std::max(err, std::abs(g - r) / std::max(1.0, std::abs(r)));
    }
  CHECK(err <= tol);
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
/// `with_min` sets the threshold and `ran` counts the engine's stages of
/// another kind of product (matrix-vector).
template <class F>
void differential(const oa::config& cfg, std::size_t expected, double tol, F f,
                  oa::config (*with_min)(oa::config, std::uint64_t) = &with_gemm_min,
                  std::size_t (*ran)() = &engine_products) {
  decltype(f()) ref;
  {
    config_scope eigen(with_min(cfg, std::numeric_limits<std::uint64_t>::max()));
    ref = f();
    CHECK(ran() == 0);
  }
  config_scope engine(with_min(cfg, 0));
  const auto got = f();
  CHECK(ran() == expected);
  CHECK(rel_error(got, ref) <= tol);
}

template <class M>
constexpr double tolerance() {
  return std::is_same_v<typename M::Scalar, double> ? 1e-12 : 2e-5;
}

using MatrixXdR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixXfR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

#ifdef OA_TEST_FEW_TYPES  // see support.hpp: products in both scalars and both storage orders, the rest in double
#define OA_TEST_MATRIX_TYPES Eigen::MatrixXd, MatrixXfR
#define OA_TEST_SCALAR_TYPES double
#else
#define OA_TEST_MATRIX_TYPES Eigen::MatrixXd, Eigen::MatrixXf, MatrixXdR, MatrixXfR
#define OA_TEST_SCALAR_TYPES double, float
#endif

}  // namespace

TEST_CASE_TEMPLATE("every product form Eigen sends to GEMM runs through the engine and matches Eigen", M,
                   OA_TEST_MATRIX_TYPES) {
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

namespace {

oa::config with_gemv_min(oa::config c, std::uint64_t min) {
  c.offload_gemv_min = min;
  return c;
}

/// Matrix-vector products the engine ran since the last clear_reports().
std::size_t engine_gemvs() {
  std::size_t n = 0;
  for (const auto& r : oa::reports()) n += r.op == "gemv" && r.error.empty();
  return n;
}

template <class F>
void gemv_differential(const oa::config& cfg, double tol, F f) {
  differential(cfg, 1, tol, f, &with_gemv_min, &engine_gemvs);
}

}  // namespace

TEST_CASE_TEMPLATE("matrix-vector products run through the engine on the host's cores and match Eigen", M,
                   OA_TEST_MATRIX_TYPES) {
  using S = typename M::Scalar;
  using V = Eigen::Matrix<S, Eigen::Dynamic, 1>;
  using RV = Eigen::Matrix<S, 1, Eigen::Dynamic>;
  constexpr double tol = tolerance<M>();
  const Eigen::Index m = 301, k = 177;
  const M A = random_matrix<M>(m, k, 31);
  const V x = random_matrix<V>(k, 1, 32), z = random_matrix<V>(m, 1, 33), y0 = random_matrix<V>(m, 1, 34);
  for (const oa::config& cfg : {oa_test::host_config(), oa_test::emulated_config(48 << 10)}) {
    CAPTURE(cfg.device);
    gemv_differential(cfg, tol, [&] { return V(A * x); });
    gemv_differential(cfg, tol, [&] {
      V y = y0;
      y.noalias() += S(2) * A * x;
      return y;
    });
    gemv_differential(cfg, tol, [&] { return V(A.transpose() * z); });
    gemv_differential(cfg, tol, [&] { return RV(z.transpose() * A); });
    gemv_differential(cfg, tol, [&] {
      // A block of A, a strided x, and a segment of a larger y.
      const V storage = random_matrix<V>(3 * k, 1, 35);
      const Eigen::Map<const V, 0, Eigen::InnerStride<>> strided(storage.data(), k - 7, Eigen::InnerStride<>(3));
      V y = random_matrix<V>(m + 10, 1, 36);
      y.segment(4, m - 5).noalias() -= A.block(2, 7, m - 5, k - 7) * strided;
      return y;
    });
    gemv_differential(cfg, tol, [&] {
      // A strided destination: a row of a column-major matrix.
      Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic> Y = random_matrix<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>>(4, m, 37);
      Y.row(1).noalias() += (A * x).transpose();
      return Y;
    });
  }
}

TEST_CASE("a matrix-vector product below OA_OFFLOAD_GEMV_MIN stays with Eigen; on a device, it runs on the host") {
  const Eigen::MatrixXd A = random_matrix<Eigen::MatrixXd>(200, 150, 41);
  const Eigen::VectorXd x = random_matrix<Eigen::VectorXd>(150, 1, 42);
  const Eigen::VectorXd ref = A.lazyProduct(x);
  {
    config_scope cs(with_gemv_min(oa_test::host_config(), 200 * 150 + 1));
    const Eigen::VectorXd y = A * x;
    CHECK(engine_gemvs() == 0);
    std::size_t below = 0;
    for (const auto& d : oa::not_offloaded())
      if (d.op == "gemv" && d.reason.find("below OA_OFFLOAD_GEMV_MIN") != std::string::npos) below += d.count;
    CHECK(below == 1);
    CHECK(rel_error(y, ref) <= 1e-12);
  }
  {
    config_scope cs(with_gemv_min(oa_test::emulated_config(64 << 10), 200 * 150));
    const Eigen::VectorXd y = A * x;
    CHECK(rel_error(y, ref) <= 1e-12);
    const auto reps = oa::reports();
    REQUIRE(reps.size() == 1);
    CHECK(reps[0].op == "gemv");
    CHECK(reps[0].calls == std::vector<std::string>{"Eigen::gemv"});
    CHECK(reps[0].dims == "m=200 n=1 k=150");
    CHECK(reps[0].device == "host");
    CHECK(reps[0].placement_reason.find("matrix-vector product") != std::string::npos);
    CHECK(reps[0].h2d_bytes == 0);
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

// ---- coefficient-wise assignments ------------------------------------------------

TEST_CASE_TEMPLATE("coefficient-wise assignments run as engine stages and match Eigen", S, OA_TEST_SCALAR_TYPES) {
  using A = Eigen::Array<S, Eigen::Dynamic, 1>;
  const double tol = std::is_same_v<S, double> ? 1e-13 : 1e-5;
  const Eigen::Index n = 10007;  // not a multiple of any chunk
  const A a = (oa_test::random_matrix<A>(n, 1, 51) + S(1.5)), b = oa_test::random_matrix<A>(n, 1, 52) + S(2),
          c = oa_test::random_matrix<A>(n, 1, 53);
  for (const oa::config& cfg : {oa_test::host_config(), oa_test::emulated_config(24 << 10)}) {
    CAPTURE(cfg.device);
    cwise_differential(cfg, tol, [&] { return A((a * b + c).exp()); });
    cwise_differential(cfg, tol, [&] { return A(a * S(2) + S(1) - S(3) / b); });
    cwise_differential(cfg, tol, [&] { return A((a < b).select(a, b * c)); });
    cwise_differential(cfg, tol, [&] { return A((a > S(1.7)).select(S(1), c)); });
    cwise_differential(cfg, tol, [&] { return A(a.sqrt().log() + b.log2() - c.abs().square()); });
    cwise_differential(cfg, tol, [&] { return A(c.sin() * c.cos() + c.tan() - (c * S(0.5)).asin() + (c * S(0.5)).acos()); });
    cwise_differential(cfg, tol, [&] { return A(c.atan() + c.tanh() + c.erf() - a.pow(S(2.5))); });
    cwise_differential(cfg, tol, [&] { return A(a.min(b) + a.max(c) - (-a)); });
    cwise_differential(cfg, 1e-6, [&] {  // computed in float
      Eigen::ArrayXf r = (a.template cast<float>() * 2.0f).exp();
      return Eigen::ArrayXd(r.template cast<double>());
    });
    cwise_differential(cfg, tol, [&] {
      A r = c;
      r += a * b;
      r -= b.sqrt();
      r *= a;
      r /= b + S(1);
      return r;
    });
    cwise_differential(cfg, tol, [&] {
      A r = a;
      r = r * S(2) + b;  // the destination is an operand
      r = r.square();
      return r;
    });
  }
}

TEST_CASE("matrices, row-major storage, maps and contiguous blocks are assigned through the engine") {
  using MR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::MatrixXd A = oa_test::random_matrix<Eigen::MatrixXd>(120, 90, 61),
                        B = oa_test::random_matrix<Eigen::MatrixXd>(120, 90, 62);
  const MR R = oa_test::random_matrix<MR>(120, 90, 63);
  const oa::config cfg = oa_test::emulated_config(32 << 10);
  cwise_differential(cfg, 1e-13, [&] { return Eigen::MatrixXd(A + 2.0 * B); });
  cwise_differential(cfg, 1e-13, [&] { return Eigen::MatrixXd(A.cwiseProduct(B) - B); });
  cwise_differential(cfg, 1e-13, [&] {
    Eigen::MatrixXd M(120, 90);
    M.array() = A.array().exp() * B.array();
    return M;
  });
  cwise_differential(cfg, 1e-13, [&] { return MR(R * 3.0 + R.cwiseAbs()); });
  cwise_differential(cfg, 1e-13, [&] {
    Eigen::MatrixXd M = A;
    M.middleCols(10, 40) = (B.middleCols(20, 40).array() * 2.0).matrix();  // whole columns: contiguous
    return M;
  });
  cwise_differential(cfg, 1e-13, [&] {
    std::vector<double> store(120 * 90);
    Eigen::Map<Eigen::ArrayXd> m(store.data(), 120 * 90);
    m = Eigen::Map<const Eigen::ArrayXd>(A.data(), A.size()).sqrt().abs() + 1.0;
    return Eigen::ArrayXd(m);
  });
}

TEST_CASE("trees outside the supported set stay with Eigen, correct, and the report says why") {
  const Eigen::ArrayXd a = oa_test::random_array(5000, 0.1, 2, 71);
  const Eigen::MatrixXd m = oa_test::random_matrix<Eigen::MatrixXd>(100, 100, 72);
  config_scope cs(with_elements_min(oa_test::emulated_config(1 << 20), 0));
  const Eigen::ArrayXd s = a.sinh() * 2.0;  // no oa operation for sinh
  CHECK((s - (a.sinh() * 2.0).eval()).abs().maxCoeff() == 0.0);
  CHECK(declined_cwise("a coefficient-wise function oa does not have") >= 1);
  Eigen::MatrixXd rows(40, 100);
  rows = m.topRows(40) * 2.0;  // rows of a column-major matrix: strided
  CHECK(rows == (m.topRows(40) * 2.0).eval());
  CHECK(declined_cwise("not contiguous") >= 1);
  const Eigen::ArrayXd r = a.reverse() * 2.0;  // not coefficient-wise over storage: not taken at all
  CHECK(r(0) == a(a.size() - 1) * 2.0);
  CHECK(engine_cwise() == 0);
}

TEST_CASE("below OA_OFFLOAD_ELEMENTS_MIN Eigen assigns; at it, the engine") {
  const Eigen::ArrayXd a = oa_test::random_array(4096, 0.1, 2, 81);
  {
    config_scope cs(with_elements_min(oa_test::host_config(), 4097));
    const Eigen::ArrayXd r = a.exp() + a;
    CHECK(engine_cwise() == 0);
    CHECK(declined_cwise("below OA_OFFLOAD_ELEMENTS_MIN") == 1);
    CHECK((r - (a.exp() + a).eval()).abs().maxCoeff() <= 1e-13);
  }
  {
    config_scope cs(with_elements_min(oa_test::host_config(), 4096));
    const Eigen::ArrayXd r = a.exp() + a;
    CHECK(engine_cwise() == 1);
    CHECK((r - (a.exp() + a).eval()).abs().maxCoeff() <= 1e-13);
  }
}

TEST_CASE("a chain of statements pages through a budget far smaller than its arrays") {
  const std::size_t budget = 64 << 10;
  const std::size_t n = std::size_t{1} << 16;  // 512 KiB per array
  const Eigen::ArrayXd lat = oa_test::random_array(n, -1.5, 1.5, 91), lon = oa_test::random_array(n, -3, 3, 92);
  Eigen::ArrayXd ref;
  {
    config_scope eigen(with_elements_min(oa_test::host_config(), std::numeric_limits<std::uint64_t>::max()));
    Eigen::ArrayXd dlat = (lat - 0.7) / 2.0;
    Eigen::ArrayXd dlon = (lon - 0.3) / 2.0;
    Eigen::ArrayXd h = dlat.sin().square() + lat.cos() * std::cos(0.7) * dlon.sin().square();
    ref = 2.0 * 6371.0 * h.sqrt().asin();
  }
  config_scope cs(with_elements_min(oa_test::emulated_config(budget), 0));
  Eigen::ArrayXd dlat = (lat - 0.7) / 2.0;
  Eigen::ArrayXd dlon = (lon - 0.3) / 2.0;
  Eigen::ArrayXd h = dlat.sin().square() + lat.cos() * std::cos(0.7) * dlon.sin().square();
  const Eigen::ArrayXd d = 2.0 * 6371.0 * h.sqrt().asin();
  const auto reports = oa::reports();
  CHECK((d - ref).abs().maxCoeff() <= 1e-9);
  REQUIRE(reports.size() == 4);
  for (const auto& r : reports) {
    CHECK(r.op == "cwise");
    CHECK(r.dims == "elements=65536");
    CHECK(r.device.rfind("emulated", 0) == 0);
    CHECK(r.chunks > 1);
    CHECK(r.peak_device_bytes <= budget);
  }
}

TEST_CASE("a failing engine leaves an assignment to Eigen, and says why") {
  // A budget too small for one coefficient of each array: the plan fails.
  config_scope cs(with_elements_min(oa_test::emulated_config(16), 0));
  const Eigen::ArrayXd a = oa_test::random_array(3000, 0.1, 2, 95);
  Eigen::ArrayXd r = a;
  r = r * 2.0 + a.exp();  // in place: the destination is an operand
  CHECK((r - (a * 2.0 + a.exp())).abs().maxCoeff() <= 1e-13);
  CHECK(declined_cwise("the engine failed") == 1);
  oa::evaluate();
}

TEST_CASE("the fused kernels of Eigen assignments compile for the GPU") {
  // The emulated device takes each stage as one generated kernel; each
  // kernel's source is compiled with NVRTC here (no GPU needed).
  std::vector<oa::detail::kernel_source> kernels;
  oa::detail::set_kernel_observer([&](const oa::detail::kernel_source& k) { kernels.push_back(k); });
  oa::config cfg = with_elements_min(oa_test::emulated_config(1 << 20), 0);
  cfg.emulated_fused = true;
  {
    config_scope cs(cfg);
    const Eigen::ArrayXd a = oa_test::random_array(5000, 0.1, 0.9, 101), b = oa_test::random_array(5000, 1, 2, 102);
    Eigen::ArrayXd r = (a < b * 0.5).select(a.tan() + a.acos(), a.atan() * a.tanh()) + a.pow(1.5) + b.erf();
    r += a.min(b) - a.max(b) + (a != b).cast<double>();
    Eigen::ArrayXf f = a.cast<float>().sqrt() * 2.0f;
    CHECK((r - ((a < b * 0.5).select(a.tan() + a.acos(), a.atan() * a.tanh()) + a.pow(1.5) + b.erf() + a.min(b) -
                a.max(b) + (a != b).cast<double>()))
              .abs()
              .maxCoeff() <= 1e-12);
    CHECK((f - a.cast<float>().sqrt() * 2.0f).abs().maxCoeff() <= 1e-6f);
    // Reductions: a partial per block (CUB), of a leaf and of an operation.
    CHECK(std::abs((a * b).sum() - a.matrix().dot(b.matrix())) <= 1e-9);
    CHECK(a.minCoeff() > 0.0);
    CHECK(f.prod() >= 0.0f);
  }
  oa::detail::set_kernel_observer({});
  REQUIRE(kernels.size() >= 3);
#if defined(OA_HAS_CUDA)
  for (const auto& k : kernels) {
    std::string log;
    try {
      CHECK(oa::cuda::compile(k, 9, 0).cubin.size() > 0);
    } catch (const std::exception& e) {
      log = e.what();
    }
    CHECK_MESSAGE(log.empty(), log, "\n--- source ---\n", k.code);
  }
#endif
}

TEST_CASE("a runtime of the program's own carries its thresholds to the hooks") {
  const Eigen::MatrixXd A = oa_test::random_matrix<Eigen::MatrixXd>(64, 64, 111), B = A.transpose();
  oa::runtime eigen_only(with_gemm_min(oa_test::host_config(), std::numeric_limits<std::uint64_t>::max()));
  oa::runtime offloading(with_gemm_min(oa_test::host_config(), 0));
  {
    oa::runtime::use on(eigen_only);
    const Eigen::MatrixXd C = A * B;
    CHECK(eigen_only.reports().empty());
  }
  {
    oa::runtime::use on(offloading);
    const Eigen::MatrixXd C = A * B;
    CHECK(offloading.reports().size() == 1);
  }
}

// ---- reductions ---------------------------------------------------------------------

namespace {
std::size_t engine_reductions() {
  std::size_t n = 0;
  for (const auto& r : oa::reports()) n += r.op == "reduction" && r.error.empty();
  return n;
}
}  // namespace

TEST_CASE_TEMPLATE("reductions of arrays, matrices and expressions run through the engine and match Eigen", S,
                   OA_TEST_SCALAR_TYPES) {
  using A = Eigen::Array<S, Eigen::Dynamic, 1>;
  using M = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const double tol = std::is_same_v<S, double> ? 1e-12 : 2e-4;  // summation order differs
  const A a = oa_test::random_matrix<A>(20011, 1, 121) + S(1.5), b = oa_test::random_matrix<A>(20011, 1, 122);
  const M m = oa_test::random_matrix<M>(150, 131, 123);
  const Eigen::Matrix<S, Eigen::Dynamic, 1> v = a.matrix(), w = b.matrix();
  const A p = A::Constant(3000, S(1)) + oa_test::random_matrix<A>(3000, 1, 124) * S(1e-3);
  const auto close = [&](double got, double ref) { return std::abs(got - ref) <= tol * std::max(1.0, std::abs(ref)); };
  for (const oa::config& cfg : {oa_test::host_config(), oa_test::emulated_config(16 << 10)}) {
    CAPTURE(cfg.device);
    std::vector<double> ref, got;
    const auto all = [&] {
      return std::vector<double>{double(a.sum()),          double(a.mean()),         double(p.prod()),
                                 double(b.minCoeff()),     double(b.maxCoeff()),     double(m.sum()),
                                 double(v.squaredNorm()),  double(v.norm()),         double(v.dot(w)),
                                 double((a * b).sum()),    double((a - b).abs().maxCoeff()),
                                 double(m.cwiseAbs().minCoeff()), double(a.exp().mean())};
    };
    {
      config_scope eigen(with_elements_min(cfg, std::numeric_limits<std::uint64_t>::max()));
      ref = all();
      CHECK(engine_reductions() == 0);
    }
    {
      config_scope engine(with_elements_min(cfg, 0));
      got = all();
      CHECK(engine_reductions() == ref.size());
    }
    for (std::size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(i);
      CHECK(close(got[i], ref[i]));
    }
  }
}

TEST_CASE("reductions Eigen keeps: below the threshold, index-returning minCoeff, column-wise") {
  const Eigen::ArrayXd a = oa_test::random_array(4000, -1, 1, 131);
  const Eigen::MatrixXd m = oa_test::random_matrix<Eigen::MatrixXd>(300, 200, 132);
  config_scope cs(with_elements_min(oa_test::host_config(), 5000));
  double by_hand = 0;
  for (const double x : a) by_hand += x;
  CHECK(std::abs(a.sum() - by_hand) <= 1e-12);  // below 5000 coefficients: Eigen's
  CHECK(engine_reductions() == 0);
  std::size_t below = 0;
  for (const auto& d : oa::not_offloaded())
    if (d.op == "reduction" && d.reason.find("below OA_OFFLOAD_ELEMENTS_MIN") != std::string::npos) below += d.count;
  CHECK(below == 1);
  Eigen::Index row = -1, col = -1;
  const double smallest = m.minCoeff(&row, &col);  // a visitor: Eigen's
  CHECK(m(row, col) == smallest);
  const Eigen::RowVectorXd sums = m.colwise().sum();  // 200 reductions of 300: below the threshold
  CHECK(std::abs(sums.sum() - m.sum()) <= 1e-9);
}

namespace {
struct link_totals {
  std::size_t h2d = 0, saved = 0;
};
/// Bytes copied in, and read from copies already on the device instead,
/// since the last clear_reports(); clears them.
link_totals take_link_totals() {
  link_totals t;
  for (const auto& r : oa::reports()) {
    t.h2d += r.h2d_bytes;
    t.saved += r.resident_bytes_saved;
  }
  oa::clear_reports();
  return t;
}
}  // namespace

TEST_CASE("statements read what earlier statements left on the device, unless the program wrote it since") {
  const std::size_t n = std::size_t{1} << 15;  // 256 KiB per array
  const std::size_t bytes = n * sizeof(double);
  const Eigen::ArrayXd x = oa_test::random_array(n, 0.1, 2, 121);
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    oa::config c = with_elements_min(oa_test::emulated_config(8 << 20), 0);
    c.emulated_fused = fused;
    config_scope cs(c);
    Eigen::ArrayXd a = x.exp();  // x is copied in, a written out: both stay
    CHECK(take_link_totals().h2d == bytes);
    Eigen::ArrayXd b = a * 2.0 + x;  // reads both from the device
    link_totals t = take_link_totals();
    CHECK(t.h2d == 0);
    CHECK(t.saved == 2 * bytes);
    a = a.sqrt();  // updated in place in its copy
    CHECK(take_link_totals().h2d == 0);
    // The program writes a between statements, through its pointer: its
    // copy no longer holds it, and only its bytes can tell.
    a(7) = 1e6;
    for (Eigen::Index i = 100; i < 150; ++i) a.data()[i] = -3.0;
    b = a + b;
    t = take_link_totals();
    CHECK(t.h2d == bytes);
    CHECK(t.saved == bytes);
    // Eigen again, on the same inputs.
    Eigen::ArrayXd ra = x.exp().sqrt();
    ra(7) = 1e6;
    for (Eigen::Index i = 100; i < 150; ++i) ra.data()[i] = -3.0;
    const Eigen::ArrayXd rb = ra + (x.exp() * 2.0 + x);
    CHECK((a - ra).abs().maxCoeff() <= 1e-12);
    CHECK((b - rb).abs().maxCoeff() <= 1e-9);
  }
}

TEST_CASE("copies kept between statements give way to the budget, and faults never leave a stale one") {
  const std::size_t n = std::size_t{1} << 15;
  const Eigen::ArrayXd x = oa_test::random_array(n, 0.1, 2, 131);
  Eigen::ArrayXd ref = x;
  for (int i = 0; i < 6; ++i) ref = (ref * 1.5 + x).sqrt();
  // 1 MiB holds three 256 KiB copies at most: each statement evicts older ones.
  for (const std::uint64_t fail : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{9}}) {
    CAPTURE(fail);
    oa::config c = with_elements_min(oa_test::emulated_config(1 << 20), 0);
    c.fail_launch = fail;
    config_scope cs(c);
    std::vector<Eigen::ArrayXd> a(7);
    a[0] = x;
    std::size_t peak = 0, reruns = 0, evicted = 0, saved = 0;
    for (std::size_t i = 1; i < a.size(); ++i) {
      a[i] = (a[i - 1] * 1.5 + x).sqrt();
      for (const auto& r : oa::reports()) {
        peak = std::max(peak, r.peak_device_bytes);
        reruns += r.host_reruns;
        evicted += r.evicted_bytes;
        saved += r.resident_bytes_saved;
      }
      oa::clear_reports();
    }
    CHECK((a.back() - ref).abs().maxCoeff() <= 1e-12);
    CHECK(peak <= std::size_t{1} << 20);
    CHECK(saved > 0);
    CHECK(evicted > 0);
    CHECK((reruns > 0) == (fail != 0));
  }
}

// ---- minCoeff and maxCoeff with NaN and infinities ------------------------------------
// The rule (README, reductions): any NaN among the coefficients gives NaN,
// wherever it is and however the engine cuts the array; otherwise the exact
// smallest (largest) coefficient, infinities included. Plain Eigen's
// PropagateNaN computes the same, and is what each path is checked against.

namespace {

template <class S>
using array_of = Eigen::Array<S, Eigen::Dynamic, 1>;

/// Named inputs of 20011 coefficients (paged through 64 KiB: several chunks):
/// NaN first, in the middle, last, only in the last chunk, everywhere, and
/// infinities without NaN.
template <class S>
std::vector<std::pair<const char*, array_of<S>>> nan_cases() {
  const Eigen::Index n = 20011;
  const S nan = std::numeric_limits<S>::quiet_NaN(), inf = std::numeric_limits<S>::infinity();
  const array_of<S> base = oa_test::random_matrix<array_of<S>>(n, 1, 141);
  std::vector<std::pair<const char*, array_of<S>>> cases;
  const auto with = [&](const char* name, std::initializer_list<std::pair<Eigen::Index, S>> set) {
    array_of<S> a = base;
    for (const auto& [i, v] : set) a(i) = v;
    cases.emplace_back(name, std::move(a));
  };
  with("no NaN", {});
  with("NaN first", {{0, nan}});
  with("NaN in the middle", {{n / 2, nan}});
  with("NaN last", {{n - 1, nan}});
  with("NaN in a later chunk only", {{n - 1000, nan}});
  with("NaN first and -inf later", {{0, nan}, {n - 3, -inf}});
  with("+inf and -inf", {{5, inf}, {n - 5, -inf}});
  with("+inf first", {{0, inf}});
  cases.emplace_back("all NaN", array_of<S>::Constant(n, nan));
  cases.emplace_back("all +inf", array_of<S>::Constant(n, inf));
  return cases;
}

/// Equal values, NaN equal to NaN.
bool same_value(double got, double want) { return std::isnan(want) ? std::isnan(got) : got == want; }

}  // namespace

TEST_CASE_TEMPLATE("minCoeff and maxCoeff: any NaN gives NaN, through the hook and lazily, on every device and chunking",
                   S, OA_TEST_SCALAR_TYPES) {
  oa::config fused = with_elements_min(oa_test::emulated_config(64 << 10), 0);
  fused.emulated_fused = true;
  for (const oa::config& cfg :
       {with_elements_min(oa_test::host_config(), 0), with_elements_min(oa_test::emulated_config(64 << 10), 0), fused}) {
    CAPTURE(cfg.device);
    CAPTURE(cfg.emulated_fused);
    for (const auto& [name, a] : nan_cases<S>()) {
      const std::string input = name;
      CAPTURE(input);
      const double want_min = a.template minCoeff<Eigen::PropagateNaN>();
      const double want_max = a.template maxCoeff<Eigen::PropagateNaN>();
      const double want_min2 = (a * S(2)).template minCoeff<Eigen::PropagateNaN>();
      CHECK(std::isnan(want_min) == a.isNaN().any());
      config_scope cs(cfg);
      // Through the hook: a leaf, and an operation reduced in the same call.
      CHECK(same_value(a.minCoeff(), want_min));
      CHECK(same_value(a.maxCoeff(), want_max));
      CHECK(same_value((a * S(2)).minCoeff(), want_min2));
      CHECK(engine_reductions() == 3);
      // Lazily.
      const auto la = oa::ref(a);
      CHECK(same_value(oa::min_coeff(la).get(), want_min));
      CHECK(same_value(oa::max_coeff(la).get(), want_max));
      CHECK(same_value(oa::min_coeff(la * S(2)).get(), want_min2));
      if (cfg.device == "emulated") {
        std::size_t chunks = 0;
        for (const auto& r : oa::reports()) chunks = std::max<std::size_t>(chunks, r.chunks);
        CHECK(chunks > 1);  // paged: partials of several chunks merged
      }
    }
  }
}
