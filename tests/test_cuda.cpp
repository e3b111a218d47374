// The CUDA device: the bodies every device runs, on a GPU. Without a usable
// GPU the executable exits 77 (CTest: skipped), or fails when
// OA_TEST_REQUIRE_GPU=1.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>
#include <functional>
#include <stdexcept>

#include "bodies.hpp"
#include "core/product_rates.hpp"
#include "device_conformance.hpp"
#include "oa/linalg/gemm.hpp"
#include "oa/cuda/device.hpp"

#include <cublas_v2.h>

namespace {

oa::config cuda_config(std::size_t budget = std::size_t{256} << 20) {
  oa::config c = oa_test::host_config();
  c.device = "cuda";
  c.device_memory = budget;
  c.host_threshold = 0;
  return c;
}

// GPU double-precision math is within an ulp or two of glibc's.
constexpr double gpu_tolerance = 1e-12;

/// The CUDA device calls entries at submission: host work goes on the stream
/// as a host function, to run in stream order.
struct enqueue_host_func {
  static void run(const oa::stream_view& v, std::function<void()> f) {
    auto* p = new std::function<void()>(std::move(f));
    const cudaError_t e = cudaLaunchHostFunc(
        oa::cuda::native_stream(v),
        [](void* q) {
          auto* g = static_cast<std::function<void()>*>(q);
          (*g)();
          delete g;
        },
        p);
    if (e != cudaSuccess) {
      delete p;
      throw std::runtime_error(std::string("cudaLaunchHostFunc: ") + cudaGetErrorString(e));
    }
  }
};

template <class M>
double max_rel(const M& got, const M& ref) {
  const double scale = std::max(1.0, static_cast<double>(ref.cwiseAbs().maxCoeff()));
  return static_cast<double>((got - ref).cwiseAbs().maxCoeff()) / scale;
}

}  // namespace

TEST_CASE("cuda: the launch contract, as every device keeps it") {
  auto dev = oa::cuda::make_device({});
  oa_conformance::all<enqueue_host_func>(*dev);
}

TEST_CASE("cuda: the rates the planner sees are measured and plausible") {
  auto dev = oa::cuda::make_device({});
  const oa::device_rates r = dev->rates();
  MESSAGE("h2d ", r.h2d / 1e9, " GB/s, d2h ", r.d2h / 1e9, ", both ways ", r.both_ways / 1e9, ", device memory ",
          r.kernel_bytes / 1e9, ", product ", r.gemm_flops[1] / 1e12, " TFLOP/s double");
  // Any GPU's link moves between 1 GB/s and 1 TB/s; both ways together at
  // least one way's rate and at most their sum (with a tenth of slack for timing).
  CHECK(r.h2d > 1e9);
  CHECK(r.h2d < 1e12);
  CHECK(r.d2h > 1e9);
  CHECK(r.d2h < 1e12);
  CHECK(r.both_ways >= 0.9 * std::min(r.h2d, r.d2h));
  CHECK(r.both_ways <= 1.1 * (r.h2d + r.d2h));
  CHECK(r.kernel_bytes > r.h2d);
  CHECK(dev->rates().h2d == r.h2d);  // measured once
}

TEST_CASE("cuda: cuBLAS rates by tile shape are measured, near the in-core rate for large steps") {
  auto dev = oa::cuda::make_device({});
  oa::detail::forget_product_rates();
  oa::detail::contraction_desc d;
  d.elem_bytes = 8;
  d.device = oa::linalg::detail::gpu_step<double>(1.0, 0.0, false, false);
  const auto c = oa::detail::product_rates(*dev, d, d.device, dev->memory_budget(), dev->rates().gemm_flops[1]);
  REQUIRE(c);
  MESSAGE("reference ", c->reference, ": ", c->flops / 1e12, " TFLOP/s double, unaligned ", c->unaligned,
          ", k = 64: ", c->fraction[2].front().second);
  CHECK(c->flops > 1e11);  // any GPU with cuBLAS does a large DGEMM above 0.1 TFLOP/s
  if (dev->rates().gemm_flops[1] > 0) CHECK(c->flops < 1.5 * dev->rates().gemm_flops[1]);
  CHECK(c->fraction[2].front().second < 1.0);  // k = 64 steps run below the reference's rate
  CHECK(dev->bytes_in_use() == 0);
}

