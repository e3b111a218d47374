#pragma once
// The paging workloads of WORKLOADS.md, written once over an array type `A`:
// with A = Eigen::ArrayXd each statement is one Eigen evaluation (the plain
// CPU program, one library call per op); with A = oa::lazy<Eigen::ArrayXd>
// the same source records the calls and oa runs them.

#include <Eigen/Core>
#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

namespace oa_workloads {

// Eigen spellings of what the lazy arrays provide as free functions.
template <class C, class B>
auto select(const Eigen::ArrayBase<C>& c, double a, const Eigen::ArrayBase<B>& b) {
  return c.select(a, b);
}
template <class D>
auto sum(const Eigen::ArrayBase<D>& a) {
  return a.sum();
}

/// Black-Scholes, 32 element-wise ops (the published benchmark's constants).
template <class A>
void blackscholes(const A& price, const A& strike, const A& t, const A& rate, const A& vol, A& call, A& put) {
  const double c05 = 3.0, c10 = 1.5, invsqrt2 = 1.0 / std::sqrt(2.0);
  A rsig = vol * vol;
  rsig = rsig * c05;
  rsig = rsig + rate;
  A vol_sqrt = sqrt(t);
  vol_sqrt = vol_sqrt * vol;
  A tmp = rsig * t;
  A d1 = price / strike;
  d1 = log2(d1);
  d1 = d1 + tmp;
  d1 = d1 / vol_sqrt;
  A d2 = d1 - vol_sqrt;
  d1 = d1 * invsqrt2;
  d1 = erf(d1);
  d1 = d1 * c05;
  d1 = d1 + c05;
  d2 = d2 * invsqrt2;
  d2 = erf(d2);
  d2 = d2 * c05;
  d2 = d2 + c05;
  A e_rt = rate * (-1.0);
  e_rt = e_rt * t;
  e_rt = exp(e_rt);
  tmp = price * d1;
  A tmp2 = e_rt * strike;
  tmp2 = tmp2 * d2;
  call = tmp - tmp2;
  tmp = e_rt * strike;
  tmp2 = c10 - d2;
  put = tmp * tmp2;
  tmp = c10 - d1;
  tmp = price * tmp;
  put = put - tmp;
}

/// Haversine distance from a fixed point, 16 element-wise ops.
template <class A>
void haversine(const A& lat2, const A& lon2, A& a) {
  const double lat1 = 0.70984286, lon1 = 1.23892197, miles = 3959.0;
  A dlat = lat2 - lat1;
  A dlon = lon2 - lon1;
  dlat = dlat / 2.0;
  dlat = sin(dlat);
  dlat = dlat * dlat;
  a = cos(lat2);
  a = a * std::cos(lat1);
  dlon = dlon / 2.0;
  dlon = sin(dlon);
  dlon = dlon * dlon;
  a = a * dlon;
  a = dlat + a;
  a = sqrt(a);
  a = asin(a);
  a = a * 2.0;
  a = a * miles;
}

/// Crime index: element-wise selects and arithmetic, then a sum.
template <class A>
auto crime_index(const A& total_population, const A& adult_population, const A& num_robberies) {
  A big = select(total_population > 500000.0, 0.0, total_population);
  A dp = adult_population * 2.0;
  dp = dp + big;
  A robbery = num_robberies * 2000.0;
  dp = dp - robbery;
  A ci = dp / 100000.0;
  ci = select(ci > 0.02, 0.032, ci);
  ci = select(ci < 0.01, 0.005, ci);
  return sum(ci);
}

}  // namespace oa_workloads
