// A plain Eigen program: no oa header. Built with oa_offload() against the
// installed package, its product runs through oa's engine.
#include <Eigen/Core>
#include <cstdio>

int main() {
  const Eigen::Index n = 128;
  // Small integers: every summation order gives the exact product.
  const Eigen::MatrixXd A = Eigen::MatrixXd::NullaryExpr(n, n, [](Eigen::Index i, Eigen::Index j) {
    return static_cast<double>((i + 2 * j) % 7) - 3;
  });
  const Eigen::MatrixXd B = A.transpose();
  const Eigen::MatrixXd C = A * B;
  // lazyProduct is Eigen's coefficient-based product, which never reaches GEMM.
  const double error = (C - A.lazyProduct(B)).cwiseAbs().maxCoeff();
  std::printf("max |A * B - reference| = %g\n", error);
  return error == 0 ? 0 : 1;
}
