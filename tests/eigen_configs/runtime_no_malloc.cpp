// EIGEN_RUNTIME_NO_MALLOC before Eigen: with Eigen's heap allocations
// forbidden, offloaded statements into allocated matrices still run (the
// engine's memory is its own, not Eigen's), and Eigen's check still fires
// for what would allocate, through the program's own assertion macro.
#include <stdexcept>
struct eigen_assertion : std::logic_error {
  using std::logic_error::logic_error;
};
#define eigen_assert(x) \
  do {                  \
    if (!(x)) throw eigen_assertion(#x); \
  } while (false)
#define EIGEN_RUNTIME_NO_MALLOC
#include <Eigen/Core>

#include "check.hpp"

int main() {
  using M = Eigen::MatrixXd;
  const M a = oa_config_check::filled<M>(200, 1), b = oa_config_check::filled<M>(200, 2);
  M s(200, 200);
  oa::config c = oa::current_config();
  c.device = "emulated";
  c.device_memory = std::size_t{1} << 20;
  c.host_threshold = 0;
  c.offload_elements_min = 0;
  oa::set_config(c);
  oa::clear_reports();
  Eigen::internal::set_is_malloc_allowed(false);
  s = (a.array() * 2.0 + b.array()).matrix();
  bool fired = false;
  try {
    M grown(300, 300);  // an allocation Eigen checks
  } catch (const eigen_assertion&) {
    fired = true;
  }
  Eigen::internal::set_is_malloc_allowed(true);
  int failed = oa_config_check::expect(fired, "Eigen's allocation check fires while allocations are forbidden");
  failed += oa_config_check::expect(oa_config_check::stages("cwise") == 1, "the assignment ran through the engine");
  failed += oa_config_check::expect(s(3, 4) == 2 * a(3, 4) + b(3, 4), "the assignment's result");
  return failed + oa_config_check::run(a, b);
}
