#pragma once
// oa::cpu: an annotation's CPU function, and the overload of a library's
// overloaded name it means.
//
//   oa::cpu(&lib::add)                                        // one function of that name
//   oa::cpu<void(std::span<const double>, double)>(&lib::scale)  // the overload of that signature
//
// A function pointer carries no default arguments: the signature lists every
// parameter, and the annotation a spec for each.
//
// An overloaded name without a signature, or a signature no overload has,
// is a compile error about converting the name to a function pointer type:
// the type asked for (for a missing signature, a type whose name says to add
// one), and, with GCC, the overloads that exist ("candidates are: ...").

#include <type_traits>

namespace oa {

template <class F>
struct cpu_part {
  F f;
};

namespace detail {

/// oa::cpu without a signature.
struct no_signature {};
/// Named in the error for an overloaded name given without a signature.
struct for_an_overloaded_name_write_oa_cpu_R_Args_with_its_signature {};

/// What the argument converts to when the compiler cannot deduce it (an
/// overloaded name): the signature asked for, or the type naming the fix.
template <class Sig>
struct cpu_target {
  using type = Sig*;
};
template <>
struct cpu_target<no_signature> {
  using type = void (*)(for_an_overloaded_name_write_oa_cpu_R_Args_with_its_signature);
};

/// oa::cpu<Sig>(f) with a function f of another signature (a name with one
/// function is deduced as it is, not converted).
template <class Sig, class F>
struct check_cpu_signature {
  static constexpr bool value = std::is_convertible_v<F, Sig*>;
  static_assert(value,
                "oa::cpu<R(Args...)>(f): f is not a function of that signature (the instantiation names the "
                "signature asked for, then f's type)");
};

}  // namespace detail

/// The CPU function, called on chunk views; `Sig`, a function type R(Args...),
/// picks one overload of an overloaded name.
template <class Sig = detail::no_signature, class F = typename detail::cpu_target<Sig>::type>
constexpr auto cpu(F f) {
  if constexpr (std::is_same_v<Sig, detail::no_signature>) {
    return cpu_part<F>{f};
  } else {
    static_assert(std::is_function_v<Sig>, "oa::cpu<Sig>(f): Sig must be a function type, R(Args...)");
    if constexpr (std::is_function_v<Sig> && detail::check_cpu_signature<Sig, F>::value)
      return cpu_part<Sig*>{f};
    else
      return cpu_part<Sig*>{nullptr};  // not reached: the program does not compile
  }
}

}  // namespace oa
