#pragma once
// STL-style algorithms as lazy calls: oa::stl::transform, for_each, reduce,
// transform_reduce, inner_product, count, count_if, min_element,
// max_element, inclusive_scan, exclusive_scan, sort, fill, iota and copy take
// containers (std::vector, std::span, Eigen vectors and 1-D arrays) or lazy
// values of them (most also contiguous iterator ranges, at the end of this
// file), and return lazy values, so that a chain of them is one
// pipeline: chunked, paged through the device's memory, and on a GPU one
// fused kernel per chunk.
//
//   auto y = oa::stl::transform(x, std::negate<>{});             // lazy<std::vector<double>>
//   auto s = oa::stl::transform_reduce(x, y, 0.0, std::plus<>{}, std::multiplies<>{});
//   double r = s.get();                                          // runs the chain
//
// The CPU function of each call is the standard algorithm on a chunk. The
// device function is the element-wise operation of oa/core/ops.hpp that a
// standard function object names (std::plus<>, std::minus<>, std::multiplies<>,
// std::divides<>, std::negate<>, the comparisons), or an oa::ops functor
// given directly (oa::ops::sqrt{}, oa::ops::max{}, ...). Any other callable
// (a lambda, a user functor) is passed to the CPU function of each chunk and
// runs on the host, correct and not offloaded; it must be copyable and safe
// to call from several threads at once. Reductions combine one partial per
// chunk, in chunk order (reduce.hpp), so a floating-point result depends on
// the chunk size only; an operation of the user's own needs an identity
// (`template <class R> static R identity()`). Results are std::vector of the
// result type, whatever the input container; a predicate's results are
// std::vector<char> (0 or 1): std::vector<bool> packs bits and has no
// contiguous storage to split. sort's runs, the scans (sums), iota,
// min_element and max_element have GPU versions over CUB (oa/cuda/stl.hpp)
// given as oa::kernel, whose twins on the emulated device are the CPU
// functions; the sort's merge and scans with other operations run on the
// host, out of core (chunk by chunk), whatever the device.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <functional>
#include <numeric>
#include <type_traits>
#include <vector>

#include "oa/annotations/sort_kernels.hpp"
#include "oa/core/annotate.hpp"
#include "oa/core/ops.hpp"
#if OA_HAS_CUDA
#include "oa/cuda/stl.hpp"
#endif
#if OA_HAS_CUDA && defined(__CUDACC__)
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/transform.h>

#include "oa/cuda/device.hpp"
#endif

