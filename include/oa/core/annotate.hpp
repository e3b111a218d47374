#pragma once
// The annotation language.
//
//   inline constexpr auto add = oa::annotate<"vm::add">(
//       oa::cpu(&vm::add),                        // void(std::span<const double>, std::span<const double>, std::span<double>)
//                                                 // (oa::cpu<R(Args...)>(&vm::f): an overload of f)
//       oa::args(oa::in<oa::split::contiguous>, oa::in<oa::split::contiguous>,
//                oa::out<oa::split::contiguous, std::vector<double>>),
//       oa::device_fn(oa::elementwise(oa::ops::add{})),   // optional: a device equivalent
//       oa::cost(1.0));                                // optional: relative work per unit
//
// Calling `add(a, b)` records the call and returns lazy<std::vector<double>>.
// The caller passes the `in` and `mut` arguments (plain objects or lazy
// handles); `out` arguments become the results; `ret` names the CPU
// function's return value, merged across chunks by its reduction. The CPU
// function receives chunk views: the split type's view of each argument, in
// the order of the specs (`ret` excluded). A mismatch between the specs and
// the function's signature is a compile error that names the function and
// the argument (in the "required from" line of the diagnostic).

#include <array>
#include <span>
#include <boost/hana/count_if.hpp>
#include <boost/hana/find_if.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "oa/core/bind.hpp"
#include "oa/core/cpu_function.hpp"
#include "oa/core/error.hpp"
#include "oa/core/expression.hpp"
#include "oa/core/fusion.hpp"
#include "oa/core/graph.hpp"
#include "oa/core/host_pages.hpp"
#include "oa/core/lazy.hpp"
#include "oa/core/runtime.hpp"
#include "oa/split_types/all.hpp"

