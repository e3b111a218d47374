#pragma once
// Overloads of the standard parallel algorithms for std::execution::par and
// par_unseq, which oa_offload(<target> STDPAR) brings in after the
// program's <algorithm>, <numeric> and <execution> (include/oa/stdpar/first/).
// A call over contiguous ranges of int32, int64, float or double (pointers,
// std::vector's and std::array's iterators) with no operation or a standard
// function object goes to oa's engine (oa/stdpar/entry.hpp); any other call
// of these algorithms over such ranges runs the standard library's own
// version, counted in the report with the reason. Calls over other ranges
// never see these overloads.
//
// How they are found, and why this way (checked with g++ 12, clang 14,
// nvcc 13, C++17 and C++20):
// - They live in an inline namespace of std (implementations may add
//   policies and overloads for them; LWG 2909), so that `std::sort(...)`
//   and unqualified calls find them, and their symbols differ from the
//   standard library's own (no clash at link time with units built without
//   them).
// - The policy parameter is not a template parameter, one overload per
//   reference kind (T&, const T&, T&&): each binds exactly as the library's
//   forwarding reference does, and partial ordering then prefers the one
//   whose policy type is fixed. A const& alone would lose non-const
//   lvalues (`auto p = std::execution::par;`) to the library.
// - The standard library's version runs by naming its template arguments
//   (`std::sort<const P&, It, Compare>`), which no overload here accepts:
//   each has one template parameter fewer.
// - Every arity has its own overload: the library's shorter forms call the
//   longer ones by qualified name.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <execution>
#include <functional>
#include <iterator>
#include <numeric>
#include <type_traits>
#include <vector>

#include "oa/stdpar/entry.hpp"

