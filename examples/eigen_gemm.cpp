// A plain Eigen program, as its author wrote it: a few dense products (and
// matrix-vector products) of the kinds numerical code makes, then checksums of the results. It includes
// nothing of oa. examples/CMakeLists.txt builds it twice from this source:
// as it is (oa_example_eigen_gemm), and with oa_offload()
// (oa_example_eigen_gemm_offload), where its products run through oa's engine.
// Both print the same checksums, within floating-point rounding.
//
//   oa_example_eigen_gemm_offload 2048
//   OA_DEVICE=emulated OA_DEVICE_MEMORY=16MiB OA_OFFLOAD_GEMM_MIN=0 OA_REPORT=report.json \
//     oa_example_eigen_gemm_offload 1024

#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>

namespace {

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = uniform(rng);
  return m;
}

// One line per result: its sum, three entries and its Frobenius norm.
// Computed in double whatever the scalar, so that they compare the products
// rather than the checksums' own rounding; printed with 16 significant
// digits for double, 9 for float (all a float has), finer than any
// tolerance the two builds are compared with.
template <class Derived>
void print_checksums(const char* what, const Eigen::MatrixBase<Derived>& result) {
  const bool is_float = std::is_same<typename Derived::Scalar, float>::value;
  const int digits = is_float ? 8 : 15;
  const Eigen::MatrixXd m = result.template cast<double>();
  const Eigen::Index r = m.rows() - 1, c = m.cols() - 1;
  std::printf("%-52s %-6s  sum %.*e  (0,0) %.*e  (%ld,0) %.*e  (%ld,%ld) %.*e  norm %.*e\n", what,
              is_float ? "float" : "double", digits, m.sum(), digits, m(0, 0), static_cast<long>(r), digits,
              m(r, 0), static_cast<long>(r), static_cast<long>(c), digits, m(r, c), digits, m.norm());
}

}  // namespace

int main(int argc, char** argv) {
  long n = 1024;
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [n]  (the matrices are n x n; default 1024)\n", argv[0]);
    return 2;
  }
  if (argc == 2) {
    char* end = nullptr;
    n = std::strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || n < 1 || n > 65536) {
      std::fprintf(stderr, "%s: n: '%s' is not a matrix size from 1 to 65536\n", argv[0], argv[1]);
      return 2;
    }
  }

  std::mt19937_64 rng(42);
  const Eigen::MatrixXd A = random_matrix(n, n, rng);
  const Eigen::MatrixXd B = random_matrix(n, n, rng);
  std::printf("n = %ld\n", n);

  Eigen::MatrixXd C(n, n);
  const auto t0 = std::chrono::steady_clock::now();
  C = A * B;
  // On stderr: the builds' outputs are compared line by line.
  std::fprintf(stderr, "C = A * B: %.3f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  print_checksums("C = A * B", C);

  C.noalias() += 0.5 * A.transpose() * B;
  print_checksums("C += 0.5 * A^T * B", C);

  // Blocks of larger matrices: strided operands, and a strided destination.
  const Eigen::Index h = (n + 1) / 2;
  C.topLeftCorner(h, h).noalias() -= A.topRows(h) * B.leftCols(h);
  print_checksums("C.topLeftCorner(h,h) -= A.topRows(h) * B.leftCols(h)", C);
  // A matrix-vector product, and a vector-matrix one (Eigen's GEMV kernel).
  const Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(n, -1.0, 1.0);
  Eigen::VectorXd y = C * x;
  print_checksums("y = C * x", y);
  y.noalias() -= (x.transpose() * A).transpose();
  print_checksums("y -= (x^T * A)^T", y);

  const Eigen::MatrixXf Af = A.cast<float>(), Bf = B.cast<float>();
  Eigen::MatrixXf Cf(n, n);
  Cf = Af * Bf;
  print_checksums("Cf = Af * Bf", Cf);
  return 0;
}