namespace oa {

/// A string usable as a template argument: the annotated function's name.
template <std::size_t N>
struct fixed_string {
  char data[N]{};
  constexpr fixed_string(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  constexpr std::string_view view() const { return {data, N - 1}; }
};

namespace spec {
enum class kind { in, mut, out, ret };
/// One argument's description: what the call does with it and its split type.
template <kind K, class Split, class Value = void>
struct arg {
  static constexpr spec::kind role = K;
  using split = Split;
  using value = Value;  // declared value type (optional for in/mut)
  const char* name = nullptr;
  constexpr arg operator()(const char* n) const { return arg{n}; }
};
/// A mut argument the function writes whole without reading it first.
template <class Split, class Value = void>
struct overwrite_arg : arg<kind::mut, Split, Value> {
  static constexpr bool overwrites = true;
  constexpr overwrite_arg operator()(const char* n) const {
    overwrite_arg a;
    a.name = n;
    return a;
  }
};
}  // namespace spec

/// Read-only argument.
template <class Split, class Value = void>
inline constexpr spec::arg<spec::kind::in, Split, Value> in{};
/// Argument read and written in place (the caller's object is updated).
template <class Split, class Value = void>
inline constexpr spec::arg<spec::kind::mut, Split, Value> mut{};

/// The caller's object written whole in place, its old values never read
/// (an output range the caller gives): a mut whose old values a device with
/// its own memory does not copy in. The function must write every element
/// of its chunk before reading any.
template <class Split, class Value = void>
inline constexpr spec::overwrite_arg<Split, Value> overwrite{};
/// Output argument written by the function: becomes the call's result, shaped
/// like the first split argument.
template <class Split, class Result>
inline constexpr spec::arg<spec::kind::out, Split, Result> out{};
/// The function's return value, one per chunk: merged by a reduction split
/// type, or, with a partitioned split type that can store it, the chunk's
/// part of a result shaped like the first split argument (concatenated).
template <class Split, class Result>
inline constexpr spec::arg<spec::kind::ret, Split, Result> ret{};
/// A scalar or small object every chunk sees whole.
template <class Value = void>
inline constexpr spec::arg<spec::kind::in, split::broadcast, Value> scalar{};

/// An element-wise device function: one operation of oa/core/ops.hpp on the
/// operands (the in and mut arguments, an oa::overwrite's excepted, and the
/// scalars, in spec order), or a function that builds an expression of them
/// from one placeholder per operand (a generic lambda; oa/core/expression.hpp).
template <class Op>
struct elementwise_fn {
  using op_type = Op;
  /// An oa::ops functor (it has a name), else an expression builder.
  static constexpr bool is_op = requires { Op::name; };
  Op op;
};
template <class Op>
constexpr elementwise_fn<Op> elementwise(Op op) {
  return {op};
}
/// A device function given as code, for work that is not element-wise (a
/// kernel of the library's own .cu, CUB, cuBLAS). `gpu(stream, views...)`
/// gets an oa::stream_view and the chunk's views of device memory (the CPU
/// function's views, in spec order) and enqueues its work on that stream
/// (oa::cuda::native_stream(stream)) without waiting for it; with a ret spec
/// it gets, last, the device address of the chunk's partial (R*) to write in
/// stream order. `twin` takes the CPU function's parameters and is what the
/// host and emulated devices run in its place (by default the CPU function
/// itself). `gpu` may be nullptr: this build has no GPU version (compiled
/// without CUDA), and the call runs on the host when the device is a GPU.
///
/// `.scratch(per_unit, fixed)`: the GPU function needs device memory to work
/// in (CUB's temporary storage, a second buffer): per_unit bytes per unit of
/// the chunk plus fixed bytes, planned within the budget with the stage's
/// buffers. It gets it, last, as a std::span<std::byte> of device memory.
template <class Gpu, class Twin, bool Scratch = false>
struct kernel_fn {
  Gpu gpu;
  Twin twin;
  std::size_t scratch_per_unit = 0;
  std::size_t scratch_fixed = 0;
  static constexpr bool has_scratch = Scratch;
  constexpr kernel_fn<Gpu, Twin, true> scratch(std::size_t per_unit, std::size_t fixed = 0) const {
    return {gpu, twin, per_unit, fixed};
  }
};
/// kernel(gpu): the CPU function is the twin.
struct cpu_as_twin {};
template <class Gpu>
constexpr kernel_fn<Gpu, cpu_as_twin> kernel(Gpu gpu) {
  return {gpu, {}};
}
template <class Gpu, class Twin>
constexpr kernel_fn<Gpu, Twin> kernel(Gpu gpu, Twin twin) {
  return {gpu, twin};
}
namespace detail {
template <class D>
struct is_kernel_fn : std::false_type {};
template <class Gpu, class Twin, bool S>
struct is_kernel_fn<oa::kernel_fn<Gpu, Twin, S>> : std::true_type {};
}  // namespace detail

template <class D>
struct device_part {
  D d;
};
/// The device equivalent of the CPU function.
template <class D>
constexpr device_part<D> device_fn(D d) {
  return {d};
}
struct no_device {};

struct cost_part {
  double per_unit;
};
/// Relative work per unit, against 1.0 for one element-wise operation.
constexpr cost_part cost(double per_unit) { return {per_unit}; }

template <class... Specs>
struct args_part {
  boost::hana::tuple<Specs...> specs;
};
template <class... Specs>
constexpr args_part<Specs...> args(Specs... s) {
  return {boost::hana::make_tuple(s...)};
}

namespace detail {

template <template <class...> class Tmpl, class X>
struct is_instance : std::false_type {};
template <template <class...> class Tmpl, class... A>
struct is_instance<Tmpl, Tmpl<A...>> : std::true_type {};

// ---- value tables --------------------------------------------------------------
template <class S, class T>
struct partitioned_ops {
  static region host_region(const void* o, split::range r) { return S::host_region(*static_cast<const T*>(o), r); }
  // Results are made with the state recorded for them; values only read
  // (spans, types the split type cannot create) never reach here.
  static std::shared_ptr<void> make(const split::shape& s, const void* state, void*& object) {
    if constexpr (!split::partitioned_result_split<S, T>) {
      throw error(std::string("oa: split type ") + S::name + " cannot create a value of this type");
    } else {
      std::shared_ptr<T> p;
      if constexpr (split::has_state<S, T>) {
        if (!state) throw error(std::string("oa: split type ") + S::name + ": a result has no recorded state");
        const auto& st = *static_cast<const split::state_t<S, T>*>(state);
        if constexpr (requires { S::template make<T>(s, st, &fault_in); })
          p = std::make_shared<T>(S::template make<T>(s, st, &fault_in));
        else
          p = std::make_shared<T>(S::template make<T>(s, st));
      } else {
        if constexpr (requires { S::template make<T>(s, &fault_in); })
          p = std::make_shared<T>(S::template make<T>(s, &fault_in));  // its pages on several threads
        else
          p = std::make_shared<T>(S::template make<T>(s));
      }
      object = p.get();
      return p;
    }
  }
  static region packed_region(std::byte* buffer, const split::shape& s, split::range r, const void* state) {
    if constexpr (requires { S::packed_region(buffer, s, r); })
      return S::packed_region(buffer, s, r);
    else if constexpr (requires { S::template packed_region<T>(buffer, s, r); })
      return S::template packed_region<T>(buffer, s, r);
    else  // the form with the value's unsplit state (a length the shape does not say)
      return S::template packed_region<T>(buffer, s, r, *static_cast<const split::state_t<S, T>*>(state));
  }
  static split::shape shape_of(const void* o) { return S::shape_of(*static_cast<const T*>(o)); }
  static constexpr value_ops table{S::name, split::split_kind::partitioned, &shape_of, &host_region, &packed_region,
                                   &make,   nullptr,                        0};
};

template <class S, class R>
struct reduction_ops {
  static std::shared_ptr<void> make(const split::shape&, const void*, void*& object) {
    auto p = std::make_shared<R>(S::template identity<R>());
    object = p.get();
    return p;
  }
  static void merge(const std::byte* partials, std::size_t n, void* object) {
    std::vector<R> v(n);
    if (n) std::memcpy(v.data(), partials, n * sizeof(R));
    *static_cast<R*>(object) = S::template merge<R>(std::span<const R>(v));
  }
  static constexpr value_ops table{S::name, split::split_kind::reduction, nullptr, nullptr, nullptr, &make, &merge, sizeof(R)};
};

// ---- compile-time checks that name the function and the argument --------------
// Each check is a class template whose instantiation names the function, the
// argument (1-based) and the types, with one static_assert per requirement;
// `value` says whether all hold, so that later code is not instantiated with
// a split type that lacks what it uses (one message, not a cascade).

// The end of every message of the contract checks below.
#define OA_DETAIL_NAMES_T " (the instantiation names the function, the argument index, the split type and T)"
#define OA_DETAIL_NAMES_R " (the instantiation names the function, the argument index, the split type and R)"

/// Every split type: `kind` and `name`, and a kind the spec's role takes.
template <fixed_string Function, std::size_t Argument, class Split, spec::kind Role>
struct check_split_type {
  static constexpr bool has_kind = split::contract::has_kind<Split>;
  static constexpr bool has_name = split::contract::has_name<Split>;
  static_assert(has_kind,
                "oa::annotate: split type has no `static constexpr oa::split::split_kind kind` (the instantiation "
                "names the function, the argument index and the split type)");
  static_assert(has_name,
                "oa::annotate: split type has no `static constexpr const char* name` (the instantiation names the "
                "function, the argument index and the split type)");
  static constexpr split::split_kind kind() {
    if constexpr (has_kind) return Split::kind;
    return split::split_kind::partitioned;
  }
  static constexpr bool role_ok = !has_kind || (Role == spec::kind::ret   ? kind() != split::split_kind::broadcast
                                                : Role == spec::kind::out ? kind() == split::split_kind::partitioned
                                                : Role == spec::kind::mut ? kind() == split::split_kind::partitioned
                                                                          : kind() != split::split_kind::reduction);
  static_assert(role_ok,
                "oa::annotate: this spec takes another kind of split type (in: partitioned or broadcast; mut and "
                "out: partitioned; ret: reduction, or partitioned with store) (the instantiation names the "
                "function, the argument index and the split type)");
  static constexpr bool value = has_kind && has_name && role_ok;
};

/// A partitioned split type's members for values of type T.
template <fixed_string Function, std::size_t Argument, class Split, class T>
struct check_partitioned_split {
  static constexpr bool stateful = split::has_state<Split, T>;
  static_assert(split::contract::has_makeable<Split, T>,
                "oa::annotate: split type has no `makeable<T>` (a static constexpr bool variable "
                "template)" OA_DETAIL_NAMES_T);
  static_assert(split::contract::has_element<Split, T>,
                "oa::annotate: split type has no `element<T>` naming a trivially copyable element "
                "type" OA_DETAIL_NAMES_T);
  static_assert(
      split::contract::has_view<Split, T>,
      "oa::annotate: split type has no `view<T>` and `view<const T>` chunk view types" OA_DETAIL_NAMES_T);
  static_assert(
      split::contract::has_shape_of<Split, T>,
      "oa::annotate: split type has no `shape_of(const T&)` returning oa::split::shape" OA_DETAIL_NAMES_T);
  static_assert(split::contract::has_host_region<Split, T>,
                "oa::annotate: split type has no `host_region(const T&, range)` returning "
                "oa::region" OA_DETAIL_NAMES_T);
  static_assert(split::contract::has_packed_region<Split, T>,
                "oa::annotate: split type has no `packed_region(std::byte*, const shape&, range)` (or "
                "`packed_region<T>`) returning oa::region" OA_DETAIL_NAMES_T);
  static_assert(split::contract::has_state_of<Split, T>,
                "oa::annotate: split type declares `state<T>` but has no `state_of(const T&)` returning "
                "it" OA_DETAIL_NAMES_T);
  static_assert(split::contract::has_state_copy<Split, T>,
                "oa::annotate: split type's `state<T>` is not copy constructible" OA_DETAIL_NAMES_T);
  static_assert(stateful || split::contract::has_make_view<Split, T>,
                "oa::annotate: split type has no `make_view<T>(const region&, const shape&, range)` "
                "returning view<T> (and the same for const T)" OA_DETAIL_NAMES_T);
  static_assert(!stateful || split::contract::has_make_view<Split, T>,
                "oa::annotate: chunk views would lose the value's unsplit state: split type declares "
                "`state<T>` but has no `make_view<T>(const region&, const shape&, range, const "
                "state<T>&)` returning view<T> (and the same for const T)" OA_DETAIL_NAMES_T);
  static constexpr bool value = split::partitioned_split<Split, T>;
};

/// What an out spec's split type needs to create its result of type R.
template <fixed_string Function, std::size_t Argument, class Split, class R>
struct check_result_split {
  static constexpr bool makeable = Split::template makeable<R>;
  static constexpr bool stateful = split::has_state<Split, R>;
  static_assert(makeable,
                "oa::annotate: the result type of an out spec must be one the split type can create (an "
                "owning type: std::vector, Eigen vectors, arrays and matrices; `makeable<R>` is "
                "false)" OA_DETAIL_NAMES_R);
  static_assert(!makeable || stateful || split::contract::has_make<Split, R>,
                "oa::annotate: split type has no `make<R>(const shape&)` returning R" OA_DETAIL_NAMES_R);
  static_assert(!makeable || !stateful || split::contract::has_make_from_state<Split, R>,
                "oa::annotate: this out spec's result would lose its unsplit state: split type declares "
                "`state<R>` but has no `make<R>(const shape&, const state<R>&)` to make a result from a "
                "prototype's state" OA_DETAIL_NAMES_R);
  static constexpr bool value = split::partitioned_result_split<Split, R>;
};

/// Where an out result's state comes from: P, the state of the call's first
/// split argument that has one (void: none has).
template <fixed_string Function, std::size_t Argument, class Split, class R, class P>
struct check_result_state {
  static constexpr bool stateful = split::has_state<Split, R>;
  static constexpr bool from_default = split::contract::has_result_state_default<Split, R>;
  static constexpr bool from_prototype = split::contract::has_result_state_from<Split, R, P>;
  static_assert(!stateful || !std::is_void_v<P> || from_default,
                "oa::annotate: this out spec's result would lose its unsplit state: no split argument of "
                "the call carries state to make it from, and the split type has no "
                "`result_state<R>()`" OA_DETAIL_NAMES_R);
  static_assert(!stateful || std::is_void_v<P> || from_prototype,
                "oa::annotate: this out spec's result would lose its unsplit state: the state of the argument it "
                "is made from (P) does not convert to `state<R>`, and the split type has no "
                "`result_state<R>(const P&)` (the instantiation names the function, the argument index, the split "
                "type, R and P)");
  static constexpr bool value = !stateful || (std::is_void_v<P> ? from_default : from_prototype);
};

/// accepts<T>, which partitioned and broadcast split types have: checked
/// first, since the other members need only exist for the types accepted.
template <fixed_string Function, std::size_t Argument, class Split, class T>
struct check_accepts {
  static_assert(split::contract::has_accepts<Split, T>,
                "oa::annotate: split type has no `accepts<T>` (a static constexpr bool variable "
                "template)" OA_DETAIL_NAMES_T);
  static constexpr bool value = split::contract::has_accepts<Split, T>;
};

/// A ret spec with a partitioned split type: the function returns its chunk
/// of the result, which the split type stores into the chunk's region.
template <fixed_string Function, std::size_t Argument, class Split, class R>
struct check_returned_chunk {
  static_assert(split::contract::has_store<Split, R>,
                "oa::annotate: a ret spec with a partitioned split type needs `store(const R&, const region&, "
                "const shape&, range)` to write the chunk the function returns" OA_DETAIL_NAMES_R);
  static constexpr bool value = split::contract::has_store<Split, R>;
};

/// The return type of a CPU function whose signature is not known (a generic lambda).
struct unknown_return {};
/// What the CPU function returns converts to the ret spec's R.
template <fixed_string Function, std::size_t Argument, class R, class Returned>
struct check_return_type {
  static constexpr bool value = std::is_same_v<Returned, unknown_return> ||
                                (!std::is_void_v<Returned> && std::is_convertible_v<Returned, R>);
  static_assert(std::is_void_v<Returned> || value,
                "oa::annotate: the CPU function's return type does not convert to the ret spec's result type R "
                "(the instantiation names the function, the argument index, R and the return type)");
  static_assert(!std::is_void_v<Returned>,
                "oa::annotate: the CPU function returns nothing, but the annotation has a ret spec (the "
                "instantiation names the function and the argument index)");
};

template <fixed_string Function, std::size_t Argument, class Split, class R>
struct check_reduction_split {
  static_assert(split::contract::has_identity<Split, R>,
                "oa::annotate: split type has no `identity<R>()` returning R" OA_DETAIL_NAMES_R);
  static_assert(
      split::contract::has_combine<Split, R>,
      "oa::annotate: split type has no `combine<R>(const R&, const R&)` returning R" OA_DETAIL_NAMES_R);
  static_assert(
      split::contract::has_merge<Split, R>,
      "oa::annotate: split type has no `merge<R>(std::span<const R>)` returning R" OA_DETAIL_NAMES_R);
  static constexpr bool value = split::reduction_split<Split, R>;
};

/// A view that is a copy of its chunk (the value type itself, owning its
/// storage: a library's container; a span viewing the value is the value
/// type too, but owns nothing) lives in host memory: written by a mut or
/// out call, it must be stored back, and a GPU function cannot be given it.
template <fixed_string Function, std::size_t Argument, class Split, class T, bool Written, bool Gpu>
struct check_copy_view {
  using view = typename Split::template view<T>;
  static constexpr bool copy = std::is_same_v<std::remove_cvref_t<view>, std::remove_cvref_t<T>> &&
                               !std::is_trivially_copyable_v<std::remove_cvref_t<view>>;
  static constexpr bool stored = !copy || !Written || split::contract::has_store<Split, view>;
  static constexpr bool device = !copy || !Gpu || split::contract::has_device_view<Split, T>;
  static_assert(stored,
                "oa::annotate: this argument's chunk view is a copy of the chunk (the value type itself), and the "
                "call writes it: the split type needs `store(const V&, const region&, const shape&, range)` to "
                "write it back, or the update would be lost" OA_DETAIL_NAMES_T);
  static_assert(device,
                "oa::kernel: this argument's chunk view is a copy of the chunk in host memory, which a GPU "
                "function cannot be given: the split type needs `device_view<T>` and `make_device_view<T>(region, "
                "shape, range[, state])` (pointers into device memory)" OA_DETAIL_NAMES_T);
  static constexpr bool value = stored && device;
};

#undef OA_DETAIL_NAMES_T
#undef OA_DETAIL_NAMES_R

template <fixed_string Function, std::size_t Argument, class Split, class Value>
struct check_splittable {
  static_assert(Split::template accepts<Value>,
                "oa::annotate: this argument's split type cannot split the value type given "
                "(the instantiation names the function, the argument index and the types)");
  static constexpr bool value = Split::template accepts<Value>;
};

template <fixed_string Function, std::size_t Argument, class View, class Param>
struct check_parameter {
  static constexpr bool value = std::is_convertible_v<View&, Param> || std::is_constructible_v<Param, View&>;
  static_assert(value,
                "oa::annotate: the CPU function's parameter does not accept the chunk view of this "
                "argument's split type (the instantiation names the function, the argument index, "
                "the view type and the parameter type)");
};

/// The state of a result of type R under split type S, from its prototype's state P.
template <class S, class R, class P>
std::shared_ptr<const void> result_state(const std::shared_ptr<const void>& prototype) {
  if constexpr (!split::has_state<S, R>) {
    return nullptr;
  } else {
    using RS = split::state_t<S, R>;
    if constexpr (std::is_void_v<P>) {
      return std::make_shared<RS>(S::template result_state<R>());
    } else {
      const P& p = *static_cast<const P*>(prototype.get());
      if constexpr (requires { S::template result_state<R>(p); })
        return std::make_shared<RS>(S::template result_state<R>(p));
      else
        return std::make_shared<RS>(p);
    }
  }
}

template <fixed_string Function, std::size_t Declared, std::size_t Parameters>
struct check_arity {
  static_assert(Declared == Parameters,
                "oa::annotate: the number of argument specs (ret excluded) differs from the CPU "
                "function's number of parameters (the instantiation names the function)");
  static constexpr bool value = true;
};

template <fixed_string Function, std::size_t Expected, std::size_t Given>
struct check_call_arity {
  static_assert(Expected == Given,
                "oa: wrong number of arguments to an annotated function (the instantiation names "
                "the function, the number expected and the number given)");
  static constexpr bool value = true;
};

template <fixed_string Function, std::size_t Argument, bool Lvalue>
struct check_mut_lvalue {
  static_assert(Lvalue,
                "oa: a mut argument must be the caller's non-const object (an lvalue), which the "
                "call updates in place, or a temporary view of the caller's storage (a std::span: "
                "oa::borrowed_view<T>); not a temporary that owns its elements "
                "(the instantiation names the function and the argument)");
  static constexpr bool value = true;
};
template <fixed_string Function, std::size_t Argument, bool NotLazy>
struct check_mut_not_lazy {
  static_assert(NotLazy,
                "oa: a mut argument cannot take a lazy value: the call updates the caller's object in place, "
                "and a lazy value has none yet. Pass the object (`auto x = lazy.get();` then the call on x), "
                "or annotate the function with an out argument so that it makes a new lazy value "
                "(the instantiation names the function and the argument)");
  static constexpr bool value = true;
};

/// oa::elementwise(f) with f not an oa::ops operation: f must build an
/// expression from one placeholder per operand.
template <fixed_string Function, std::size_t Operands, bool Traceable>
struct check_expression {
  static_assert(Traceable,
                "oa::elementwise(f): f is not an oa::ops operation and cannot build an expression from one "
                "placeholder per operand (the in and mut arguments, an oa::overwrite's excepted, and the scalars, in "
                "spec order): write it as a "
                "generic lambda, [](auto x, auto k) { return exp(-k * x); }, of the operators and the functions of "
                "oa::expr, unqualified (the instantiation names the function and the number of operands)");
  static constexpr bool value = Traceable;
};

/// Views: the parameters the GPU function was tried with, after the stream.
template <fixed_string Function, bool Callable, class Views>
struct check_gpu_call {
  static_assert(Callable,
                "oa::kernel: the GPU function cannot be called as gpu(oa::stream_view, views...) with the chunk's "
                "device views of the specs (the split type's device_view, else its view), in spec order, with a ret "
                "spec the result's device view (or R* for a reduction), and with .scratch(...) last a "
                "std::span<std::byte> (the instantiation names the function and the parameters it was tried with)");
  static constexpr bool value = Callable;
};

// Parameter types of a function with one signature; unknown for generic lambdas.
template <class F, class = void>
struct signature_of {
  static constexpr bool known = false;
};
template <class R, class... P>
struct signature_of<R (*)(P...)> {
  static constexpr bool known = true;
  using params = std::tuple<P...>;
  using result = R;
};
template <class R, class... P>
struct signature_of<R (*)(P...) noexcept> : signature_of<R (*)(P...)> {};
template <class C, class R, class... P>
struct signature_of<R (C::*)(P...) const> : signature_of<R (*)(P...)> {};
template <class C, class R, class... P>
struct signature_of<R (C::*)(P...) const noexcept> : signature_of<R (*)(P...)> {};
template <class F>
struct signature_of<F, std::void_t<decltype(&F::operator())>> : signature_of<decltype(&F::operator())> {};

/// A function's return type, or unknown_return when its signature is not known.
template <class F, bool = signature_of<F>::known>
struct return_of {
  using type = unknown_return;
};
template <class F>
struct return_of<F, true> {
  using type = typename signature_of<F>::result;
};

template <class A, bool = is_lazy_v<A>>
struct value_type_of_impl {
  using type = std::remove_cvref_t<A>;
};
template <class A>
struct value_type_of_impl<A, true> {
  using type = typename std::remove_cvref_t<A>::value_type;
};
/// The value type behind a call argument: T for T, T& and lazy<T>.
template <class A>
using value_type_of = typename value_type_of_impl<A>::type;

// ---- binders: one per spec, turning a chunk's regions into views ----------------
template <class S, class T, bool Const>
struct part_binder {
  using arg_t = std::conditional_t<Const, const T, T>;
  using view_t = typename S::template view<arg_t>;
  using elem_t = typename S::template element<T>;
  std::size_t slot;  // index into kernel_args::regions
  split::shape shape;
  std::shared_ptr<const void> state;  // the value's unsplit state (split::state_t<S, T>), if it has one
  view_t view(const kernel_args& a) const {
    if constexpr (split::has_state<S, T>)
      return S::template make_view<arg_t>(a.regions[slot], shape, a.r,
                                          *static_cast<const split::state_t<S, T>*>(state.get()));
    else
      return S::template make_view<arg_t>(a.regions[slot], shape, a.r);
  }
  /// What a GPU function gets: the split type's device view, else its view.
  auto device_view(const kernel_args& a) const {
    if constexpr (!split::contract::has_device_view<S, arg_t>)
      return view(a);
    else if constexpr (split::has_state<S, T>)
      return S::template make_device_view<arg_t>(a.regions[slot], shape, a.r,
                                                 *static_cast<const split::state_t<S, T>*>(state.get()));
    else
      return S::template make_device_view<arg_t>(a.regions[slot], shape, a.r);
  }
  /// A writable view that is a copy of the chunk goes back to its region.
  template <class V>
  void write_back(const V& v, const kernel_args& a) const {
    if constexpr (!Const && split::contract::has_store<S, V>) {
      if constexpr (requires { S::shape_of(v); }) {
        const std::size_t got = S::shape_of(v).units;
        if (got != a.r.size())
          throw error("oa: a function left its chunk with " + std::to_string(got) + " units where it had " +
                      std::to_string(a.r.size()) + " (an argument updated in place must keep its length)");
      }
      S::store(v, a.regions[slot], shape, a.r);
    }
  }
  /// A chunk the function returned: stored into its region, its length checked.
  template <class R>
  void store(const R& chunk, const kernel_args& a, const char* fn) const {
    const std::size_t got = S::shape_of(chunk).units;
    if (got != a.r.size())
      throw error(std::string("oa: ") + fn + " returned a chunk of " + std::to_string(got) + " units for a chunk of " +
                  std::to_string(a.r.size()) + " (a function returning its chunk of a result must keep its length)");
    S::store(chunk, a.regions[slot], shape, a.r);
  }
  std::conditional_t<Const, const elem_t*, elem_t*> elements(const kernel_args& a) const {
    return reinterpret_cast<elem_t*>(a.regions[slot].data);
  }
};

template <class B>
struct scalar_binder {
  B value;
  const B& view(const kernel_args&) const { return value; }
  const B& device_view(const kernel_args&) const { return value; }
  void write_back(const B&, const kernel_args&) const {}
};
template <class B>
struct lazy_scalar_binder {
  value_ptr v;
  const B& view(const kernel_args&) const { return *static_cast<const B*>(v->object); }
  const B& device_view(const kernel_args& a) const { return view(a); }
  void write_back(const B&, const kernel_args&) const {}
};

template <class X>
struct is_part_binder : std::false_type {};
template <class S, class T, bool C>
struct is_part_binder<part_binder<S, T, C>> : std::true_type {};

template <class Spec>
constexpr bool is_partitioned = Spec::split::kind == split::split_kind::partitioned;

// The result of a call: a lazy per out and ret spec; void, one, or a tuple.
template <class Spec, bool = Spec::role == spec::kind::out || Spec::role == spec::kind::ret>
struct result_piece {
  using type = std::tuple<>;
};
template <class Spec>
struct result_piece<Spec, true> {
  using type = std::tuple<lazy<typename Spec::value>>;
};
template <class Tuple>
struct call_result {
  using type = Tuple;
};
template <>
struct call_result<std::tuple<>> {
  using type = void;
};
template <class X>
struct call_result<std::tuple<X>> {
  using type = X;
};

}  // namespace detail

/// An annotated function: calling it records a call node and returns lazies.
template <fixed_string Name, class Cpu, class Dev, class... Specs>
class annotated {
  static constexpr std::size_t n_specs = sizeof...(Specs);
  using specs_t = std::tuple<Specs...>;
  template <std::size_t K>
  using spec_at = std::tuple_element_t<K, specs_t>;
  static constexpr std::array<spec::kind, n_specs> kinds{Specs::role...};

