#pragma once
// How a frontend binds an argument to a value of this thread's graph: a
// lazy handle (an edge from its producer), a caller's object (by reference,
// versioned), or a temporary (kept by the call).

#include <memory>
#include <string>
#include <type_traits>

#include "oa/core/borrowed_view.hpp"
#include "oa/core/error.hpp"
#include "oa/core/graph.hpp"
#include "oa/core/lazy.hpp"

namespace oa::detail {

// What an annotated call does that depends on none of its types lives in the
// library (src/core/bind.cpp): each call's instantiation compiles only what
// its types decide.

/// "argument k+1", and " (name)" when the spec is named.
std::string argument_label(std::size_t k, const char* name);

/// The split arguments of one call seen so far: the first sets the units
/// (and, for an element-wise call, the elements per unit) the others must have.
struct unit_check {
  std::size_t units = 0;
  split::shape like{};
  bool have_like = false;
  std::size_t like_arg = 0;
  /// Takes argument k (0-based; `names` the specs' names) of shape `s`;
  /// throws oa::invalid_argument naming it and the first when they differ.
  void take(const split::shape& s, std::size_t k, bool same_inner, const char* fn, const std::string& arg_name,
            const char* const* names);
};

/// The next version of a caller's object that call `fn` updates in place
/// (a mut argument `arg_name`): pending, registered as the object's latest.
value_ptr updated_value(graph& g, const value_state& old, const std::string& arg_name, std::string_view fn);

/// A new value that call `fn` produces (an out argument, its returned
/// chunks or its reduction), pending until the call runs.
value_ptr result_value(graph& g, std::string_view fn, const value_ops* ops);

/// A temporary view of a caller's storage (oa::borrowed_view: a std::span)
/// given as argument `arg_name` of `fn`: the call keeps a copy of the view,
/// bound as the caller's object, so that it is ordered with every other
/// object over the same elements (and, when the call `writes`, updates them).
template <class Split, class T>
value_ptr bind_view(graph& g, const T& a, const value_ops* ops, const char* fn, const std::string& arg_name,
                    bool writes) {
  auto p = std::make_shared<T>(a);
  value_ptr v = g.bind_user_evaluated(p.get(), ops, Split::shape_of(*p), arg_name + " of " + fn, writes);
  v->owned = std::move(p);
  return v;
}

/// The value of argument `arg_name` of function `fn`, viewed through split
/// type Split (whose shape_of gives its shape) and value operations `ops`;
/// `writes`: the call updates it in place.
template <class Split, class T, class A>
value_ptr bind_value(graph& g, A&& a, const value_ops* ops, const char* fn, const std::string& arg_name,
                     bool writes) {
  const std::string label = arg_name + " of " + fn;
  if constexpr (is_lazy_v<A>) {
    OA_EXPECTS(a.valid(), fn, arg_name.c_str(), "empty lazy handle");
    const value_ptr& s = a.state();
    // Produced in this graph under the same split: a graph edge. Produced
    // under another split, or by another thread's graph: evaluate it first.
    if (s->pending() && s->ops == ops && s->owner.lock().get() == &g) return s;
    const T& obj = a.get();
    if (s->user_storage)
      return g.bind_user_evaluated(const_cast<T*>(&obj), ops, Split::shape_of(obj), label, writes);
    auto v = std::make_shared<value_state>();
    v->label = s->label;
    v->ops = ops;
    v->shape = Split::shape_of(obj);
    v->owned = s->owned;
    v->object = s->object;
    return v;
  } else if constexpr (std::is_lvalue_reference_v<A>) {
    return g.bind_user_evaluated(const_cast<T*>(&a), ops, Split::shape_of(a), label, writes);
  } else if constexpr (oa::borrowed_view<T>) {
    return bind_view<Split, T>(g, a, ops, fn, arg_name, writes);
  } else {
    // A temporary: the call keeps it alive.
    auto p = std::make_shared<T>(std::move(a));
    auto v = std::make_shared<value_state>();
    v->label = label;
    v->ops = ops;
    v->shape = Split::shape_of(*p);
    v->object = p.get();
    v->owned = std::move(p);
    return v;
  }
}

}  // namespace oa::detail