namespace oa::stl {

/// An element and its index in the range: what min_element and max_element
/// give (index -1 and a value-initialised value for an empty range).
template <class T>
struct position {
  T value{};
  std::int64_t index = -1;
};

namespace detail {
using split::contiguous;

/// The element type of a container, or of the container a lazy value holds.
template <class T>
struct element_of {
  using type = split::contiguous::element<T>;
};
template <class T>
struct element_of<lazy<T>> : element_of<T> {};
template <class T>
using element_t = typename element_of<std::remove_cvref_t<T>>::type;

/// The oa::ops operation a callable computes on a device, or void.
template <class F>
struct device_op {
  using type = void;
};
#define OA_STL_DEVICE_OP(STD, OP) \
  template <class T>              \
  struct device_op<STD<T>> {      \
    using type = ops::OP;         \
  };
OA_STL_DEVICE_OP(std::plus, add)
OA_STL_DEVICE_OP(std::minus, sub)
OA_STL_DEVICE_OP(std::multiplies, mul)
OA_STL_DEVICE_OP(std::divides, div)
OA_STL_DEVICE_OP(std::negate, negate)
OA_STL_DEVICE_OP(std::less, less)
OA_STL_DEVICE_OP(std::less_equal, less_equal)
OA_STL_DEVICE_OP(std::greater, greater)
OA_STL_DEVICE_OP(std::greater_equal, greater_equal)
OA_STL_DEVICE_OP(std::equal_to, equal_to)
OA_STL_DEVICE_OP(std::not_equal_to, not_equal_to)
#undef OA_STL_DEVICE_OP
template <class Op, class... Known>
inline constexpr bool one_of = (std::is_same_v<Op, Known> || ...);
template <class F>
  requires one_of<F, ops::add, ops::sub, ops::mul, ops::div, ops::min, ops::max, ops::less, ops::less_equal,
                  ops::greater, ops::greater_equal, ops::equal_to, ops::not_equal_to, ops::pow, ops::exp, ops::log,
                  ops::log2, ops::sqrt, ops::sin, ops::cos, ops::tan, ops::asin, ops::acos, ops::atan, ops::tanh,
                  ops::erf, ops::abs, ops::negate, ops::identity, ops::square>
struct device_op<F> {
  using type = F;
};
template <class F>
inline constexpr bool on_device = !std::is_void_v<typename device_op<std::remove_cvref_t<F>>::type>;
template <class F>
using device_op_t = typename device_op<std::remove_cvref_t<F>>::type;

/// Containers and lazy values, not iterators (whose overloads take pairs).
template <class X>
concept not_iterator = !std::contiguous_iterator<std::remove_cvref_t<X>>;

/// A callable of the user's that runs on a device: a functor whose class
/// says so (`static constexpr bool oa_device_callable = true;`, its
/// operator() __host__ __device__ where the calling code is compiled by
/// nvcc), or an extended __host__ __device__ lambda (nvcc --extended-lambda).
/// Where the calling code is compiled by nvcc, its GPU version is a kernel
/// over it (thrust::transform on oa's stream); elsewhere the emulated device
/// runs it as the CPU function does, and a GPU leaves the call to the host.
template <class F>
inline constexpr bool device_callable = requires { requires static_cast<bool>(F::oa_device_callable); }
#if defined(__CUDACC__) && defined(__CUDACC_EXTENDED_LAMBDA__)
                                        || __nv_is_extended_host_device_lambda_closure_type(F)
#endif
    ;

/// The reduction (split/reduce.hpp) a combining operation names: the
/// standard sum and product, oa::ops::min and max, or the user's own
/// operation with an identity.
template <class Op>
struct reduction_of {
  static_assert(requires { Op::template identity<double>(); },
                "oa::stl: a reduction's operation must be std::plus, std::multiplies, oa::ops::min, oa::ops::max "
                "or have an identity: `template <class R> static R identity()`");
  using type = Op;
};
template <class T>
struct reduction_of<std::plus<T>> {
  using type = split::ops_detail::plus;
};
template <class T>
struct reduction_of<std::multiplies<T>> {
  using type = split::ops_detail::times;
};
template <>
struct reduction_of<ops::min> {
  using type = split::ops_detail::minimum;
};
template <>
struct reduction_of<ops::max> {
  using type = split::ops_detail::maximum;
};
template <class Op>
using reduction_t = typename reduction_of<std::remove_cvref_t<Op>>::type;
template <class Op>
inline constexpr bool reduces_on_device = requires { reduction_t<Op>::device_op; };

/// The smallest (Min) or largest element, the first of equal ones: chunks'
/// partials are combined in order, so the earlier wins a tie; an empty
/// chunk's partial (index -1) yields to any other.
template <class P, bool Min>
struct first_of {
  template <class R>
  static R identity() {
    return R{};
  }
  template <class R>
  R operator()(const R& a, const R& b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    return (Min ? b.value < a.value : a.value < b.value) ? b : a;
  }
};

/// Op on two values converted to R (the standard algorithms mix element and
/// accumulator types).
template <class Op, class R>
inline constexpr auto in_type = [](const auto& x, const auto& y) { return Op{}(R(x), R(y)); };
/// The same with the caller's operation object (one with state).
template <class R, class Op>
auto in_type_of(const Op& op) {
  return [&op](const auto& x, const auto& y) { return op(R(x), R(y)); };
}

/// An operation whose object the algorithm must use as given: it has state
/// (a member, a capture) or no default constructor. Such a reduction runs
/// per block with the caller's object on the host path (no device function
/// can take it): each block's partial, then one call folding them in order.
template <class Op>
inline constexpr bool stateful = !std::is_empty_v<Op> || !std::is_default_constructible_v<Op>;

/// The container of a transform's results.
template <class R>
using result_vector = std::vector<std::conditional_t<std::is_same_v<R, bool>, char, R>>;

/// The element types oa's GPU versions (oa/cuda/stl.hpp) are built for.
template <class T>
inline constexpr bool gpu_type = one_of<T, std::int32_t, std::int64_t, float, double>;

/// A GPU version (a lambda over the stream and device views) where oa is
/// built with CUDA and `available` holds (an element type and operation oa's
/// GPU versions cover); else nullptr: the call's twin (its CPU function) runs
/// on the emulated device, and a GPU leaves the call to the host.
#if OA_HAS_CUDA
#define OA_STL_GPU(available, ...) [] {                    \
  if constexpr (available)                                 \
    return __VA_ARGS__;                                    \
  else                                                     \
    return nullptr;                                        \
}()
#else
#define OA_STL_GPU(available, ...) nullptr
#endif

/// A GPU version that needs the calling code compiled by nvcc (a kernel over
/// the user's callable); else nullptr.
#if OA_HAS_CUDA && defined(__CUDACC__)
#define OA_STL_GPU_NVCC(...) __VA_ARGS__
#else
#define OA_STL_GPU_NVCC(...) nullptr
#endif

/// Scratch memory the GPU versions are planned with: CUB's temporary storage
/// (for a sort, a second buffer of one run), bounds on every GPU; a GPU
/// version says so if CUB ever asks for more.
template <class T>
inline constexpr std::size_t gpu_sort_scratch(std::size_t run) {
  return run * sizeof(T) + (std::size_t{1} << 20);
}
inline constexpr std::size_t gpu_scratch_fixed = std::size_t{1} << 20;

// ---- the annotations: one per algorithm and kind of callable -----------------

template <class F, class R>
inline constexpr auto transform1 = oa::annotate<"std::transform">(
    oa::cpu([](const auto& in, auto& out) { std::transform(in.begin(), in.end(), out.begin(), F{}); }),
    oa::args(oa::in<contiguous>("first"), oa::out<contiguous, result_vector<R>>("d_first")),
    oa::device_fn(oa::elementwise(device_op_t<F>{})));
template <class F, class R>
inline constexpr auto transform1_host = oa::annotate<"std::transform">(
    oa::cpu([](const auto& in, const F& f, auto& out) { std::transform(in.begin(), in.end(), out.begin(), f); }),
    oa::args(oa::in<contiguous>("first"), oa::scalar<F>("unary_op"), oa::out<contiguous, result_vector<R>>("d_first")));

// The user's device-callable functor: a kernel over it on a GPU.
template <class F, class R>
inline constexpr auto transform1_callable = oa::annotate<"std::transform">(
    oa::cpu([](const auto& in, const F& f, auto& out) { std::transform(in.begin(), in.end(), out.begin(), f); }),
    oa::args(oa::in<contiguous>("first"), oa::scalar<F>("unary_op"), oa::out<contiguous, result_vector<R>>("d_first")),
    oa::device_fn(oa::kernel(OA_STL_GPU_NVCC([](const stream_view& s, const auto& in, const F& f, const auto& out) {
      thrust::transform(thrust::cuda::par_nosync.on(oa::cuda::native_stream(s)), in.data(), in.data() + in.size(),
                        out.data(), f);
    }))));

template <class F, class R>
inline constexpr auto transform2 = oa::annotate<"std::transform (binary)">(
    oa::cpu([](const auto& a, const auto& b, auto& out) {
      std::transform(a.begin(), a.end(), b.begin(), out.begin(), F{});
    }),
    oa::args(oa::in<contiguous>("first1"), oa::in<contiguous>("first2"), oa::out<contiguous, result_vector<R>>("d_first")),
    oa::device_fn(oa::elementwise(device_op_t<F>{})));
template <class F, class R>
inline constexpr auto transform2_host = oa::annotate<"std::transform (binary)">(
    oa::cpu([](const auto& a, const auto& b, const F& f, auto& out) {
      std::transform(a.begin(), a.end(), b.begin(), out.begin(), f);
    }),
    oa::args(oa::in<contiguous>("first1"), oa::in<contiguous>("first2"), oa::scalar<F>("binary_op"),
             oa::out<contiguous, result_vector<R>>("d_first")));

template <class F, class R>
inline constexpr auto transform2_callable = oa::annotate<"std::transform (binary)">(
    oa::cpu([](const auto& a, const auto& b, const F& f, auto& out) {
      std::transform(a.begin(), a.end(), b.begin(), out.begin(), f);
    }),
    oa::args(oa::in<contiguous>("first1"), oa::in<contiguous>("first2"), oa::scalar<F>("binary_op"),
             oa::out<contiguous, result_vector<R>>("d_first")),
    oa::device_fn(oa::kernel(
        OA_STL_GPU_NVCC([](const stream_view& s, const auto& a, const auto& b, const F& f, const auto& out) {
          thrust::transform(thrust::cuda::par_nosync.on(oa::cuda::native_stream(s)), a.data(), a.data() + a.size(),
                            b.data(), out.data(), f);
        }))));

// The same, written into a range the caller gave (oa_offload's STDPAR), one
// stage: its old values are not copied in, no intermediate crosses the link.
// The range must not overlap the inputs.
template <class F>
inline constexpr auto transform1_callable_into = oa::annotate<"std::transform (into the caller's range)">(
    oa::cpu([](auto& out, const auto& in, const F& f) { std::transform(in.begin(), in.end(), out.begin(), f); }),
    oa::args(oa::overwrite<contiguous>("d_first"), oa::in<contiguous>("first"), oa::scalar<F>("unary_op")),
    oa::device_fn(oa::kernel(OA_STL_GPU_NVCC([](const stream_view& s, const auto& out, const auto& in, const F& f) {
      thrust::transform(thrust::cuda::par_nosync.on(oa::cuda::native_stream(s)), in.data(), in.data() + in.size(),
                        out.data(), f);
    }))));
template <class F>
inline constexpr auto transform2_callable_into = oa::annotate<"std::transform (binary, into the caller's range)">(
    oa::cpu([](auto& out, const auto& a, const auto& b, const F& f) {
      std::transform(a.begin(), a.end(), b.begin(), out.begin(), f);
    }),
    oa::args(oa::overwrite<contiguous>("d_first"), oa::in<contiguous>("first1"), oa::in<contiguous>("first2"),
             oa::scalar<F>("binary_op")),
    oa::device_fn(oa::kernel(
        OA_STL_GPU_NVCC([](const stream_view& s, const auto& out, const auto& a, const auto& b, const F& f) {
          thrust::transform(thrust::cuda::par_nosync.on(oa::cuda::native_stream(s)), a.data(), a.data() + a.size(),
                            b.data(), out.data(), f);
        }))));

template <class F>
inline constexpr auto for_each = oa::annotate<"std::for_each">(
    oa::cpu([](auto& range, const F& f) { std::for_each(range.begin(), range.end(), f); }),
    oa::args(oa::mut<contiguous>("range"), oa::scalar<F>("f")),
    oa::device_fn(oa::kernel(OA_STL_GPU_NVCC([](const stream_view& s, const auto& range, const F& f) {
      thrust::for_each(thrust::cuda::par_nosync.on(oa::cuda::native_stream(s)), range.data(),
                       range.data() + range.size(), f);
    }))));
template <class F>
inline constexpr auto for_each_host = oa::annotate<"std::for_each">(
    oa::cpu([](auto& range, const F& f) { std::for_each(range.begin(), range.end(), f); }),
    oa::args(oa::mut<contiguous>("range"), oa::scalar<F>("f")));

template <class T>
inline constexpr auto fill = oa::annotate<"std::fill">(
    oa::cpu([](auto& x, const T& value) { std::fill(x.begin(), x.end(), value); }),
    oa::args(oa::overwrite<contiguous>("range"), oa::scalar<T>("value")),
    oa::device_fn(oa::elementwise(ops::identity{})));  // written whole: its old values are not copied in

template <class T>
inline constexpr auto copy = oa::annotate<"std::copy">(
    oa::cpu([](const auto& in, auto& out) { std::copy(in.begin(), in.end(), out.begin()); }),
    oa::args(oa::in<contiguous>("first"), oa::out<contiguous, std::vector<T>>("d_first")),
    oa::device_fn(oa::elementwise(ops::identity{})));

/// out = in, element by element, into the caller's range (written whole, so
/// its old values are not copied to a device): how a lazy result reaches a
/// range the caller gave (oa_offload's STDPAR calls).
template <class T>
inline constexpr auto copy_into = oa::annotate<"std::copy (into the caller's range)">(
    oa::cpu([](auto& out, const auto& in) { std::copy(in.begin(), in.end(), out.begin()); }),
    oa::args(oa::overwrite<contiguous>("d_first"), oa::in<contiguous>("first")),
    oa::device_fn(oa::elementwise(ops::identity{})));

// Reductions start each chunk from the identity; the caller's init joins in
// a call of its own (combine_init), so that no chunk needs to know it is
// the first.
template <class Op, class R>
inline constexpr auto reduce = oa::annotate<"std::reduce">(
    oa::cpu([](const auto& in) { return std::reduce(in.begin(), in.end(), Op::template identity<R>(), in_type<Op, R>); }),
    oa::args(oa::in<contiguous>("first"), oa::ret<split::reduce<Op>, R>), oa::device_fn(oa::elementwise(ops::identity{})));
template <class Op, class R>
inline constexpr auto reduce_host = oa::annotate<"std::reduce">(
    oa::cpu([](const auto& in) { return std::reduce(in.begin(), in.end(), Op::template identity<R>(), in_type<Op, R>); }),
    oa::args(oa::in<contiguous>("first"), oa::ret<split::reduce<Op>, R>));

template <class Op, class F, class R>
inline constexpr auto transform_reduce1 = oa::annotate<"std::transform_reduce">(
    oa::cpu([](const auto& in) {
      return std::transform_reduce(in.begin(), in.end(), Op::template identity<R>(), in_type<Op, R>, F{});
    }),
    oa::args(oa::in<contiguous>("first"), oa::ret<split::reduce<Op>, R>), oa::device_fn(oa::elementwise(device_op_t<F>{})));
template <class Op, class F, class R>
inline constexpr auto transform_reduce1_host = oa::annotate<"std::transform_reduce">(
    oa::cpu([](const auto& in, const F& f) {
      return std::transform_reduce(in.begin(), in.end(), Op::template identity<R>(), in_type<Op, R>, f);
    }),
    oa::args(oa::in<contiguous>("first"), oa::scalar<F>("transform"), oa::ret<split::reduce<Op>, R>));

template <class Op, class F, class R>
inline constexpr auto transform_reduce2 = oa::annotate<"std::transform_reduce (binary)">(
    oa::cpu([](const auto& a, const auto& b) {
      return std::transform_reduce(a.begin(), a.end(), b.begin(), Op::template identity<R>(), in_type<Op, R>, F{});
    }),
    oa::args(oa::in<contiguous>("first1"), oa::in<contiguous>("first2"), oa::ret<split::reduce<Op>, R>),
    oa::device_fn(oa::elementwise(device_op_t<F>{})));
template <class Op, class F, class R>
inline constexpr auto transform_reduce2_host = oa::annotate<"std::transform_reduce (binary)">(
    oa::cpu([](const auto& a, const auto& b, const F& f) {
      return std::transform_reduce(a.begin(), a.end(), b.begin(), Op::template identity<R>(), in_type<Op, R>, f);
    }),
    oa::args(oa::in<contiguous>("first1"), oa::in<contiguous>("first2"), oa::scalar<F>("transform"),
             oa::ret<split::reduce<Op>, R>));

template <class T>
inline constexpr auto count = oa::annotate<"std::count">(
    oa::cpu([](const auto& in, const T& value) { return std::int64_t(std::count(in.begin(), in.end(), value)); }),
    oa::args(oa::in<contiguous>("first"), oa::scalar<T>("value"), oa::ret<split::sum, std::int64_t>),
    oa::device_fn(oa::elementwise(ops::equal_to{})));
template <class P>
inline constexpr auto count_if = oa::annotate<"std::count_if">(
    oa::cpu([](const auto& in, const P& p) { return std::int64_t(std::count_if(in.begin(), in.end(), p)); }),
    oa::args(oa::in<contiguous>("first"), oa::scalar<P>("p"), oa::ret<split::sum, std::int64_t>));

/// A chunk's smallest (Min) or largest element and its index in the range.
/// As std::min_element over the whole range, whatever the chunks: a NaN
/// first element is the answer (nothing compares below it), and any other
/// NaN is passed over; so a chunk after the first starts at its first
/// number, and one of NaNs only has no partial (index -1).
template <class P, bool Min>
inline constexpr auto extreme_of_chunk = [](const auto& in) {
  auto from = in.begin();
  if constexpr (std::is_floating_point_v<decltype(P::value)>)
    if (in.first != 0) from = std::find_if(from, in.end(), [](const auto& x) { return x == x; });
  const auto it = Min ? std::min_element(from, in.end()) : std::max_element(from, in.end());
  return it == in.end() ? P{} : P{*it, static_cast<std::int64_t>(in.first) + (it - in.begin())};
};
/// On a GPU: CUB's ArgMin/ArgMax into the chunk's partial (NaN-free values).
template <class P, bool Min>
inline constexpr auto extreme_on_gpu = OA_STL_GPU(gpu_type<decltype(P::value)>, [](const stream_view& s, const auto& in,
                                                                                   P* partial,
                                                                                   std::span<std::byte> scratch) {
  using T = decltype(P::value);
  auto* at = reinterpret_cast<std::byte*>(partial);
  oa::cuda::stl::arg_extreme<T>(s, in.data(), in.size(), in.first, Min, reinterpret_cast<T*>(at + offsetof(P, value)),
                                reinterpret_cast<std::int64_t*>(at + offsetof(P, index)), scratch);
});
template <class P>
inline constexpr auto min_element = oa::annotate<"std::min_element">(
    oa::cpu(extreme_of_chunk<P, true>),
    oa::args(oa::in<split::indexed>("first"), oa::ret<split::reduce<first_of<P, true>>, P>),
    oa::device_fn(oa::kernel(extreme_on_gpu<P, true>).scratch(0, gpu_scratch_fixed)));
template <class P>
inline constexpr auto max_element = oa::annotate<"std::max_element">(
    oa::cpu(extreme_of_chunk<P, false>),
    oa::args(oa::in<split::indexed>("first"), oa::ret<split::reduce<first_of<P, false>>, P>),
    oa::device_fn(oa::kernel(extreme_on_gpu<P, false>).scratch(0, gpu_scratch_fixed)));

template <class T>
inline constexpr auto iota = oa::annotate<"std::iota">(
    oa::cpu([](auto& range, const T& value) {
      for (std::size_t i = 0; i < range.size(); ++i) range[i] = static_cast<T>(value + static_cast<T>(range.first + i));
    }),
    oa::args(oa::overwrite<split::indexed>("range"), oa::scalar<T>("value")),  // written whole, never read
    oa::device_fn(oa::kernel(OA_STL_GPU(gpu_type<T>, [](const stream_view& s, const auto& range, const T& value) {
      oa::cuda::stl::iota<T>(s, range.data(), range.size(), range.first, value);
    }))));

// Scans, out of core in two passes over blocks of scan_block elements (whole
// blocks per chunk wherever the engine cuts): each block's total, then each
// block scanned from the totals of the blocks before it. The input is read
// twice and the output written once; nothing waits for the chunk before.
inline constexpr std::size_t scan_block = std::size_t{1} << 16;
using scan_blocks = split::blocks<scan_block>;

/// Each block's reduction with the caller's operation object (one with
/// state), on the host path: what the stateful reductions and scans fold.
template <class Op, class T>
inline constexpr auto block_totals_with = oa::annotate<"oa::stl::scan (block totals, stateful operation: host)">(
    oa::cpu([](const auto& in, const Op& op, auto& totals) {
      for (std::size_t b = 0; b < totals.size(); ++b) {
        const std::size_t from = b * scan_block, to = std::min(in.size(), from + scan_block);
        totals[b] = std::reduce(in.begin() + from, in.begin() + to, Op::template identity<T>(), in_type_of<T>(op));
      }
    }),
    oa::args(oa::in<scan_blocks>("first"), oa::scalar<Op>("op"),
             oa::out<split::contiguous, std::vector<T>>("block_totals")));

// E: the input's elements. CUB's scans read them as T: a GPU version only
// where they are T (an int32 array scanned into int64 sums runs on the host).
template <class Op, class T, class E = T>
inline constexpr auto block_totals = oa::annotate<"oa::stl::scan (block totals)">(
    oa::cpu([](const auto& in, auto& totals) {
      for (std::size_t b = 0; b < totals.size(); ++b) {
        const std::size_t from = b * scan_block, to = std::min(in.size(), from + scan_block);
        totals[b] = std::reduce(in.begin() + from, in.begin() + to, Op::template identity<T>(), in_type<Op, T>);
      }
    }),
    oa::args(oa::in<scan_blocks>("first"), oa::out<split::contiguous, std::vector<T>>("block_totals")),
    oa::device_fn(oa::kernel(OA_STL_GPU((gpu_type<T> && std::is_same_v<Op, split::ops_detail::plus> &&
                                         std::is_same_v<E, T>),
                                        [](const stream_view& s, const auto& in, const auto& totals,
                                           std::span<std::byte> scratch) {
                                          oa::cuda::stl::block_sums<T>(s, in.data(), in.size(), scan_block,
                                                                       totals.data(), scratch);
                                        }))
                      .scratch(0, gpu_scratch_fixed)));

/// out[i] = init op in[0] op ... op in[i] (inclusive), or the same without
/// in[i] (exclusive); a block starts from the totals of the blocks before it.
/// A chunk of the scan from the blocks' totals, with `op`.
template <class Op, class T, bool Inclusive, class In, class Out>
void scan_chunk(const In& in, const std::vector<T>& totals, const T& init, const Op& op, Out& out) {
  const std::size_t first_block = in.first / scan_block;
  T carry = init;
  for (std::size_t b = 0; b < first_block; ++b) carry = op(carry, totals[b]);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const T next = op(carry, T(in[i]));
    out[i] = Inclusive ? next : carry;
    carry = next;
  }
}