  static constexpr std::size_t count(auto pred) {
    std::size_t n = 0;
    for (auto k : kinds) n += pred(k) ? 1 : 0;
    return n;
  }
  static constexpr std::size_t n_params = count([](spec::kind k) { return k == spec::kind::in || k == spec::kind::mut; });
  /// Spec K is an oa::overwrite: its old values are not an operand of the device function.
  template <std::size_t K>
  static constexpr bool overwritten = requires { spec_at<K>::overwrites; };
  /// The operands of an element-wise device function: the in and mut
  /// arguments (an oa::overwrite's old values excepted) and the scalars.
  static constexpr std::size_t n_operands = []<std::size_t... K>(std::index_sequence<K...>) {
    return (std::size_t{0} + ... +
            ((kinds[K] == spec::kind::in || kinds[K] == spec::kind::mut) && !overwritten<K> ? 1 : 0));
  }(std::make_index_sequence<n_specs>{});
  static constexpr std::size_t n_outs = count([](spec::kind k) { return k == spec::kind::out; });
  static constexpr std::size_t n_rets = count([](spec::kind k) { return k == spec::kind::ret; });
  static_assert(n_rets <= 1, "oa::annotate: at most one ret spec");
  static_assert(n_rets == 0 || n_specs == 0 || std::get<n_specs - 1>(std::tuple<Specs...>{}).role == spec::kind::ret,
                "oa::annotate: the ret spec must come last");

