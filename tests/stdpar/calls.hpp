#pragma once
// The standard parallel algorithms this directory's programs call, written as
// an unmodified program writes them; compiled with and without oa_offload's
// STDPAR wrappers (tests/stdpar/CMakeLists.txt), each returns the same.

#include <algorithm>
#include <cstdint>
#include <execution>
#include <functional>
#include <numeric>
#include <vector>

// Each build of these calls has its namespace: one inline function built
// with and without the overloads under one name would break the one-
// definition rule, and the linker would keep either.
#ifndef STDPAR_CALLS
#error "define STDPAR_CALLS to this build's namespace"
#endif

namespace STDPAR_CALLS {

/// Deterministic data: n values in [-1, 1) (as T), from a small generator.
template <class T>
std::vector<T> data(std::size_t n, std::uint64_t seed) {
  std::vector<T> v(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& e : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const double u = static_cast<double>(x >> 11) / 9007199254740992.0 * 2 - 1;
    e = std::is_integral_v<T> ? static_cast<T>(u * 1000) : static_cast<T>(u);
  }
  return v;
}

/// Every algorithm once, with each kind of policy argument; the results in order.
template <class T>
std::vector<double> run(std::size_t n) {
  namespace ex = std::execution;
  std::vector<double> out;
  const std::vector<T> a = data<T>(n, 1), b = data<T>(n, 2);
  std::vector<T> c(n), d(n);
  auto par = ex::par;               // a non-const lvalue policy
  const auto& cpar = ex::par_unseq;  // a const lvalue policy
  std::copy(par, a.begin(), a.end(), c.begin());
  out.push_back(static_cast<double>(c[n / 2]));
  std::transform(ex::par_unseq, a.begin(), a.end(), b.begin(), d.begin(), std::plus<>{});
  out.push_back(static_cast<double>(d[n - 1]));
  std::transform(cpar, a.data(), a.data() + n, d.data(), std::negate<T>{});
  out.push_back(static_cast<double>(d[0]));
  std::transform(ex::par, a.begin(), a.end(), d.begin(), [](T x) { return static_cast<T>(x / 2); });  // a lambda
  out.push_back(static_cast<double>(d[1]));
  out.push_back(static_cast<double>(std::reduce(ex::par, a.begin(), a.end())));
  out.push_back(static_cast<double>(std::reduce(ex::par, a.begin(), a.end(), T{}, std::plus<T>{})));
  out.push_back(static_cast<double>(std::transform_reduce(par, a.begin(), a.end(), b.begin(), T{})));
  out.push_back(static_cast<double>(std::transform_reduce(ex::par, a.begin(), a.end(), T{}, std::plus<>{},
                                                          std::negate<>{})));
  std::inclusive_scan(ex::par, a.begin(), a.end(), c.begin());
  out.push_back(static_cast<double>(c[n - 1]));
  std::exclusive_scan(ex::par_unseq, a.begin(), a.end(), d.begin(), T{}, std::plus<>{});
  out.push_back(static_cast<double>(d[n - 1]));
  std::inclusive_scan(ex::par, a.begin(), a.end(), c.begin(), std::plus<>{}, T(2));  // an op and an init
  out.push_back(static_cast<double>(c[n - 1]));
  if constexpr (std::is_floating_point_v<T>) {
    // An int init over floating-point elements: the library's own overloads,
    // whose default operators sum as int (libstdc++: std::plus<int>).
    out.push_back(static_cast<double>(std::reduce(ex::par, a.begin(), a.end(), 0)));
    out.push_back(static_cast<double>(std::transform_reduce(ex::par, a.begin(), a.end(), b.begin(), 0)));
    std::exclusive_scan(ex::par, a.begin(), a.end(), d.begin(), 0);
    out.push_back(static_cast<double>(d[n - 1]));
  }
  out.push_back(static_cast<double>(std::count(ex::par, a.begin(), a.end(), a[3])));
  out.push_back(static_cast<double>(std::min_element(ex::par, a.begin(), a.end()) - a.begin()));
  out.push_back(static_cast<double>(std::max_element(par, a.begin(), a.end()) - a.begin()));
  std::fill(ex::par, c.begin(), c.end(), T(3));
  std::fill_n(cpar, c.begin(), n / 2, T(5));
  out.push_back(static_cast<double>(c[n / 2 - 1] + c[n / 2]));
  std::copy_n(ex::par, b.begin(), n, c.begin());
  std::sort(ex::par, c.begin(), c.end());
  out.push_back(static_cast<double>(c[0]) + static_cast<double>(c[n - 1]) + static_cast<double>(c[n / 3]));
  std::sort(par, d.begin(), d.end(), std::greater<>{});
  out.push_back(static_cast<double>(d[0]));
  using namespace std;  // an unqualified call
  sort(ex::par, c.begin(), c.end(), greater<T>{});
  out.push_back(static_cast<double>(c[n - 1]));
  return out;
}

}  // namespace STDPAR_CALLS
