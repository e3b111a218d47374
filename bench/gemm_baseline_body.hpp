#pragma once
// One build of the baselines (see gemm_baseline.hpp). Units built for a wider
// ISA rename Eigen's namespace first, as oa's own kernels do, so that their
// template instantiations stay apart from the baseline ISA's; the interface
// is plain pointers, the same in every copy.

#include <Eigen/Core>

#include "gemm_baseline.hpp"

namespace oa_bench::OA_BASELINE_ISA {

template <class S>
void product(const S* a, const S* b, S* c, std::size_t m, std::size_t k, std::size_t n, int threads) {
  using mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const auto I = [](std::size_t x) { return static_cast<Eigen::Index>(x); };
  Eigen::setNbThreads(threads);
  Eigen::Map<mat>(c, I(m), I(n)).noalias() =
      Eigen::Map<const mat>(a, I(m), I(k)) * Eigen::Map<const mat>(b, I(k), I(n));
}

}  // namespace oa_bench::OA_BASELINE_ISA