  // Spec index of the caller's j-th argument.
  static constexpr std::array<std::size_t, n_params + 1> param_spec = [] {
    std::array<std::size_t, n_params + 1> a{};
    std::size_t j = 0;
    for (std::size_t k = 0; k < n_specs; ++k)
      if (kinds[k] == spec::kind::in || kinds[k] == spec::kind::mut) a[j++] = k;
    return a;
  }();
  static constexpr std::size_t caller_index(std::size_t k) {
    for (std::size_t j = 0; j < n_params; ++j)
      if (param_spec[j] == k) return j;
    return n_params;
  }

 public:
  constexpr annotated(Cpu cpu, Dev dev, double cost, std::tuple<Specs...> specs)
      : cpu_(cpu), dev_(dev), cost_(cost), specs_(specs),
        names_(std::apply([](const auto&... sp) { return std::array<const char*, n_specs>{sp.name...}; }, specs)) {
    (void)checked_declaration(std::make_index_sequence<n_specs>{});
  }

  static constexpr std::string_view name() { return Name.view(); }
  /// What a call returns: void, one lazy, or a tuple of lazies (out and ret specs in order).
  using result_type = typename detail::call_result<decltype(std::tuple_cat(
      std::declval<typename detail::result_piece<Specs>::type>()...))>::type;
  static constexpr bool has_device = !std::is_same_v<Dev, no_device>;
  /// The last spec is a ret whose split type is partitioned: the function
  /// returns its chunk of a result.
  static constexpr bool returns_chunk = [] {
    if constexpr (n_rets == 1)
      return std::tuple_element_t<n_specs - 1, specs_t>::split::kind == split::split_kind::partitioned;
    else
      return false;
  }();
  static constexpr bool has_kernel = detail::is_kernel_fn<Dev>::value;
  static constexpr bool has_elementwise = has_device && !has_kernel;

