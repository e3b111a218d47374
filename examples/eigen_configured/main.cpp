// A plain Eigen program that configures Eigen itself before including it,
// as test suites and libraries do: an assertion macro that throws, a 32-bit
// index type, a matrix plugin, matrices initialised with NaN. It includes
// nothing of oa. examples/CMakeLists.txt builds it as it is
// (oa_example_eigen_configured) and with oa_offload()
// (oa_example_eigen_configured_offload): both take this configuration, and
// print the same lines, the product and the coefficient-wise statements
// running through oa's engine in the second.
//
//   OA_DEVICE=emulated OA_DEVICE_MEMORY=1MiB OA_OFFLOAD_GEMM_MIN=0 OA_OFFLOAD_ELEMENTS_MIN=0 \
//     oa_example_eigen_configured_offload 300

#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

// The program's own assertion: an exception its checks can catch.
struct eigen_assertion : std::logic_error {
  using std::logic_error::logic_error;
};
#define eigen_assert(x) \
  do {                  \
    if (!(x)) throw eigen_assertion("eigen_assert failed: " #x); \
  } while (false)
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int
#define EIGEN_MATRIX_PLUGIN "plugin.h"
#define EIGEN_INITIALIZE_MATRICES_BY_NAN

#include <Eigen/Dense>

namespace {

Eigen::MatrixXd random_matrix(int rows, int cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  Eigen::MatrixXd m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = uniform(rng);
  return m;
}

void print(const char* what, const Eigen::MatrixXd& m) {
  std::printf("%-28s double  sum %.15e  corner trace %.15e  norm %.15e\n", what, m.sum(), m.corner_trace(),
              m.norm());
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc == 2 ? std::atoi(argv[1]) : 300;
  if (argc > 2 || n < 2 || n > 20000) {
    std::fprintf(stderr, "usage: %s [n]  (n x n matrices, n from 2 to 20000; default 300)\n", argv[0]);
    return 2;
  }
  static_assert(sizeof(Eigen::Index) == sizeof(int), "EIGEN_DEFAULT_DENSE_INDEX_TYPE is the program's");
  std::printf("index bytes %d\n", static_cast<int>(sizeof(Eigen::Index)));
  std::mt19937_64 rng(7);
  const Eigen::MatrixXd A = random_matrix(n, n, rng), B = random_matrix(n, n, rng);

  Eigen::MatrixXd C = A * B;  // a product
  print("C = A B", C);
  Eigen::MatrixXd D(n, n);  // NaN until assigned: the configuration's
  D = (A.array() * 2.0 + B.array().abs().sqrt()).matrix();  // a coefficient-wise statement
  print("D = 2 A + sqrt|B|", D);
  std::printf("D before assignment was NaN: %s\n", [&] {
    Eigen::MatrixXd fresh(2, 2);
    return fresh.array().isNaN().all() ? "yes" : "no";
  }());

  // The program's assertion fires through statements the hooks take: a
  // product and an assignment whose shapes do not agree.
  const Eigen::MatrixXd wide = random_matrix(n, n + 1, rng);
  int fired = 0;
  try {
    Eigen::MatrixXd bad = A * wide.transpose();
    std::printf("product of mismatched shapes: no assertion (%d rows)\n", static_cast<int>(bad.rows()));
  } catch (const eigen_assertion& e) {
    std::printf("product of mismatched shapes: %s\n", e.what());
    ++fired;
  }
  try {
    C = (A.array() + wide.array()).matrix();
    std::printf("sum of mismatched shapes: no assertion\n");
  } catch (const eigen_assertion& e) {
    std::printf("sum of mismatched shapes: %s\n", e.what());
    ++fired;
  }
  print("C after the failed sum", C);
  return fired == 2 ? 0 : 1;  // as a test suite would: each assertion must fire
}
