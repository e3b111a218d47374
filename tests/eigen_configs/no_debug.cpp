// EIGEN_NO_DEBUG before Eigen: its assertions compiled out, as in the plain build.
#define EIGEN_NO_DEBUG
#include <Eigen/Dense>

#include "check.hpp"

int main() {
  eigen_assert(false && "compiled out by the program's EIGEN_NO_DEBUG");
  using M = Eigen::MatrixXd;
  return oa_config_check::run(oa_config_check::filled<M>(200, 1), oa_config_check::filled<M>(200, 2));
}