  template <class... Args>
  auto operator()(Args&&... a) const {
    static_assert(detail::check_call_arity<Name, n_params, sizeof...(Args)>::value);
    // A failed check has named what is wrong: nothing more is instantiated
    // (the argument checks index the arguments by spec: not with too few).
    if constexpr (n_params != sizeof...(Args))
      return result_type();  // not reached: the program does not compile
    else if constexpr (checked_call<std::tuple<Args&&...>>(std::make_index_sequence<n_specs>{}))
      return record(std::make_index_sequence<n_specs>{}, std::forward_as_tuple(std::forward<Args>(a)...));
    else
      return result_type();  // not reached: the program does not compile
  }

 private:
  // Where the annotation is declared: every split type's contract, and the
  // declared value types against the split types and the CPU signature.
  // Specs without a declared value type are checked at the call.
  template <std::size_t... K>
  static constexpr bool checked_declaration(std::index_sequence<K...>) {
    using sig = detail::signature_of<Cpu>;
    if constexpr (!checked_expression())
      return false;
    else if constexpr (sig::known) {
      static_assert(detail::check_arity<Name, n_specs - n_rets, std::tuple_size_v<typename sig::params>>::value);
      if constexpr (n_specs - n_rets != std::tuple_size_v<typename sig::params>)
        return false;
      else
        return (true && ... && check_declared<K>());
    } else {
      return (true && ... && check_declared<K>());
    }
  }
  /// An element-wise device function given as an expression builder builds one.
  static constexpr bool checked_expression() {
    if constexpr (has_elementwise) {
      if constexpr (!Dev::is_op)
        return detail::check_expression<Name, n_operands, expr::traceable<n_operands, typename Dev::op_type>>::value;
    }
    return true;
  }
  template <std::size_t K>
  static constexpr bool check_declared() {
    using S = spec_at<K>;
    if constexpr (!detail::check_split_type<Name, K + 1, typename S::split, S::role>::value)
      return false;
    else if constexpr (std::is_void_v<typename S::value>)
      return true;
    else
      return check_spec<K, typename S::value>();
  }
  /// The device function is oa::kernel(nullptr, ...): no GPU version.
  static constexpr bool gpu_is_null() {
    if constexpr (has_kernel)
      return std::is_null_pointer_v<decltype(Dev::gpu)>;
    else
      return true;
  }
  /// The CPU function's return type (unknown for a generic lambda).
  using returned_type = typename detail::return_of<Cpu>::type;
  // Argument index in messages is 1-based, as a person counts them.
  /// Spec K's split type for values of type T (its contract, whether it
  /// splits T), then T's chunk view against the CPU function's parameter.
  template <std::size_t K, class T>
  static constexpr bool check_spec() {
    using S = spec_at<K>;
    using Split = typename S::split;
    if constexpr (!detail::check_split_type<Name, K + 1, Split, S::role>::value)
      return false;
    else if constexpr (S::role == spec::kind::ret && Split::kind == split::split_kind::reduction) {
      if constexpr (!detail::check_reduction_split<Name, K + 1, Split, T>::value) return false;
      else return detail::check_return_type<Name, K + 1, T, returned_type>::value;
    }
    else if constexpr (!detail::check_accepts<Name, K + 1, Split, T>::value)
      return false;
    else if constexpr (!detail::check_splittable<Name, K + 1, Split, T>::value)
      return false;
    else if constexpr (Split::kind == split::split_kind::broadcast)
      return check_view<K, T>();
    else if constexpr (!detail::check_partitioned_split<Name, K + 1, Split, T>::value) {
      return false;
    } else if constexpr (!detail::check_copy_view<Name, K + 1, Split, T, S::role != spec::kind::in,
                                                   has_kernel && !gpu_is_null()>::value) {
      return false;
    } else if constexpr (S::role == spec::kind::out) {
      if constexpr (!detail::check_result_split<Name, K + 1, Split, T>::value) return false;
      else return check_view<K, T>();
    } else if constexpr (S::role == spec::kind::ret) {
      if constexpr (!detail::check_result_split<Name, K + 1, Split, T>::value) return false;
      else if constexpr (!detail::check_returned_chunk<Name, K + 1, Split, T>::value) return false;
      else return detail::check_return_type<Name, K + 1, T, returned_type>::value;
    } else {
      return check_view<K, T>();
    }
  }
  template <std::size_t K, class T>
  static constexpr bool check_view() {
    using S = spec_at<K>;
    using sig = detail::signature_of<Cpu>;
    if constexpr (!detail::check_splittable<Name, K + 1, typename S::split, T>::value) {
      return false;
    } else if constexpr (sig::known && detail::is_partitioned<S>) {
      constexpr bool is_const = S::role == spec::kind::in;
      using view = typename S::split::template view<std::conditional_t<is_const, const T, T>>;
      using param = std::tuple_element_t<K, typename sig::params>;
      return detail::check_parameter<Name, K + 1, view, param>::value;
    } else if constexpr (sig::known) {
      using param = std::tuple_element_t<K, typename sig::params>;
      return detail::check_parameter<Name, K + 1, const T, param>::value;
    } else {
      return true;
    }
  }