TEST_CASE_TEMPLATE("cuda: products through cuBLAS match Eigen, paged through a small budget", M, Eigen::MatrixXd,
                   Eigen::MatrixXf) {
  using S = typename M::Scalar;
  const double tol = std::is_same_v<S, double> ? 1e-12 : 1e-5;
  oa_test::config_scope cs(cuda_config(std::size_t{4} << 20));  // operands below are ~4x this
  const Eigen::Index m = 700, n = 650, k = 800;
  for (const auto oa_ : {oa::linalg::op::none, oa::linalg::op::transpose})
    for (const auto ob : {oa::linalg::op::none, oa::linalg::op::transpose}) {
      const M A = oa_ == oa::linalg::op::none ? M(M::Random(m, k)) : M(M::Random(k, m));
      const M B = ob == oa::linalg::op::none ? M(M::Random(k, n)) : M(M::Random(n, k));
      const M C0 = M::Random(m, n);
      M ref = S(0.5) * C0;
      ref.noalias() += S(2) * (oa_ == oa::linalg::op::none ? M(A) : M(A.transpose())) *
                       (ob == oa::linalg::op::none ? M(B) : M(B.transpose()));
      M C = C0;
      oa::linalg::gemm(S(2), A, B, S(0.5), C, oa_, ob);
      oa::evaluate();
      CHECK(max_rel(C, ref) <= tol);
    }
  const auto t = oa_test::run_total();
  CHECK(t.device.rfind("cuda", 0) == 0);
  CHECK(t.peak_device_bytes <= std::size_t{4} << 20);
  CHECK(t.h2d_bytes > 0);
}

TEST_CASE("cuda: a product read by element-wise work, and a GEMM whose C is the caller's") {
  oa_test::config_scope cs(cuda_config(std::size_t{16} << 20));
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(512, 384), B = Eigen::MatrixXd::Random(384, 256);
  oa::lazy<Eigen::MatrixXd> P = oa::linalg::product(A, B);
  oa::lazy<Eigen::MatrixXd> Q = oa::linalg::product(P, Eigen::MatrixXd(Eigen::MatrixXd::Identity(256, 256)));
  CHECK(max_rel(Q.get(), Eigen::MatrixXd(A * B)) <= 1e-12);
}

// A device function given as code: cuBLAS on the stream oa gives it (no
// nvcc needed); the twin is the CPU function.
inline constexpr auto scaled_copy = oa::annotate<"test::scaled_copy">(
    oa::cpu([](std::span<const double> x, double k, std::span<double> y) {
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = k * x[i];
    }),
    oa::args(oa::in<oa::split::contiguous>("x"), oa::scalar<double>("k"),
             oa::out<oa::split::contiguous, std::vector<double>>("y")),
    oa::device_fn(oa::kernel([](const oa::stream_view& s, std::span<const double> x, double k, std::span<double> y) {
      cublasHandle_t h = oa::cuda::blas_handle(s);
      const int n = static_cast<int>(x.size());
      if (cublasDcopy(h, n, x.data(), 1, y.data(), 1) != CUBLAS_STATUS_SUCCESS ||
          cublasDscal(h, n, &k, y.data(), 1) != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error("test::scaled_copy: cuBLAS refused the chunk");
    })));

TEST_CASE("cuda: a device function given as code runs on oa's streams over device memory, paged") {
  oa_test::config_scope cs(cuda_config(std::size_t{1} << 20));
  std::vector<double> x(1 << 20);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 1000) - 500.0;
  const std::vector<double> y = scaled_copy(x, 0.25).get();
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(y[i] == 0.25 * x[i]);
  const auto reps = oa::reports();
  REQUIRE(reps.size() == 1);
  CHECK(reps[0].device.find("cuda") != std::string::npos);
  CHECK(reps[0].chunks > 4);
  CHECK(reps[0].host_reruns == 0);
  CHECK(reps[0].peak_device_bytes <= std::size_t{1} << 20);
}