/// The scan with the caller's operation object (one with state), on the host path.
template <class Op, class T, bool Inclusive>
inline constexpr auto scan_with_totals_with = oa::annotate<"oa::stl::scan (stateful operation: host)">(
    oa::cpu([](const auto& in, const std::vector<T>& totals, const T& init, const Op& op, auto& out) {
      scan_chunk<Op, T, Inclusive>(in, totals, init, op, out);
    }),
    oa::args(oa::in<scan_blocks>("first"), oa::scalar<std::vector<T>>("block_totals"), oa::scalar<T>("init"),
             oa::scalar<Op>("op"), oa::out<scan_blocks, std::vector<T>>("d_first")));

template <class Op, class T, bool Inclusive, class E = T>
inline constexpr auto scan_with_totals = oa::annotate<"oa::stl::scan">(
    oa::cpu([](const auto& in, const std::vector<T>& totals, const T& init, auto& out) {
      scan_chunk<Op, T, Inclusive>(in, totals, init, Op{}, out);
    }),
    oa::args(oa::in<scan_blocks>("first"), oa::scalar<std::vector<T>>("block_totals"), oa::scalar<T>("init"),
             oa::out<scan_blocks, std::vector<T>>("d_first")),
    // A sum on a GPU: the chunk's carry from the totals (on the host, as the
    // CPU function), then CUB's scan of the chunk from it.
    oa::device_fn(oa::kernel(OA_STL_GPU((gpu_type<T> && std::is_same_v<Op, split::ops_detail::plus> &&
                                         std::is_same_v<E, T>),
                                        [](const stream_view& s, const auto& in, const std::vector<T>& totals,
                                           const T& init, const auto& out, std::span<std::byte> scratch) {
                                          T carry = init;
                                          for (std::size_t b = 0; b < in.first / scan_block; ++b) carry += totals[b];
                                          oa::cuda::stl::scan_sum<T>(s, in.data(), out.data(), in.size(), carry,
                                                                     Inclusive, scratch);
                                        }))
                      .scratch(scan_block / 32, gpu_scratch_fixed)));