  // At the call: the specs with the types of the arguments given.
  template <class Given, std::size_t... K>
  static constexpr bool checked_call(std::index_sequence<K...>) {
    return (true && ... && check_call_spec<K, Given>());
  }
  template <std::size_t K, class Given>
  static constexpr bool check_call_spec() {
    using S = spec_at<K>;
    if constexpr (S::role == spec::kind::in || S::role == spec::kind::mut)
      return check_spec<K, given_type<K, Given>>();
    else if constexpr (!check_spec<K, typename S::value>())
      return false;  // reported where the annotation is declared
    else if constexpr (S::split::kind == split::split_kind::partitioned)  // out, or a returned chunk
      return detail::check_result_state<Name, K + 1, typename S::split, typename S::value,
                                        typename decltype(prototype_state<K, Given>())::type>::value;
    else
      return true;
  }
  /// The value type of the caller's argument for in/mut spec K.
  template <std::size_t K, class Given>
  using given_type = detail::value_type_of<std::tuple_element_t<caller_index(K), Given>>;
  /// Whether spec J is a split argument whose value carries unsplit state.
  template <std::size_t J, class Given>
  static constexpr bool carries_state() {
    using S = spec_at<J>;
    if constexpr (S::role == spec::kind::in || S::role == spec::kind::mut) {
      if constexpr (split::split_type_of_kind<typename S::split, split::split_kind::partitioned>)
        return split::has_state<typename S::split, given_type<J, Given>>;
      else
        return false;
    } else {
      return false;
    }
  }
  /// The spec an out result at K takes its state from: the first split
  /// argument before it that has state (n_specs: none).
  template <std::size_t K, class Given>
  static constexpr std::size_t prototype_index() {
    return []<std::size_t... J>(std::index_sequence<J...>) {
      std::size_t p = n_specs;
      ((p = (p == n_specs && J < K && carries_state<J, Given>()) ? J : p), ...);
      return p;
    }(std::make_index_sequence<n_specs>{});
  }
  /// The state type of that argument, or void.
  template <std::size_t K, class Given>
  static constexpr auto prototype_state() {
    constexpr std::size_t p = prototype_index<K, Given>();
    if constexpr (p == n_specs)
      return std::type_identity<void>{};
    else
      return std::type_identity<split::state_t<typename spec_at<p>::split, given_type<p, Given>>>{};
  }

  template <std::size_t... K, class Tuple>
  auto record(std::index_sequence<K...>, Tuple&& given) const {
    auto g = detail::current_graph();
    std::lock_guard lock(g->mutex());
    detail::call_node node;
    node.name = std::string(Name.view());
    node.cost_per_unit = cost_;
    std::size_t slot = 0;
    detail::unit_check units;
    // Bind every spec in order; outputs need the shape of the first split argument.
    std::vector<detail::value_ptr> results;
    // The unsplit state of each split argument, for the results made from it.
    std::array<std::shared_ptr<const void>, n_specs> states{};
    // Braced initialisation: binders are made in spec order. An argument
    // refused leaves the objects bound before it at their versions.
    auto binders = [&] {
      try {
        return std::tuple{bind<K>(*g, node, given, slot, units, results, states)...};
      } catch (...) {
        g->forget_versions(node);
        throw;
      }
    }();
    node.units = units.units;
    make_kernels(node, binders, std::index_sequence<K...>{});
    const int id = g->add(std::move(node));
    for (auto& v : results) v->producer = id;
    if constexpr (std::is_void_v<decltype(make_results(results, std::index_sequence<K...>{}))>) {
      detail::recorded(*g, Name.data);
    } else {
      auto out = make_results(results, std::index_sequence<K...>{});
      detail::recorded(*g, Name.data);  // with the results' handles made: they are kept
      return out;
    }
  }

  template <std::size_t K, class Tuple>
  auto bind(detail::graph& g, detail::call_node& node, Tuple& given, std::size_t& slot, detail::unit_check& units,
            std::vector<detail::value_ptr>& results, std::array<std::shared_ptr<const void>, n_specs>& states) const {
    using S = spec_at<K>;
    using Split = typename S::split;
    constexpr const char* fn = Name.data;
    const std::string arg_name = detail::argument_label(K, names_[K]);
    if constexpr (S::role == spec::kind::in || S::role == spec::kind::mut) {
      constexpr std::size_t j = caller_index(K);
      using A = std::tuple_element_t<j, std::remove_reference_t<Tuple>>;
      auto&& a = std::get<j>(given);
      using T = detail::value_type_of<A>;
      if constexpr (Split::kind == split::split_kind::broadcast) {
        static_assert(S::role == spec::kind::in, "oa::annotate: a broadcast argument cannot be mut");
        if constexpr (is_lazy_v<A>) {
          OA_EXPECTS(a.valid(), fn, arg_name.c_str(), "empty lazy handle");
          // Read when the chunk runs; a pending one makes this call wait for
          // it, a failed one fails this call with its error.
          if (a.state()->status != detail::value_status::ready) node.scalars.push_back(a.state());
          return detail::lazy_scalar_binder<T>{a.state()};
        } else {
          return detail::scalar_binder<T>{a};
        }
      } else {
        static_assert(Split::kind == split::split_kind::partitioned,
                      "oa::annotate: in and mut arguments take partitioned or broadcast split types");
        constexpr bool is_mut = S::role == spec::kind::mut;
        if constexpr (is_mut) {
          static_assert(detail::check_mut_not_lazy<Name, K + 1, !is_lazy_v<A>>::value);
          if constexpr (!is_lazy_v<A>)
            static_assert(detail::check_mut_lvalue<Name, K + 1,
                                                   (std::is_lvalue_reference_v<A> &&
                                                    !std::is_const_v<std::remove_reference_t<A>>) ||
                                                       (!std::is_lvalue_reference_v<A> && borrowed_view<T>)>::value);
        }
        const detail::value_ops* ops = &detail::partitioned_ops<Split, T>::table;
        // Forwarded as the caller passed it: a temporary is kept by the call.
        detail::value_ptr v = detail::bind_value<Split, T>(g, std::forward<A>(a), ops, fn, arg_name, is_mut);
        if constexpr (split::has_state<Split, T>) {
          // Read once, when the call is recorded; a result has it from its call.
          if (!v->state) {
            if (!v->object) throw error("oa: " + arg_name + " of " + std::string(Name.view()) + ": no unsplit state recorded");
            v->state = std::make_shared<split::state_t<Split, T>>(Split::state_of(*static_cast<const T*>(v->object)));
          }
        }
        units.take(v->shape, K, has_elementwise, fn, arg_name, names_.data());
        states[K] = v->state;
        detail::node_arg na{is_mut ? detail::arg_role::mut : detail::arg_role::in, v, nullptr};
        na.label = arg_name;
        if constexpr (requires { S::overwrites; }) na.overwrites = S::overwrites;
        if constexpr (is_mut) na.new_value = detail::updated_value(g, *v, arg_name, Name.view());
        node.args.push_back(std::move(na));
        return detail::part_binder<Split, T, !is_mut>{slot++, v->shape, v->state};
      }
    } else if constexpr (S::role == spec::kind::out || Split::kind == split::split_kind::partitioned) {
      // An out argument, or the chunks a function returns: a new value.
      using R = typename S::value;
      if (!units.have_like)
        throw invalid_argument(std::string(Name.view()), arg_name, "a result needs a split argument to take its shape from");
      auto v = detail::result_value(g, Name.view(), &detail::partitioned_ops<Split, R>::table);
      // A 1-D result has one element per unit; a block result keeps the
      // shape of the argument it is shaped like.
      const std::size_t inner = std::is_same_v<Split, split::contiguous> ? 1 : units.like.inner;
      v->shape = {units.like.units, inner, sizeof(typename Split::template element<R>)};
      constexpr std::size_t proto = prototype_index<K, Tuple>();
      v->state = detail::result_state<Split, R, typename decltype(prototype_state<K, Tuple>())::type>(
          proto < n_specs ? states[proto] : nullptr);
      node.args.push_back({detail::arg_role::out, v, nullptr});
      results.push_back(v);
      return detail::part_binder<Split, R, false>{slot++, v->shape, v->state};
    } else {
      using R = typename S::value;
      static_assert(std::is_trivially_copyable_v<R>, "oa::annotate: a reduction result must be trivially copyable");
      if (!units.have_like) throw invalid_argument(std::string(Name.view()), arg_name, "a reduction needs a split argument");
      auto v = detail::result_value(g, Name.view(), &detail::reduction_ops<Split, R>::table);
      node.reduction = v;
      results.push_back(v);
      return std::type_identity<S>{};
    }
  }


