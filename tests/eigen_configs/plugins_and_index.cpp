// EIGEN_DEFAULT_DENSE_INDEX_TYPE, EIGEN_MATRIX_PLUGIN and EIGEN_ARRAY_PLUGIN
// before Eigen: the program's index type and members, as in its plain build.
#include <cstdint>
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE std::int32_t
#define EIGEN_MATRIX_PLUGIN "plugin_matrix.h"
#define EIGEN_ARRAY_PLUGIN "plugin_array.h"
#include <Eigen/Dense>

#include "check.hpp"

static_assert(sizeof(Eigen::Index) == 4, "the program's index type");

int main() {
  using M = Eigen::MatrixXd;
  const M a = oa_config_check::filled<M>(200, 1), b = oa_config_check::filled<M>(200, 2);
  int failed = oa_config_check::expect(a.plugin_tag() == 7 && Eigen::ArrayXXd(a.array()).plugin_tag() == 11, "the plugins' members");
  return failed + oa_config_check::run(a, b);
}