/// `op` is the caller's object: a stateful one (see stateful) is given to
/// every call; any other is its class's default, the same operation.
template <class Op, class T, bool Inclusive, class In>
lazy<std::vector<T>> scan(In&& in, T init, const Op& op) {
  // Two calls read `in`. The caller's object is read where it is; a
  // temporary (a span of a range, a lazy handle, a vector made for the call)
  // is kept by each call that reads it, so the first gets its own copy.
  lazy<std::vector<T>> totals;
  const auto first_pass = [&](auto&& x) {
    if constexpr (stateful<Op>)
      return block_totals_with<Op, T>(std::forward<decltype(x)>(x), op);
    else
      return block_totals<Op, T, element_t<In>>(std::forward<decltype(x)>(x));
  };
  if constexpr (std::is_lvalue_reference_v<In>)
    totals = first_pass(in);
  else
    totals = first_pass(std::remove_cvref_t<In>(in));
  if constexpr (stateful<Op>)
    return scan_with_totals_with<Op, T, Inclusive>(std::forward<In>(in), std::move(totals), init, op);
  else
    return scan_with_totals<Op, T, Inclusive, element_t<In>>(std::forward<In>(in), std::move(totals), init);
}

/// The scan with the caller's operation: its object where it has state,
/// else the reduction its class names (std::plus: split's sum, on a GPU).
template <class T, bool Inclusive, class In, class Op>
lazy<std::vector<T>> scan_with(In&& in, T init, const Op& op) {
  if constexpr (stateful<Op>)
    return scan<Op, T, Inclusive>(std::forward<In>(in), init, op);
  else
    return scan<reduction_t<Op>, T, Inclusive>(std::forward<In>(in), init, reduction_t<Op>{});
}