  template <class Binders, std::size_t... K>
  void make_kernels(detail::call_node& node, const Binders& b, std::index_sequence<K...>) const {
    node.cpu = host_kernel(cpu_, b);
    if constexpr (has_kernel) {
      auto k = std::make_shared<detail::device_kernel>();
      if constexpr (!std::is_null_pointer_v<decltype(dev_.gpu)>) k->gpu = gpu_entry<Dev::has_scratch>(dev_.gpu, b);
      k->scratch_per_unit = dev_.scratch_per_unit;
      k->scratch_fixed = dev_.scratch_fixed;
      if constexpr (std::is_same_v<decltype(dev_.twin), cpu_as_twin>)
        k->twin = node.cpu;
      else
        k->twin = host_kernel(dev_.twin, b);
      node.kernel = std::move(k);
    } else if constexpr (has_elementwise && checked_expression()) {
      const auto op = device_op();
      node.device_twin = make_twin(op, b, std::index_sequence<K...>{});
      auto d = std::make_shared<detail::elementwise_desc>();
      (describe_operand<K>(*d, node, std::get<K>(b)), ...);
      if constexpr (Dev::is_op)
        d->op = Dev::op_type::name;
      else
        expr::describe(*d, op);  // after the operands, which its placeholders name
      node.elementwise = std::move(d);
    }
  }
  /// The element-wise device function: the oa::ops functor, or the
  /// expression the builder makes of the operands.
  auto device_op() const {
    if constexpr (Dev::is_op)
      return dev_.op;
    else
      return expr::trace<n_operands>(dev_.op);
  }
  /// A function with the CPU function's parameters, over one chunk: its
  /// result, with a ret spec, is the chunk's partial.
  template <class F, class Binders>
  static detail::kernel_fn host_kernel(F f, const Binders& b) {
    return [f, b](const detail::kernel_args& a) {
      if constexpr (returns_chunk) {
        using R = typename spec_at<n_specs - 1>::value;
        const R chunk = invoke_cpu(f, a, b, std::make_index_sequence<n_specs - 1>{});
        std::get<n_specs - 1>(b).store(chunk, a, Name.data);
      } else if constexpr (n_rets == 1) {
        using R = typename spec_at<n_specs - 1>::value;
        R partial = invoke_cpu(f, a, b, std::make_index_sequence<n_specs - 1>{});
        std::memcpy(a.partial, &partial, sizeof(R));
      } else {
        invoke_cpu(f, a, b, std::make_index_sequence<n_specs>{});
      }
    };
  }
  /// An oa::kernel's GPU function over one chunk: the stream, the views,
  /// and with a ret spec the device address of the chunk's partial.
  template <bool Scratch, class F, class Binders>
  static detail::entry_fn gpu_entry(F f, const Binders& b) {
    return [f, b](const detail::kernel_args& a, const stream_view& s) {
      // The chunk's scratch memory, last, when the kernel declares some.
      auto scratch = [&] {
        if constexpr (Scratch)
          return std::make_tuple(std::span<std::byte>(a.scratch, a.scratch_bytes));
        else
          return std::tuple<>{};
      }();
      std::apply(
          [&](auto... extra) {
            if constexpr (returns_chunk) {
              invoke_gpu(f, s, a, b, std::make_index_sequence<n_specs - 1>{}, std::get<n_specs - 1>(b).device_view(a),
                         extra...);
            } else if constexpr (n_rets == 1) {
              using R = typename spec_at<n_specs - 1>::value;
              invoke_gpu(f, s, a, b, std::make_index_sequence<n_specs - 1>{}, reinterpret_cast<R*>(a.partial),
                         extra...);
            } else {
              invoke_gpu(f, s, a, b, std::make_index_sequence<n_specs>{}, extra...);
            }
          },
          scratch);
    };
  }
  template <class F, class Binders, std::size_t... K, class... Partial>
  static void invoke_gpu(const F& f, const stream_view& s, const detail::kernel_args& a, const Binders& b,
                         std::index_sequence<K...>, Partial... partial) {
    constexpr bool callable =
        std::is_invocable_v<const F&, const stream_view&,
                            std::add_lvalue_reference_t<decltype(std::get<K>(b).device_view(a))>..., Partial...>;
    using tried = std::tuple<std::remove_cvref_t<decltype(std::get<K>(b).device_view(a))>..., Partial...>;
    if constexpr (detail::check_gpu_call<Name, callable, tried>::value) {
      std::tuple<decltype(std::get<K>(b).device_view(a))...> views(std::get<K>(b).device_view(a)...);
      std::apply([&](auto&... v) { std::invoke(f, s, v..., partial...); }, views);
    }
  }

  // One spec of an element-wise call, for kernel generation (oa/core/fusion.hpp).
  template <std::size_t K, class X>
  static void describe_operand(detail::elementwise_desc& d, const detail::call_node& node, const X& x) {
    constexpr spec::kind k = kinds[K];
    if constexpr (k == spec::kind::ret && !detail::is_part_binder<X>::value) {
      using S = spec_at<K>;
      static_assert(requires { S::split::op::device_op; },
                    "oa::annotate: a reduction used with a device function needs a device_op name (see reduce.hpp)");
      fusion::describe_reduction<typename S::value>(d, S::split::op::device_op,
                                                    S::split::template identity<typename S::value>());
    } else if constexpr (detail::is_part_binder<X>::value) {
      using E = typename X::elem_t;
      const bool read = k == spec::kind::in || (k == spec::kind::mut && !overwritten<K>);
      fusion::describe_array<E>(d, static_cast<int>(x.slot), read, k != spec::kind::in);
    } else {
      using B = std::remove_cvref_t<decltype(x.view(std::declval<const detail::kernel_args&>()))>;
      static_assert(std::is_arithmetic_v<B>, "oa::annotate: element-wise device functions take arithmetic scalars");
      int scalar = -1;
      for (std::size_t i = 0; i < node.scalars.size(); ++i)
        if constexpr (requires { x.v; })
          if (node.scalars[i] == x.v) scalar = static_cast<int>(i);
      // A lazy scalar is a kernel parameter; a value, a literal in the source.
      if (scalar >= 0)
        fusion::describe_lazy_scalar<B>(d, scalar);
      else
        fusion::describe_scalar(d, x.view(detail::kernel_args{}));
    }
  }

