#pragma once
// OA_ANNOTATED_NAME: a library name as programs call it once its library
// is annotated (oa_annotate renames the library's namespace <ns>_plain, and
// the annotation header opens <ns> again).
//
//   namespace stats_oa::calls {   // the library's signatures and default arguments, through oa
//   inline void dnorm(std::span<const double> x, std::span<double> out, double mean = 0.0, double sd = 1.0) {...}
//   }
//   namespace stats {
//   using namespace ::stats_plain;                               // the rest of the library
//   OA_ANNOTATED_NAME(::stats_plain, ::stats_oa::calls, dnorm)   // one line per annotated name
//   }
//
// Then `stats::dnorm(...)` is resolved as the library resolves it: a call
// the library's overload resolution sends to an overload that `calls`
// redeclares runs that one (through oa); every other call runs the
// library's own overload (`stats::dnorm(0.3, 0.0, 1.0)` for one value).
//
// Why a macro: declaring `calls::dnorm` in `stats` hides every overload of
// `stats_plain::dnorm` (a using-directive is not followed once the
// namespace declares the name), and a using-declaration of
// `stats_plain::dnorm` beside it conflicts with the redeclared signature.
// So `stats` gets the redeclared overloads (a using-declaration) and one
// forwarding template for the others. The template takes a call only when
// the library's resolution does not pick a redeclared overload: resolved
// over the library's overloads and `calls`' together (a namespace that
// nominates both), such a call is ambiguous (two functions with the same
// parameters); any other resolves as in the library. The template binds its
// arguments exactly, so where it takes a call it is preferred to the
// redeclared overload.
//
// `calls` must redeclare each overload with the library's parameters and
// default arguments: a call using a default the redeclaration lacks does
// not compile (rather than running elsewhere than the library would).
// Unqualified calls are as before (docs/annotating-a-library.md).

/// In the namespace programs call: `name`'s overloads of `calls`, and every
/// other overload of `plain`'s `name`, as the library resolves them.
/// `plain` and `calls` are fully qualified namespace names.
#define OA_ANNOTATED_NAME(plain, calls, name)                     \
  using calls::name;                                             \
  namespace oa_overloads_of_##name {                             \
  using namespace plain;                                         \
  using namespace calls;                                         \
  }                                                              \
  template <class... A>                                          \
    requires requires(A&&... a) {                                \
      plain::name(static_cast<A&&>(a)...);                       \
      oa_overloads_of_##name::name(static_cast<A&&>(a)...);      \
    }                                                            \
  decltype(auto) name(A&&... a) {                                \
    return plain::name(static_cast<A&&>(a)...);                  \
  }