// Sort, out of core: runs of sort_run elements sorted chunk by chunk (whole
// runs per chunk), then the merge, whose chunks are ranges of ranks of the
// result (sort_kernels.hpp). The merge writes the caller's container.
inline constexpr std::size_t sort_run = std::size_t{1} << 18;
using sort_runs = split::blocks<sort_run>;

template <class T, bool Descending>
inline constexpr auto sorted_runs = oa::annotate<"oa::stl::sort (runs)">(
    oa::cpu([](const auto& in, auto& runs) {
      std::copy(in.begin(), in.end(), runs.begin());
      std::vector<T> scratch(std::min(runs.size(), sort_run));
      for (std::size_t from = 0; from < runs.size(); from += sort_run) {
        const std::size_t n = std::min(sort_run, runs.size() - from);
        sort_detail::radix_sort<T, Descending>(std::span<T>(runs.data() + from, n), std::span<T>(scratch.data(), n));
      }
    }),
    oa::args(oa::in<sort_runs>("first"), oa::out<sort_runs, std::vector<T>>("runs")),
    // On a GPU, CUB's radix sort of each run (the twin: the CPU function, in
    // the emulated device's memory).
    oa::device_fn(oa::kernel(OA_STL_GPU(gpu_type<T>, [](const stream_view& s, const auto& in, const auto& runs,
                                                        std::span<std::byte> scratch) {
                    oa::cuda::stl::sort_runs<T>(s, in.data(), runs.data(), in.size(), sort_run, Descending, scratch);
                  }))
                      .scratch(0, gpu_sort_scratch<T>(sort_run))));

/// Positions [out.first, out.first + out.size()) of the merge of `all`'s runs,
/// into `out`.
template <class T, bool Descending, class Out>
void merge_range(const std::vector<T>& all, Out& out) {
  std::vector<std::span<const T>> runs;
  for (std::size_t from = 0; from < all.size(); from += sort_run)
    runs.emplace_back(all.data() + from, std::min(sort_run, all.size() - from));
  const auto lo = sort_detail::split_at<T, Descending>(runs, out.first);
  const auto hi = sort_detail::split_at<T, Descending>(runs, out.first + out.size());
  sort_detail::merge_parts<T, Descending>(runs, lo, hi, std::span<T>(out.data(), out.size()));
}