  template <class F, class Binders, std::size_t... K>
  static decltype(auto) invoke_cpu(const F& f, const detail::kernel_args& a, const Binders& b,
                                   std::index_sequence<K...>) {
    using sig = detail::signature_of<F>;
    if constexpr (!sig::known)
      static_assert(std::is_invocable_v<const F&, std::add_lvalue_reference_t<decltype(std::get<K>(b).view(a))>...>,
                    "oa::annotate: the CPU function cannot be called with the chunk views of the specs");
    // Views returned by reference (a lazy scalar's object) stay references:
    // a copy per chunk of a large broadcast value would cost a pass over it.
    std::tuple<decltype(std::get<K>(b).view(a))...> views(std::get<K>(b).view(a)...);
    // Views that are copies of their chunk (the library's own type) go back
    // to their regions once the function has written them.
    auto write_back = [&] { (std::get<K>(b).write_back(std::get<K>(views), a), ...); };
    using result = std::invoke_result_t<const F&, std::add_lvalue_reference_t<decltype(std::get<K>(b).view(a))>...>;
    if constexpr (std::is_void_v<result>) {
      std::apply([&](auto&... v) { std::invoke(f, v...); }, views);
      write_back();
    } else {
      auto r = std::apply([&](auto&... v) { return std::invoke(f, v...); }, views);
      write_back();
      return r;
    }
  }

  // The element-wise device function over one packed chunk: operands are the
  // in and mut arguments in spec order, the result goes to the one written.
  template <class Op, class Binders, std::size_t... K>
  static detail::kernel_fn make_twin(const Op& op, const Binders& b, std::index_sequence<K...>) {
    static_assert(n_outs + n_rets + count([](spec::kind k) { return k == spec::kind::mut; }) == 1,
                  "oa::annotate: an element-wise device function writes exactly one out, mut or ret argument");
    return [op, b](const detail::kernel_args& a) {
      std::size_t inner = 1;
      ((inner = part_inner(std::get<K>(b), inner)), ...);
      const std::size_t n = a.r.size() * inner;
      auto srcs = std::tuple_cat(operand<K>(std::get<K>(b), a)...);
      auto at = [&](std::size_t i) { return std::apply([&](const auto&... s) { return op(s.at(i)...); }, srcs); };
      constexpr std::size_t w = write_index();
      if constexpr (kinds[w] == spec::kind::ret && !returns_chunk) {
        using S = spec_at<w>;
        using R = typename S::value;
        R acc = S::split::template identity<R>();
        for (std::size_t i = 0; i < n; ++i) acc = S::split::template combine<R>(acc, static_cast<R>(at(i)));
        std::memcpy(a.partial, &acc, sizeof(R));
      } else {
        auto* out = std::get<w>(b).elements(a);
        // exp, erf and the like of doubles: the host's vectorized functions
        // (one element at a time, libm takes several times as long).
        if constexpr (host_math::fn_of<Op> != host_math::fn::count &&
                      std::is_same_v<decltype(srcs), std::tuple<elements_at<double>>> &&
                      std::is_same_v<decltype(out), double*>)
          if (host_math::apply(host_math::fn_of<Op>, std::get<0>(srcs).p, out, n)) return;
        for (std::size_t i = 0; i < n; ++i) out[i] = at(i);
      }
    };
  }
  static constexpr std::size_t write_index() {
    for (std::size_t k = 0; k < n_specs; ++k)
      if (kinds[k] != spec::kind::in) return k;
    return 0;
  }
  template <class X>
  static std::size_t part_inner(const X& x, std::size_t current) {
    if constexpr (detail::is_part_binder<X>::value) return x.shape.inner;
    return current;
  }
  template <class E>
  struct elements_at {
    const E* p;
    E at(std::size_t i) const { return p[i]; }
  };
  template <class B>
  struct scalar_at {
    const B* p;
    const B& at(std::size_t) const { return *p; }
  };
  template <std::size_t K, class X>
  static auto operand(const X& x, const detail::kernel_args& a) {
    if constexpr ((kinds[K] != spec::kind::in && kinds[K] != spec::kind::mut) || overwritten<K>)
      return std::tuple<>{};
    else if constexpr (detail::is_part_binder<X>::value)
      return std::make_tuple(elements_at<typename X::elem_t>{x.elements(a)});
    else
      return std::make_tuple(scalar_at<std::remove_cvref_t<decltype(x.view(a))>>{&x.view(a)});
  }

  template <std::size_t... K>
  static auto make_results(const std::vector<detail::value_ptr>& results, std::index_sequence<K...>) {
    auto tup = std::tuple_cat(result_of<K>(results)...);
    if constexpr (std::tuple_size_v<decltype(tup)> == 0)
      return;
    else if constexpr (std::tuple_size_v<decltype(tup)> == 1)
      return std::get<0>(tup);
    else
      return tup;
  }
  // Results are bound in spec order; spec K's is the one after those of the
  // out and ret specs before it. An index fixed at compile time, not counted
  // while tuple_cat's arguments are evaluated, in an order the language
  // leaves open (g++ goes right to left).
  template <std::size_t K>
  static constexpr std::size_t result_index() {
    std::size_t n = 0;
    for (std::size_t j = 0; j < K; ++j) n += kinds[j] == spec::kind::out || kinds[j] == spec::kind::ret;
    return n;
  }
  template <std::size_t K>
  static auto result_of(const std::vector<detail::value_ptr>& results) {
    if constexpr (kinds[K] == spec::kind::out || kinds[K] == spec::kind::ret)
      return std::make_tuple(lazy<typename spec_at<K>::value>(results[result_index<K>()]));
    else
      return std::tuple<>{};
  }

  Cpu cpu_;
  Dev dev_;
  double cost_;
  std::tuple<Specs...> specs_;
  std::array<const char*, n_specs> names_;  // the specs' names, for messages
};

/// Builds an annotated function from its parts: oa::cpu(f) and oa::args(...)
/// are required; oa::device_fn(...) and oa::cost(...) are optional, in any order.
template <fixed_string Name, class... Parts>
constexpr auto annotate(Parts... parts) {
  namespace hana = boost::hana;
  auto all = hana::make_tuple(parts...);
  auto is = [](auto tmpl_check) {
    return [=](const auto& p) { return hana::bool_c<decltype(tmpl_check(p))::value>; };
  };
  auto cpu_p = hana::find_if(all, is([](const auto& p) {
                               return detail::is_instance<cpu_part, std::remove_cvref_t<decltype(p)>>{};
                             }));
  auto args_p = hana::find_if(all, is([](const auto& p) {
                                return detail::is_instance<args_part, std::remove_cvref_t<decltype(p)>>{};
                              }));
  auto dev_p = hana::find_if(all, is([](const auto& p) {
                               return detail::is_instance<device_part, std::remove_cvref_t<decltype(p)>>{};
                             }));
  auto cost_p = hana::find_if(all, is([](const auto& p) { return std::is_same<std::remove_cvref_t<decltype(p)>, cost_part>{}; }));
  static_assert(decltype(hana::is_just(cpu_p))::value, "oa::annotate: the CPU function is required: oa::cpu(f)");
  static_assert(decltype(hana::is_just(args_p))::value, "oa::annotate: the argument specs are required: oa::args(...)");
  auto cpu_f = cpu_p.value().f;
  auto specs = hana::unpack(args_p.value().specs, [](auto... s) { return std::make_tuple(s...); });
  double c = 1.0;
  if constexpr (decltype(hana::is_just(cost_p))::value) c = cost_p.value().per_unit;
  if constexpr (decltype(hana::is_just(dev_p))::value) {
    auto d = dev_p.value().d;
    return std::apply([&](auto... s) { return annotated<Name, decltype(cpu_f), decltype(d), decltype(s)...>(cpu_f, d, c, specs); },
                      specs);
  } else {
    return std::apply(
        [&](auto... s) { return annotated<Name, decltype(cpu_f), no_device, decltype(s)...>(cpu_f, no_device{}, c, specs); },
        specs);
  }
}

}  // namespace oa