TEST_CASE("cuda: the workloads agree with plain Eigen") {
  oa_test::workloads_match_eigen(cuda_config(), gpu_tolerance);
}

TEST_CASE("cuda: paging through a small budget") { oa_test::paging_within_budget(cuda_config(), gpu_tolerance); }

TEST_CASE("cuda: a user library, in-place updates and reductions") {
  oa_test::library_calls(cuda_config(), gpu_tolerance);
}

TEST_CASE("cuda: stages run as one fused kernel per chunk, copies overlap kernels") {
  const std::size_t n = std::size_t{1} << 24;
  const Eigen::ArrayXd x = oa_test::random_array(n, 0.5, 2, 301), y = oa_test::random_array(n, 0.5, 2, 302);
  const Eigen::ArrayXd ref = (x.exp() * y + 1.0).sqrt();
  oa::config c = cuda_config(std::size_t{64} << 20);
  const auto run = [&] {
    oa::lazy<Eigen::ArrayXd> r = exp(oa::ref(x)) * oa::ref(y) + 1.0;
    r = sqrt(r);
    CHECK(oa_test::mixed_error(r.get(), ref) <= gpu_tolerance);
  };
  {
    oa_test::config_scope warm(c);
    run();  // compiles the stage's kernel: the timed run below does not
  }
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() / ("oa-test-cuda-trace-" + std::to_string(::getpid()) + ".json");
  c.trace = trace.string();
  {
    oa_test::config_scope cs(c);
    run();
    const auto t = oa_test::run_total();
    CHECK(t.device.rfind("cuda", 0) == 0);
    CHECK(t.chunks >= 8);
    CHECK(t.peak_device_bytes <= std::size_t{64} << 20);
    MESSAGE("wall ", t.seconds, " s; busy h2d ", t.h2d_seconds, " compute ", t.compute_seconds, " d2h ",
            t.d2h_seconds);
    oa::runtime::current().write_outputs();
  }
  // The claim itself, read off the GPU's timeline: a copy in runs while a
  // kernel of another chunk runs, on another stream.
  std::ifstream in(trace);
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(trace);
  struct span {
    double begin, end;
    int track;
  };
  std::vector<span> copies, kernels;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const span sp{e.at("ts").get<double>(), e.at("ts").get<double>() + e.at("dur").get<double>(),
                  e.at("tid").get<int>()};
    (e.at("name") == "h2d" ? copies : e.at("name") == "d2h" ? copies : kernels).push_back(sp);
  }
  REQUIRE(!copies.empty());
  REQUIRE(!kernels.empty());
  bool overlapped = false;
  for (const auto& cp : copies)
    for (const auto& k : kernels) overlapped |= cp.track != k.track && cp.begin < k.end && k.begin < cp.end;
  CHECK(overlapped);
}

TEST_CASE("cuda: a budget too small for the smallest tiles is an error at get(), not a crash") {
  oa_test::config_scope cs(cuda_config(1024));
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(300, 300), B = Eigen::MatrixXd::Random(300, 300);
  const Eigen::MatrixXd A0 = A;
  oa::lazy<Eigen::MatrixXd> P = oa::linalg::product(A, B);
  const std::string msg = oa_test::message_of([&] { P.get(); });
  CAPTURE(msg);
  std::string where;  // on failure: where the product went, and why
  for (const auto& r : oa::reports()) where += r.device + ": " + r.placement_reason + "; " + r.error + "\n";
  INFO(where);
  CHECK(msg.find("OA_DEVICE_MEMORY") != std::string::npos);
  CHECK_THROWS_AS(P.get(), oa::plan_error);
  CHECK(A == A0);
}

int main(int argc, char** argv) {
  ::setenv("OA_KERNEL_CACHE", "off", 0);  // the user's kernel cache left alone (test_main.cpp)
  std::string why;
  if (oa::cuda::usable_devices(&why) == 0) {
    const char* require = std::getenv("OA_TEST_REQUIRE_GPU");
    if (require && std::strcmp(require, "1") == 0) {
      std::fprintf(stderr, "test_cuda: OA_TEST_REQUIRE_GPU=1 but no usable GPU (%s)\n", why.c_str());
      return 1;
    }
    std::printf("test_cuda: skipped, no usable GPU (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