template <class T, bool Descending>
inline constexpr auto merge_runs = oa::annotate<"oa::stl::sort (merge)">(
    oa::cpu([](auto& out, const std::vector<T>& all) {
      merge_range<T, Descending>(all, out);
    }),
    oa::args(oa::mut<split::indexed>("first"), oa::scalar<std::vector<T>>("runs")));

/// The merge into a new vector shaped like the runs, whole runs per chunk
/// (`part` only says which): the runs are read whole (`all`, the same
/// value), and nothing of the caller's is updated in place, so nothing is
/// kept for a rollback.
template <class T, bool Descending>
inline constexpr auto merged_runs = oa::annotate<"oa::stl::sort (merge into a new vector)">(
    oa::cpu([](const auto& part, const std::vector<T>& all, auto& out) {
      (void)part;
      merge_range<T, Descending>(all, out);
    }),
    oa::args(oa::in<sort_runs>("runs"), oa::scalar<std::vector<T>>("all runs"),
             oa::out<sort_runs, std::vector<T>>("sorted")));

/// Whether `Compare` sorts in descending order (std::greater).
template <class Compare, class T>
inline constexpr bool descending_v = std::is_same_v<Compare, std::greater<>> || std::is_same_v<Compare, std::greater<T>>;

/// The orders the sorts take: std::less or std::greater.
template <class Compare, class T>
constexpr void check_sort_order() {
  static_assert(descending_v<Compare, T> || std::is_same_v<Compare, std::less<>> || std::is_same_v<Compare, std::less<T>>,
                "oa::stl::sort: the comparison is std::less or std::greater");
}

/// Sorts a vector the caller gives up, holding at most two of its size at
/// once (the input and its runs, then the runs and the result) where
/// oa::stl::sort holds three (the container, its runs, and its bytes kept
/// for a rollback): the input is released once its runs are made. Evaluates.
template <class T, bool Descending>
std::vector<T> sort_owned(std::vector<T> v) {
  lazy<std::vector<T>> runs = sorted_runs<T, Descending>(v);
  runs.get();
  std::vector<T>().swap(v);
  lazy<std::vector<T>> sorted = merged_runs<T, Descending>(runs, runs);
  runs = {};
  return std::move(sorted).take();
}

/// op(init, reduced): a call of one unit, after the reduction.
template <class Op, class R>
inline constexpr auto combine_init = oa::annotate<"oa::stl::reduce (init)">(
    oa::cpu([](const auto& init, const R& reduced) { return Op{}(R(init[0]), reduced); }),
    oa::args(oa::in<contiguous>("init"), oa::scalar<R>("reduced"), oa::ret<split::reduce<Op>, R>));

template <class Op, class R>
lazy<R> with_init(R init, lazy<R> reduced) {
  return combine_init<Op, R>(std::vector<R>{init}, std::move(reduced));
}

// Reductions with the caller's operation object (stateful<Op>), on the host
// path: each block's partial with the object (and the transform, if any),
// then one call folding init and the partials in order with it.
template <class Op, class F, class T>
inline constexpr auto transform_block_totals1_with =
    oa::annotate<"std::transform_reduce (block totals, stateful operation: host)">(
        oa::cpu([](const auto& in, const Op& op, const F& f, auto& totals) {
          for (std::size_t b = 0; b < totals.size(); ++b) {
            const std::size_t from = b * scan_block, to = std::min(in.size(), from + scan_block);
            totals[b] = std::transform_reduce(in.begin() + from, in.begin() + to, Op::template identity<T>(),
                                              in_type_of<T>(op), f);
          }
        }),
        oa::args(oa::in<scan_blocks>("first"), oa::scalar<Op>("reduce_op"), oa::scalar<F>("transform_op"),
                 oa::out<split::contiguous, std::vector<T>>("block_totals")));
template <class Op, class F, class T>
inline constexpr auto transform_block_totals2_with =
    oa::annotate<"std::transform_reduce (binary, block totals, stateful operation: host)">(
        oa::cpu([](const auto& a, const auto& b, const Op& op, const F& f, auto& totals) {
          for (std::size_t k = 0; k < totals.size(); ++k) {
            const std::size_t from = k * scan_block, to = std::min(a.size(), from + scan_block);
            totals[k] = std::transform_reduce(a.begin() + from, a.begin() + to, b.begin() + from,
                                              Op::template identity<T>(), in_type_of<T>(op), f);
          }
        }),
        oa::args(oa::in<scan_blocks>("first1"), oa::in<scan_blocks>("first2"), oa::scalar<Op>("reduce_op"),
                 oa::scalar<F>("transform_op"), oa::out<split::contiguous, std::vector<T>>("block_totals")));

/// The result of a call of one unit: its one partial (merged with nothing).
struct only_partial {
  template <class R>
  static R identity() {
    return R{};
  }
  template <class R>
  R operator()(const R&, const R& b) const {
    return b;
  }
};
template <class Op, class R>
inline constexpr auto fold_with_init = oa::annotate<"oa::stl::reduce (stateful operation: host)">(
    oa::cpu([](const auto& init, const std::vector<R>& totals, const Op& op) {
      R acc = R(init[0]);
      for (const R& t : totals) acc = op(acc, t);
      return acc;
    }),
    oa::args(oa::in<contiguous>("init"), oa::scalar<std::vector<R>>("block_totals"), oa::scalar<Op>("op"),
             oa::ret<split::reduce<only_partial>, R>));

template <class Op, class R>
lazy<R> fold_with(R init, lazy<std::vector<R>> totals, const Op& op) {
  return fold_with_init<Op, R>(std::vector<R>{init}, std::move(totals), op);
}
}  // namespace detail
#undef OA_STL_GPU
#undef OA_STL_GPU_NVCC

/// std::transform(first, last, d_first, unary_op): a new lazy vector.
template <class In, class F>
auto transform(In&& in, F unary_op) {
  using R = std::decay_t<std::invoke_result_t<F&, const detail::element_t<In>&>>;
  if constexpr (detail::on_device<F> && std::is_empty_v<F>)
    return detail::transform1<F, R>(std::forward<In>(in));
  else if constexpr (detail::device_callable<F>)
    return detail::transform1_callable<F, R>(std::forward<In>(in), unary_op);
  else
    return detail::transform1_host<F, R>(std::forward<In>(in), unary_op);
}

