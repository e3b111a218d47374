// A matrix product larger than the device's memory, then element-wise work
// on its result, through oa:
//
//   oa_example_matrix_product [n]        (default 2048)
//
// Without OA_DEVICE set, it runs on the emulated device with a budget of half
// the operands: A and B are paged tile by tile, and C (a third of the
// operands) stays on the device for the scaling; with OA_DEVICE=cuda on a
// GPU, through cuBLAS. It prints what each stage did and checks the result
// against plain Eigen.

#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <oa/oa.hpp>
#include <string>

namespace {

// Element-wise work on a matrix, a column block at a time: y = s * x.
inline constexpr auto scale = oa::annotate<"example::scale">(
    oa::cpu([](const auto& x, const double& s, auto& y) { y = s * x; }),
    oa::args(oa::in<oa::split::cols>("x"), oa::scalar<double>("s"), oa::out<oa::split::cols, Eigen::MatrixXd>("y")),
    oa::device_fn(oa::elementwise(oa::ops::mul{})));

}  // namespace

int main(int argc, char** argv) {
  try {
    const Eigen::Index n = argc > 1 ? std::stol(argv[1]) : 2048;
    if (n <= 0) throw std::invalid_argument("n must be positive");
    oa::config c = oa::current_config();
    if (!std::getenv("OA_DEVICE") && !std::getenv("OA_CONFIG")) {
      c.device = "emulated";
      c.device_memory = std::max<std::size_t>(3 * n * n * sizeof(double) / 2, std::size_t{1} << 16);
      c.host_threshold = 0;
      oa::set_config(c);
    }
    const Eigen::MatrixXd A = Eigen::MatrixXd::Random(n, n), B = Eigen::MatrixXd::Random(n, n);

    // Recorded, not run: the product's result is read by `scale` only, so on
    // a device it stays there between the two stages.
    oa::lazy<Eigen::MatrixXd> Y = scale(oa::linalg::product(A, B), 0.5);
    const Eigen::MatrixXd& y = Y.get();

    std::printf("device %s, budget %.1f MiB, operands %.1f MiB\n", oa::current_device().name().c_str(),
                static_cast<double>(oa::current_device().memory_budget()) / (1 << 20),
                3.0 * static_cast<double>(n * n * sizeof(double)) / (1 << 20));
    for (const auto& s : oa::reports()) {
      std::printf("%-22s on %-8s %5zu %-6s in %.3f s; moved in %.1f MiB, out %.1f MiB; peak %.1f MiB",
                  s.calls.front().c_str(), s.device.c_str(), s.chunks, s.tiling.empty() ? "chunks" : "tiles",
                  s.seconds, static_cast<double>(s.h2d_bytes) / (1 << 20), static_cast<double>(s.d2h_bytes) / (1 << 20),
                  static_cast<double>(s.peak_device_bytes) / (1 << 20));
      if (s.resident_bytes) std::printf("; result kept on the device (%.1f MiB)", static_cast<double>(s.resident_bytes) / (1 << 20));
      if (s.resident_bytes_saved)
        std::printf("; read %.1f MiB where it was computed", static_cast<double>(s.resident_bytes_saved) / (1 << 20));
      std::printf("\n");
      if (!s.tiling.empty()) std::printf("  %s\n", s.tiling.c_str());
    }
    const Eigen::MatrixXd ref = 0.5 * (A * B);
    const double err = (y - ref).cwiseAbs().maxCoeff() / ref.cwiseAbs().maxCoeff();
    std::printf("max relative error against Eigen: %.2e\n", err);
    return err <= 1e-12 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
}
