#pragma once
// The program's own device-callable functors under oa_offload(... STDPAR),
// where the calling code is compiled by nvcc as C++20: an extended
// __host__ __device__ lambda (nvcc --extended-lambda) or a class marked
// `static constexpr bool oa_device_callable = true;` whose operator() is
// __host__ __device__ (oa::stl's rule). Such a call cannot go through
// src/stdpar/entry.cpp, compiled once without the functor: its GPU version
// is a kernel over the functor, instantiated here, in the program's unit,
// by oa::stl. Taken: transform (unary and binary), for_each, for_each_n,
// count_if, and transform_reduce whose reduction is std::plus or
// std::multiplies. Each runs eagerly, as the entries do; a failure leaves
// the caller's memory as it was and the standard library runs the call.
// Of lambdas, only those without captures: what a capture holds (a pointer
// into the program's memory, as index-based loops capture) may not be
// reachable from a device, and nothing tells a pointer from a number; a
// marked class is its author's promise. Included by oa/stdpar/overloads.hpp
// (OA_STDPAR_CALLABLES).

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <type_traits>

#include "oa/annotations/stl.hpp"
#include "oa/oa.hpp"
#include "oa/stdpar/entry.hpp"

namespace oa::stdpar::detail {

/// Runs `work` through the engine if the call is admitted: false (noted for
/// the report) when it stays with the standard library.
template <class Work>
bool run_callable(const char* algorithm, family f, std::ptrdiff_t n, Work&& work) {
  if (n < 0 || !admit(algorithm, f, static_cast<std::size_t>(n))) return false;
  try {
    work(static_cast<std::size_t>(n));
    return true;
  } catch (const std::exception& e) {
    engine_failed(algorithm, static_cast<std::size_t>(n), e.what());
    return false;
  }
}

/// Whether two ranges share memory (a transform in place): the result then
/// goes through a value of its own before the caller's range is written.
template <class T>
bool overlap(std::span<const T> in, std::span<T> out) {
  const auto* a = in.data();
  const auto* b = static_cast<const T*>(out.data());
  return std::less<>{}(a, b + out.size()) && std::less<>{}(b, a + in.size());
}

/// A device-callable predicate as a count: 1 where it holds.
template <class P, class T>
struct count_of {
  static constexpr bool oa_device_callable = true;
  P p;
#if defined(__CUDACC__)
  __host__ __device__
#endif
  std::int64_t operator()(const T& x) const {
    return p(x) ? 1 : 0;
  }
};

inline constexpr const char* other_result = "the operation's result is not of the element type";

template <class In, class Out, class F>
bool try_transform_callable(const In& first, std::ptrdiff_t n, const Out& d_first, const F& f) {
  using T = element_t<In>;
  if constexpr (!std::is_same_v<std::decay_t<std::invoke_result_t<const F&, const T&>>, T>) {
    fell_back("std::transform", other_result);
    return false;
  } else {
    return run_callable("std::transform", family::elementwise, n, [&](std::size_t m) {
      const std::span<const T> in(address_of(first), m);
      std::span<T> out(address_of(d_first), m);  // the call's objects: alive until it has run
      if (overlap(in, out))
        ::oa::stl::detail::copy_into<T>(out, ::oa::stl::transform(in, f));
      else
        ::oa::stl::detail::transform1_callable_into<F>(out, in, f);
      ::oa::evaluate();
    });
  }
}

template <class In1, class In2, class Out, class F>
bool try_transform_callable(const In1& first1, std::ptrdiff_t n, const In2& first2, const Out& d_first,
                            const F& f) {
  using T = element_t<In1>;
  if constexpr (!std::is_same_v<std::decay_t<std::invoke_result_t<const F&, const T&, const T&>>, T>) {
    fell_back("std::transform (binary)", other_result);
    return false;
  } else {
    return run_callable("std::transform (binary)", family::elementwise, n, [&](std::size_t m) {
      const std::span<const T> a(address_of(first1), m), b(address_of(first2), m);
      std::span<T> out(address_of(d_first), m);
      if (overlap(a, out) || overlap(b, out))
        ::oa::stl::detail::copy_into<T>(out, ::oa::stl::transform(a, b, f));
      else
        ::oa::stl::detail::transform2_callable_into<F>(out, a, b, f);
      ::oa::evaluate();
    });
  }
}

template <class It, class F>
bool try_for_each_callable(const char* algorithm, const It& first, std::ptrdiff_t n, const F& f) {
  using T = element_t<It>;
  if constexpr (!range_of<It>::writes || !std::is_invocable_v<const F&, T&>) {
    fell_back(algorithm, "the range is read-only or the callable does not take T&");
    return false;
  } else {
    return run_callable(algorithm, family::elementwise, n, [&](std::size_t m) {
      std::span<T> range(address_of(first), m);
      ::oa::stl::for_each(range, f);
      ::oa::evaluate();
    });
  }
}

template <class It, class P>
bool try_count_if_callable(const It& first, std::ptrdiff_t n, const P& p, std::int64_t& result) {
  using T = element_t<It>;
  return run_callable("std::count_if", family::reduction, n, [&](std::size_t m) {
    const std::span<const T> in(address_of(first), m);
    result = ::oa::stl::reduce(::oa::stl::transform(in, count_of<P, T>{p}), std::int64_t{0}, std::plus<>{}).get();
  });
}

/// reduce(transform(...), init, r), r std::plus or std::multiplies: the
/// transform's kernel over the functor, then the engine's reduction.
template <class R, class T, class Lazy>
T reduce_lazy(Lazy&& values, T init) {
  if constexpr (op_of<R, T>::code == op::plus)
    return ::oa::stl::reduce(std::forward<Lazy>(values), init, std::plus<>{}).get();
  else
    return ::oa::stl::reduce(std::forward<Lazy>(values), init, std::multiplies<>{}).get();
}

template <class It1, class It2, class T, class R, class F>
bool try_transform_reduce_callable(const It1& first1, std::ptrdiff_t n, const It2& first2, T& acc, const F& f) {
  if constexpr (!std::is_same_v<std::decay_t<std::invoke_result_t<const F&, const T&, const T&>>, T>) {
    fell_back("std::transform_reduce", other_result);
    return false;
  } else {
    return run_callable("std::transform_reduce", family::reduction, n, [&](std::size_t m) {
      const std::span<const T> a(address_of(first1), m), b(address_of(first2), m);
      acc = reduce_lazy<R>(::oa::stl::transform(a, b, f), acc);
    });
  }
}

template <class It, class T, class R, class F>
bool try_transform_reduce_callable(const It& first, std::ptrdiff_t n, T& acc, const F& f) {
  if constexpr (!std::is_same_v<std::decay_t<std::invoke_result_t<const F&, const T&>>, T>) {
    fell_back("std::transform_reduce (unary)", other_result);
    return false;
  } else {
    return run_callable("std::transform_reduce (unary)", family::reduction, n, [&](std::size_t m) {
      const std::span<const T> in(address_of(first), m);
      acc = reduce_lazy<R>(::oa::stl::transform(in, f), acc);
    });
  }
}

}  // namespace oa::stdpar::detail