/// std::transform(first1, last1, first2, d_first, binary_op): a new lazy vector.
template <detail::not_iterator In1, class In2, class F>
auto transform(In1&& a, In2&& b, F binary_op) {
  using R = std::decay_t<
      std::invoke_result_t<F&, const detail::element_t<In1>&, const detail::element_t<In2>&>>;
  if constexpr (detail::on_device<F> && std::is_empty_v<F>)
    return detail::transform2<F, R>(std::forward<In1>(a), std::forward<In2>(b));
  else if constexpr (detail::device_callable<F>)
    return detail::transform2_callable<F, R>(std::forward<In1>(a), std::forward<In2>(b), binary_op);
  else
    return detail::transform2_host<F, R>(std::forward<In1>(a), std::forward<In2>(b), binary_op);
}

/// std::fill: every element of `range` (the caller's container, updated in
/// place when the call runs) becomes `value`.
template <class Range>
void fill(Range& range, const detail::element_t<Range>& value) {
  static_assert(!is_lazy_v<Range>,
                "oa::stl::fill updates the caller's container in place: pass the container, not a lazy value "
                "(for a new filled vector, transform a lazy one with a functor returning the value)");
  detail::fill<detail::element_t<Range>>(range, value);
}

/// std::copy into a new lazy vector.
template <class In>
auto copy(In&& in) {
  return detail::copy<detail::element_t<In>>(std::forward<In>(in));
}

/// std::reduce(first, last, init, op) (op defaults to std::plus): a lazy value.
template <detail::not_iterator In, class T, class Op = std::plus<>>
lazy<T> reduce(In&& in, T init, Op op = {}) {
  using Red = detail::reduction_t<Op>;
  if constexpr (detail::stateful<Op>)
    return detail::fold_with<Op, T>(init, detail::block_totals_with<Op, T>(std::forward<In>(in), op), op);
  else if constexpr (detail::reduces_on_device<Op>)
    return detail::with_init<Red, T>(init, detail::reduce<Red, T>(std::forward<In>(in)));
  else
    return detail::with_init<Red, T>(init, detail::reduce_host<Red, T>(std::forward<In>(in)));
}

/// std::transform_reduce(first, last, init, reduce_op, transform_op).
template <class In, class T, class Op, class F>
lazy<T> transform_reduce(In&& in, T init, Op reduce_op, F transform_op) {
  using Red = detail::reduction_t<Op>;
  if constexpr (detail::stateful<Op>)
    return detail::fold_with<Op, T>(
        init, detail::transform_block_totals1_with<Op, F, T>(std::forward<In>(in), reduce_op, transform_op), reduce_op);
  else if constexpr (detail::reduces_on_device<Op> && detail::on_device<F> && std::is_empty_v<F>)
    return detail::with_init<Red, T>(init, detail::transform_reduce1<Red, F, T>(std::forward<In>(in)));
  else
    return detail::with_init<Red, T>(init,
                                     detail::transform_reduce1_host<Red, F, T>(std::forward<In>(in), transform_op));
}

/// std::transform_reduce(first1, last1, first2, init, reduce_op, transform_op).
template <detail::not_iterator In1, class In2, class T, class Op, class F>
lazy<T> transform_reduce(In1&& a, In2&& b, T init, Op reduce_op, F transform_op) {
  using Red = detail::reduction_t<Op>;
  if constexpr (detail::stateful<Op>)
    return detail::fold_with<Op, T>(init,
                                    detail::transform_block_totals2_with<Op, F, T>(
                                        std::forward<In1>(a), std::forward<In2>(b), reduce_op, transform_op),
                                    reduce_op);
  else if constexpr (detail::reduces_on_device<Op> && detail::on_device<F> && std::is_empty_v<F>)
    return detail::with_init<Red, T>(
        init, detail::transform_reduce2<Red, F, T>(std::forward<In1>(a), std::forward<In2>(b)));
  else
    return detail::with_init<Red, T>(
        init, detail::transform_reduce2_host<Red, F, T>(std::forward<In1>(a), std::forward<In2>(b), transform_op));
}

/// std::transform_reduce(first1, last1, first2, init): the sum of products.
template <class In1, class In2, class T>
lazy<T> transform_reduce(In1&& a, In2&& b, T init) {
  return oa::stl::transform_reduce(std::forward<In1>(a), std::forward<In2>(b), init, std::plus<>{},
                                   std::multiplies<>{});
}

/// std::inner_product(first1, last1, first2, init): the sum of products.
template <class In1, class In2, class T>
lazy<T> inner_product(In1&& a, In2&& b, T init) {
  return oa::stl::transform_reduce(std::forward<In1>(a), std::forward<In2>(b), init, std::plus<>{},
                                   std::multiplies<>{});
}

/// std::min_element: the smallest element and its index (the first of equal
/// ones; values NaN-free on a GPU).
template <class In>
lazy<position<detail::element_t<In>>> min_element(In&& in) {
  return detail::min_element<position<detail::element_t<In>>>(std::forward<In>(in));
}

/// std::max_element: the largest element and its index (the first of equal
/// ones; values NaN-free on a GPU).
template <class In>
lazy<position<detail::element_t<In>>> max_element(In&& in) {
  return detail::max_element<position<detail::element_t<In>>>(std::forward<In>(in));
}

/// std::iota: element i of `range` (the caller's container, updated in
/// place) becomes value + i, on the host; for floating point this equals
/// std::iota's repeated increments while they are exact.
template <class Range>
void iota(Range& range, detail::element_t<Range> value) {
  static_assert(!is_lazy_v<Range>, "oa::stl::iota updates the caller's container in place: pass the container");
  detail::iota<detail::element_t<Range>>(range, value);
}

/// std::inclusive_scan(first, last, d_first, op): a new lazy vector whose
/// element i combines elements 0..i (op: std::plus by default, or any
/// operation reduce takes). Out of core in two passes; on the host for now.
template <detail::not_iterator In, class Op = std::plus<>>
auto inclusive_scan(In&& in, Op op = {}) {
  using T = detail::element_t<In>;
  return detail::scan_with<T, true>(std::forward<In>(in), detail::reduction_t<Op>::template identity<T>(), op);
}

/// std::inclusive_scan(first, last, d_first, op, init).
template <detail::not_iterator In, class Op, class T>
lazy<std::vector<T>> inclusive_scan(In&& in, Op op, T init) {
  return detail::scan_with<T, true>(std::forward<In>(in), init, op);
}

/// std::exclusive_scan(first, last, d_first, init, op): element i combines
/// init and elements 0..i-1.
template <detail::not_iterator In, class T, class Op = std::plus<>>
lazy<std::vector<T>> exclusive_scan(In&& in, T init, Op op = {}) {
  return detail::scan_with<T, false>(std::forward<In>(in), init, op);
}