namespace oa::stdpar::detail {

template <class T>
inline constexpr bool element_v = std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
                                  std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
constexpr elem elem_of() {
  if constexpr (std::is_same_v<T, std::int32_t>)
    return elem::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return elem::i64;
  else if constexpr (std::is_same_v<T, float>)
    return elem::f32;
  else
    return elem::f64;
}

/// The memory behind a contiguous iterator: pointers and std::vector's iterators.
template <class It>
struct contiguous {
  static constexpr bool value = false;
};
template <class T>
struct contiguous<T*> {
  static constexpr bool value = true;
  static constexpr bool writable = !std::is_const_v<T>;
  using element = std::remove_cv_t<T>;
  static T* address(T* p) noexcept { return p; }
};
#if defined(__GLIBCXX__)
template <class T, class A>
struct contiguous<__gnu_cxx::__normal_iterator<T*, std::vector<std::remove_cv_t<T>, A>>> {
  static constexpr bool value = true;
  static constexpr bool writable = !std::is_const_v<T>;
  using element = std::remove_cv_t<T>;
  static T* address(const __gnu_cxx::__normal_iterator<T*, std::vector<std::remove_cv_t<T>, A>>& it) noexcept {
    return it.base();
  }
};
#endif

template <class It, bool = contiguous<It>::value>
struct range_of {
  static constexpr bool reads = false, writes = false;
  using element = void;
};
template <class It>
struct range_of<It, true> {
  using element = typename contiguous<It>::element;
  static constexpr bool reads = element_v<element>;
  static constexpr bool writes = reads && contiguous<It>::writable;
};

/// Enabled when every iterator is a contiguous range of element types oa
/// takes (the first written); ranges of two types are the library's, counted.
template <class It, class... More>
inline constexpr bool same_elements_v =
    (std::is_same_v<typename range_of<It>::element, typename range_of<More>::element> && ...);
template <class R, class Out, class... In>
using if_writes = std::enable_if_t<range_of<Out>::writes && (range_of<In>::reads && ...), R>;
template <class R, class... In>
using if_reads = std::enable_if_t<(range_of<In>::reads && ...), R>;

template <class It>
using element_t = typename range_of<It>::element;

template <class It>
auto* address_of(const It& it) {
  return contiguous<It>::address(it);
}

/// The operation a standard function object names for elements of type T:
/// std::plus<> or std::plus<T>, ... (a std::plus<U> of another U converts,
/// and stays with the standard library).
template <class F, class T>
struct op_of {
  static constexpr bool value = false;
  static constexpr op code = op::plus;
};
#define OA_STDPAR_OP(FN, CODE)                \
  template <class T>                          \
  struct op_of<std::FN<>, T> {                \
    static constexpr bool value = true;       \
    static constexpr op code = op::CODE;      \
  };                                          \
  template <class T>                          \
  struct op_of<std::FN<T>, T> {               \
    static constexpr bool value = true;       \
    static constexpr op code = op::CODE;      \
  };
OA_STDPAR_OP(plus, plus)
OA_STDPAR_OP(minus, minus)
OA_STDPAR_OP(multiplies, multiplies)
OA_STDPAR_OP(divides, divides)
OA_STDPAR_OP(negate, negate)
OA_STDPAR_OP(less, less)
OA_STDPAR_OP(greater, greater)
#undef OA_STDPAR_OP

template <class F, class T, op... Ops>
constexpr bool op_in() {
  return op_of<F, T>::value && ((op_of<F, T>::code == Ops) || ...);
}

/// Elements in [first, last); negative (a reversed range) stays with the library.
template <class It>
std::ptrdiff_t extent(const It& first, const It& last) {
  return static_cast<std::ptrdiff_t>(last - first);
}

// ---- the program's device-callable functors ---------------------------------

/// A class marked device-callable (`static constexpr bool oa_device_callable = true;`).
template <class F, class = void>
struct marked_device_callable : std::false_type {};
template <class F>
struct marked_device_callable<F, std::void_t<decltype(F::oa_device_callable)>>
    : std::bool_constant<static_cast<bool>(F::oa_device_callable)> {};

template <class F>
inline constexpr bool device_callable_v = marked_device_callable<F>::value
#if defined(__CUDACC__) && defined(__CUDACC_EXTENDED_LAMBDA__)
                                          || __nv_is_extended_host_device_lambda_closure_type(F)
#endif
    ;

/// Device-callable functors go to the engine where the calling code is
/// nvcc's, as C++20 (oa/stdpar/callables.hpp): a marked class, or a lambda
/// without captures.
#if defined(__CUDACC__) && __cplusplus >= 202002L
#define OA_STDPAR_CALLABLES 1
#else
#define OA_STDPAR_CALLABLES 0
#endif
template <class F>
inline constexpr bool callable_taken_v =
    OA_STDPAR_CALLABLES && device_callable_v<F> && (marked_device_callable<F>::value || std::is_empty_v<F>);

inline constexpr const char* callable = "a callable of the program's: runs where the standard library runs it";
/// Why a callable of the program's stays with the standard library.
template <class F>
constexpr const char* callable_reason() {
  if (!device_callable_v<F>) return callable;
  if (!OA_STDPAR_CALLABLES)
    return "a device-callable functor: taken where the calling code is compiled by nvcc as C++20";
  return "a lambda with captures: what it captures (a pointer into the program's memory) may not be reachable "
         "from a device";
}

template <class In, class Out, class F>
bool try_transform_callable(const In& first, std::ptrdiff_t n, const Out& d_first, const F& f);
template <class In1, class In2, class Out, class F>
bool try_transform_callable(const In1& first1, std::ptrdiff_t n, const In2& first2, const Out& d_first, const F& f);
template <class It, class F>
bool try_for_each_callable(const char* algorithm, const It& first, std::ptrdiff_t n, const F& f);
template <class It, class P>
bool try_count_if_callable(const It& first, std::ptrdiff_t n, const P& p, std::int64_t& result);
template <class It1, class It2, class T, class R, class F>
bool try_transform_reduce_callable(const It1& first1, std::ptrdiff_t n, const It2& first2, T& acc, const F& f);
template <class It, class T, class R, class F>
bool try_transform_reduce_callable(const It& first, std::ptrdiff_t n, T& acc, const F& f);

inline constexpr const char* mixed_elements = "the ranges' element types differ";
inline constexpr const char* not_standard_op = "the operation is not a standard function object oa runs";
inline constexpr const char* other_init = "init is not of the element type";
inline constexpr const char* floating_extreme =
    "floating point: the position of an extreme among NaNs is the standard library's";

/// The library's own functors, passed when it runs one algorithm as another
/// (max_element as min_element with the comparison's arguments swapped,
/// reduce as transform_reduce with an identity): such a call is the
/// library's own, already counted under the algorithm the program called.
template <class F>
struct library_internal : std::false_type {};
#if defined(__GLIBCXX__)
template <class C>
struct library_internal<__pstl::__internal::__reorder_pred<C>> : std::true_type {};
template <>
struct library_internal<__pstl::__internal::__no_op> : std::true_type {};
#endif

// ---- each algorithm's call of its entry: true when oa ran it ----------------------

template <class It, class Compare>
bool try_sort(const It& first, const It& last, const Compare&) {
  using T = element_t<It>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (!op_in<Compare, T, op::less, op::greater>()) {
    fell_back("std::sort", op_of<Compare, T>::value ? not_standard_op : callable);
    return false;
  } else {
    return n >= 0 && sort("std::sort", elem_of<T>(), address_of(first), static_cast<std::size_t>(n),
                          op_of<Compare, T>::code == op::greater);
  }
}

template <class It, class V>
bool try_fill(const char* algorithm, const It& first, std::ptrdiff_t n, const V& value) {
  using T = element_t<It>;
  const T v = value;  // as std::fill assigns it
  return n >= 0 && fill(algorithm, elem_of<T>(), address_of(first), static_cast<std::size_t>(n), &v);
}

template <class In, class Out>
bool try_copy(const char* algorithm, const In& first, std::ptrdiff_t n, const Out& d_first) {
  if constexpr (!same_elements_v<In, Out>) {
    fell_back(algorithm, mixed_elements);
    return false;
  } else {
    return n >= 0 && copy(algorithm, elem_of<element_t<In>>(), address_of(first), static_cast<std::size_t>(n),
                          address_of(d_first));
  }
}

template <class In, class Out, class F>
bool try_transform(const In& first, const In& last, const Out& d_first, const F& f) {
  using T = element_t<In>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (!same_elements_v<In, Out>) {
    fell_back("std::transform", mixed_elements);
    return false;
  } else if constexpr (callable_taken_v<F>) {
    return try_transform_callable(first, n, d_first, f);
  } else if constexpr (!op_in<F, T, op::negate>()) {
    fell_back("std::transform", op_of<F, T>::value ? not_standard_op : callable_reason<F>());
    return false;
  } else {
    return n >= 0 && transform1("std::transform", elem_of<T>(), address_of(first), static_cast<std::size_t>(n),
                                address_of(d_first), op::negate);
  }
}

template <class In1, class In2, class Out, class F>
bool try_transform(const In1& first1, const In1& last1, const In2& first2, const Out& d_first, const F& f) {
  using T = element_t<In1>;
  const std::ptrdiff_t n = extent(first1, last1);
  if constexpr (!same_elements_v<In1, In2, Out>) {
    fell_back("std::transform (binary)", mixed_elements);
    return false;
  } else if constexpr (callable_taken_v<F>) {
    return try_transform_callable(first1, n, first2, d_first, f);
  } else if constexpr (!op_in<F, T, op::plus, op::minus, op::multiplies, op::divides>()) {
    fell_back("std::transform (binary)", op_of<F, T>::value ? not_standard_op : callable_reason<F>());
    return false;
  } else {
    return n >= 0 && transform2("std::transform (binary)", elem_of<T>(), address_of(first1), address_of(first2),
                                static_cast<std::size_t>(n), address_of(d_first), op_of<F, T>::code);
  }
}

template <class It, class Init, class F>
bool try_reduce(const It& first, const It& last, Init& acc, const F&) {
  using T = element_t<It>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (!std::is_same_v<Init, T>) {
    fell_back("std::reduce", other_init);
    return false;
  } else if constexpr (!op_in<F, T, op::plus, op::multiplies>()) {
    fell_back("std::reduce", op_of<F, T>::value ? not_standard_op : callable);
    return false;
  } else {
    return n >= 0 && reduce("std::reduce", elem_of<T>(), address_of(first), static_cast<std::size_t>(n),
                            op_of<F, T>::code, &acc);
  }
}

template <class It1, class It2, class Init, class R, class F>
bool try_transform_reduce(const It1& first1, const It1& last1, const It2& first2, Init& acc, const R&, const F& f) {
  using T = element_t<It1>;
  const std::ptrdiff_t n = extent(first1, last1);
  if constexpr (!same_elements_v<It1, It2>) {
    fell_back("std::transform_reduce", mixed_elements);
    return false;
  } else if constexpr (!std::is_same_v<Init, T>) {
    fell_back("std::transform_reduce", other_init);
    return false;
  } else if constexpr (op_in<R, T, op::plus, op::multiplies>() && callable_taken_v<F>) {
    return try_transform_reduce_callable<It1, It2, T, R>(first1, n, first2, acc, f);
  } else if constexpr (!op_in<R, T, op::plus, op::multiplies>() ||
                       !op_in<F, T, op::plus, op::minus, op::multiplies, op::divides>()) {
    fell_back("std::transform_reduce",
              op_of<R, T>::value && op_of<F, T>::value ? not_standard_op
              : op_of<R, T>::value                     ? callable_reason<F>()
                                                       : callable);
    return false;
  } else {
    return n >= 0 && transform_reduce2("std::transform_reduce", elem_of<T>(), address_of(first1), address_of(first2),
                                       static_cast<std::size_t>(n), op_of<R, T>::code, op_of<F, T>::code, &acc);
  }
}

template <class It, class Init, class R, class F>
bool try_transform_reduce(const It& first, const It& last, Init& acc, const R&, const F& f) {
  using T = element_t<It>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (library_internal<F>::value) {
    return false;
  } else if constexpr (!std::is_same_v<Init, T>) {
    fell_back("std::transform_reduce (unary)", other_init);
    return false;
  } else if constexpr (op_in<R, T, op::plus, op::multiplies>() && callable_taken_v<F>) {
    return try_transform_reduce_callable<It, T, R>(first, n, acc, f);
  } else if constexpr (!op_in<R, T, op::plus, op::multiplies>() || !op_in<F, T, op::negate>()) {
    fell_back("std::transform_reduce (unary)",
              op_of<R, T>::value && op_of<F, T>::value ? not_standard_op
              : op_of<R, T>::value                     ? callable_reason<F>()
                                                       : callable);
    return false;
  } else {
    return n >= 0 && transform_reduce1("std::transform_reduce (unary)", elem_of<T>(), address_of(first),
                                       static_cast<std::size_t>(n), op_of<R, T>::code, op::negate, &acc);
  }
}

/// A scan; `init` null: an inclusive scan without one.
template <class In, class Out, class F, class Init>
bool try_scan(const char* algorithm, const In& first, const In& last, const Out& d_first, bool inclusive,
              const Init* init, const F&) {
  using T = element_t<In>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (!same_elements_v<In, Out>) {
    fell_back(algorithm, mixed_elements);
    return false;
  } else if constexpr (!std::is_same_v<Init, T>) {
    fell_back(algorithm, other_init);
    return false;
  } else if constexpr (!op_in<F, T, op::plus, op::multiplies>()) {
    fell_back(algorithm, op_of<F, T>::value ? not_standard_op : callable);
    return false;
  } else {
    return n >= 0 && scan(algorithm, elem_of<T>(), address_of(first), static_cast<std::size_t>(n),
                          address_of(d_first), inclusive, init, op_of<F, T>::code);
  }
}

template <class It, class V>
bool try_count(const It& first, const It& last, const V& value, std::int64_t& result) {
  using T = element_t<It>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (!std::is_same_v<V, T>) {
    fell_back("std::count", "the value is not of the element type");
    return false;
  } else {
    return n >= 0 && count("std::count", elem_of<T>(), address_of(first), static_cast<std::size_t>(n), &value, &result);
  }
}

template <class It, class F>
bool try_for_each(const char* algorithm, const It& first, std::ptrdiff_t n, const F& f) {
  if constexpr (callable_taken_v<F>) {
    return try_for_each_callable(algorithm, first, n, f);
  } else {
    fell_back(algorithm, callable_reason<F>());
    return false;
  }
}

template <class It, class P>
bool try_count_if(const It& first, const It& last, const P& p, std::int64_t& result) {
  if constexpr (callable_taken_v<P>) {
    return try_count_if_callable(first, extent(first, last), p, result);
  } else {
    fell_back("std::count_if", callable_reason<P>());
    return false;
  }
}


template <class It, class Compare>
bool try_extreme(const char* algorithm, const It& first, const It& last, bool largest, const Compare&,
                 std::size_t& index) {
  using T = element_t<It>;
  const std::ptrdiff_t n = extent(first, last);
  if constexpr (library_internal<Compare>::value) {
    return false;
  } else if constexpr (!op_in<Compare, T, op::less>()) {
    fell_back(algorithm, op_of<Compare, T>::value ? not_standard_op : callable);
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    fell_back(algorithm, floating_extreme);
    return false;
  } else {
    return n > 0 && extreme(algorithm, elem_of<T>(), address_of(first), static_cast<std::size_t>(n), largest, &index);
  }
}

}  // namespace oa::stdpar::detail

// The policies taken, each by every reference kind.
#define OA_STDPAR_EACH_POLICY(M)                                                                            \
  M(execution::parallel_policy&)                                                                            \
  M(const execution::parallel_policy&)                                                                      \
  M(execution::parallel_policy&&)                                                                           \
  M(execution::parallel_unsequenced_policy&) M(const execution::parallel_unsequenced_policy&)               \
      M(execution::parallel_unsequenced_policy&&)

// The standard library's own overload, by its template arguments.
#define OA_STDPAR_LIB(ALG, P, ...) ::std::ALG<const ::std::decay_t<P>&, __VA_ARGS__>

#if OA_STDPAR_CALLABLES
#include "oa/stdpar/callables.hpp"
#endif

#include "oa/stdpar/overloads_algorithm.inc"
#include "oa/stdpar/overloads_numeric.inc"

#undef OA_STDPAR_LIB
#undef OA_STDPAR_EACH_POLICY
