#pragma once
// Element-wise calls as kernel generators see them: the description of each
// call (the functor of oa/core/ops.hpp, its operands and their C++ types,
// scalars as exact literals) from which the engine generates one fused CUDA
// kernel per stage (src/core/kernel_source.cpp) and the emulated device runs
// the same stage block by block. oa::annotate fills it in for annotations
// whose device function is oa::elementwise(op).

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "oa/core/graph.hpp"

namespace oa {
namespace detail {

/// The C++ name of an element type a kernel can hold ("" for others).
template <class E>
std::string c_type_name() {
  if constexpr (std::is_same_v<E, bool>) return "bool";
  else if constexpr (std::is_same_v<E, double>) return "double";
  else if constexpr (std::is_same_v<E, float>) return "float";
  else if constexpr (std::is_integral_v<E>)
    return std::string(std::is_signed_v<E> ? "" : "unsigned ") +
           (sizeof(E) == 1 ? "char" : sizeof(E) == 2 ? "short" : sizeof(E) == 4 ? "int" : "long long");
  else
    return "";  // not an element type a kernel can hold
}
/// An exact literal: floating-point values by their bit pattern.
template <class E>
std::string c_literal(const E& v) {
  char buf[64];
  if constexpr (std::is_same_v<E, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<E, double>) {
    unsigned long long bits;
    std::memcpy(&bits, &v, sizeof bits);
    std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxLL)", bits);
    return buf;
  } else if constexpr (std::is_same_v<E, float>) {
    unsigned int bits;
    std::memcpy(&bits, &v, sizeof bits);
    std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", bits);
    return buf;
  } else {
    static_assert(std::is_integral_v<E>, "oa: kernel literals are arithmetic values");
    if constexpr (std::is_signed_v<E>)
      std::snprintf(buf, sizeof buf, "(%s)(%lldLL)", c_type_name<E>().c_str(), static_cast<long long>(v));
    else
      std::snprintf(buf, sizeof buf, "(%s)(%lluULL)", c_type_name<E>().c_str(), static_cast<unsigned long long>(v));
    return buf;
  }
}

}  // namespace detail

namespace fusion {

/// A partitioned argument (slot `slot`): read, written, or both (mut).
template <class E>
void describe_array(detail::elementwise_desc& d, int slot, bool read, bool written) {
  if (read) d.operands.push_back({slot, -1, {}, detail::c_type_name<E>()});
  if (written) {
    d.out_arg = slot;
    d.out_type = detail::c_type_name<E>();
  }
}

/// A scalar every element sees, known when recorded: an exact literal.
template <class B>
void describe_scalar(detail::elementwise_desc& d, const B& value) {
  d.operands.push_back({-1, -1, detail::c_literal(value), detail::c_type_name<B>()});
}

/// A lazy scalar (call_node::scalars[index]): a kernel parameter.
template <class B>
void describe_lazy_scalar(detail::elementwise_desc& d, int index) {
  d.operands.push_back({-1, index, {}, detail::c_type_name<B>()});
}

/// The call's result is a reduction with functor `op` (in oa::ops) and identity `identity`.
template <class R>
void describe_reduction(detail::elementwise_desc& d, const char* op, const R& identity) {
  d.out_type = detail::c_type_name<R>();
  d.reduce_op = op;
  d.reduce_identity = detail::c_literal(identity);
}

}  // namespace fusion
}  // namespace oa