/// std::sort(first, last, comp) with comp std::less (the default) or
/// std::greater: `range` (the caller's container) is sorted in place when
/// the calls run. Out of core: sorted runs, then a merge by ranges of ranks;
/// on the host for now. Floating-point values must not be NaN (std::sort's
/// strict weak ordering); -0.0 sorts before +0.0.
template <detail::not_iterator Range, class Compare = std::less<>>
void sort(Range& range, Compare comp = {}) {
  (void)comp;
  using T = detail::element_t<Range>;
  static_assert(!is_lazy_v<Range>, "oa::stl::sort sorts the caller's container in place: pass the container");
  static_assert(std::is_arithmetic_v<T>, "oa::stl::sort: the elements are integers or floating point");
  detail::check_sort_order<Compare, T>();
  constexpr bool descending = detail::descending_v<Compare, T>;
  lazy<std::vector<T>> runs = detail::sorted_runs<T, descending>(range);
  detail::merge_runs<T, descending>(range, std::move(runs));
}

/// The elements of `v`, which the caller gives up, sorted (as sort(), out
/// of core): no copy is kept to put `v` back if the sort fails (it is
/// gone), and `v` is released once its sorted runs are made, so at most two
/// vectors of its size are held at once, where sort() holds three. Evaluates
/// the calls pending, as get() does.
template <class T, class Compare = std::less<>>
std::vector<T> sorted(std::vector<T>&& v, Compare comp = {}) {
  (void)comp;
  static_assert(std::is_arithmetic_v<T>, "oa::stl::sorted: the elements are integers or floating point");
  detail::check_sort_order<Compare, T>();
  return detail::sort_owned<T, detail::descending_v<Compare, T>>(std::move(v));
}

/// std::count: how many elements equal `value`, as a lazy std::int64_t.
template <class In>
lazy<std::int64_t> count(In&& in, const detail::element_t<In>& value) {
  return detail::count<detail::element_t<In>>(std::forward<In>(in), value);
}

/// std::count_if with a predicate, on the host.
template <class In, class P>
lazy<std::int64_t> count_if(In&& in, P p) {
  return detail::count_if<P>(std::forward<In>(in), p);
}

/// std::for_each: f(element) for every element of `range` (the caller's
/// container, updated in place when the call runs; f takes T&). f runs on a
/// device when it is device-callable (see detail::device_callable), else on
/// the host path; the functor std::for_each returns is not returned (chunks
/// run on copies of it).
template <detail::not_iterator Range, class F>
void for_each(Range& range, F f) {
  static_assert(!is_lazy_v<Range>, "oa::stl::for_each updates the caller's container in place: pass the container");
  if constexpr (detail::device_callable<F>)
    detail::for_each<F>(range, f);
  else
    detail::for_each_host<F>(range, f);
}

// ---- contiguous iterator ranges [first, last) --------------------------------
// The same algorithms over [first, last) of contiguous iterators (pointers,
// std::vector's and std::array's iterators). Those that read return lazy
// values, as above (the elements must stay as they are until then); those
// that update the range in place (sort, fill, iota, for_each) run before
// they return, since nothing of the caller's names the range as an object.

namespace detail {
/// [first, last) as a span; a reversed range (last before first) is an
/// oa::invalid_argument naming `call`, before anything is recorded.
template <std::contiguous_iterator It>
std::span<std::remove_reference_t<std::iter_reference_t<It>>> span_of(It first, It last, const char* call) {
  const auto n = last - first;
  if (n < 0)
    throw oa::invalid_argument(call, "last",
                               "precedes first by " + std::to_string(-static_cast<long long>(n)) +
                                   " elements (a reversed range)");
  return {std::to_address(first), static_cast<std::size_t>(n)};
}
}  // namespace detail

template <std::contiguous_iterator It, class Compare = std::less<>>
void sort(It first, It last, Compare comp = {}) {
  auto range = detail::span_of(first, last, "oa::stl::sort");
  oa::stl::sort(range, comp);
  oa::evaluate();
}
template <std::contiguous_iterator It>
void fill(It first, It last, const std::iter_value_t<It>& value) {
  auto range = detail::span_of(first, last, "oa::stl::fill");
  oa::stl::fill(range, value);
  oa::evaluate();
}
template <std::contiguous_iterator It>
void iota(It first, It last, std::iter_value_t<It> value) {
  auto range = detail::span_of(first, last, "oa::stl::iota");
  oa::stl::iota(range, value);
  oa::evaluate();
}
template <std::contiguous_iterator It, class F>
void for_each(It first, It last, F f) {
  auto range = detail::span_of(first, last, "oa::stl::for_each");
  oa::stl::for_each(range, f);
  oa::evaluate();
}
template <std::contiguous_iterator It, class F>
auto transform(It first, It last, F unary_op) {
  return oa::stl::transform(detail::span_of(first, last, "oa::stl::transform"), unary_op);
}
template <std::contiguous_iterator It, class T, class Op = std::plus<>>
lazy<T> reduce(It first, It last, T init, Op op = {}) {
  return oa::stl::reduce(detail::span_of(first, last, "oa::stl::reduce"), init, op);
}
template <std::contiguous_iterator It>
lazy<std::int64_t> count(It first, It last, const std::iter_value_t<It>& value) {
  return oa::stl::count(detail::span_of(first, last, "oa::stl::count"), value);
}
template <std::contiguous_iterator It, class P>
lazy<std::int64_t> count_if(It first, It last, P p) {
  return oa::stl::count_if(detail::span_of(first, last, "oa::stl::count_if"), p);
}
template <std::contiguous_iterator It>
auto min_element(It first, It last) {
  return oa::stl::min_element(detail::span_of(first, last, "oa::stl::min_element"));
}
template <std::contiguous_iterator It>
auto max_element(It first, It last) {
  return oa::stl::max_element(detail::span_of(first, last, "oa::stl::max_element"));
}
template <std::contiguous_iterator It, class Op = std::plus<>>
auto inclusive_scan(It first, It last, Op op = {}) {
  return oa::stl::inclusive_scan(detail::span_of(first, last, "oa::stl::inclusive_scan"), op);
}
template <std::contiguous_iterator It, class T, class Op = std::plus<>>
lazy<std::vector<T>> exclusive_scan(It first, It last, T init, Op op = {}) {
  return oa::stl::exclusive_scan(detail::span_of(first, last, "oa::stl::exclusive_scan"), init, op);
}

}  // namespace oa::stl
