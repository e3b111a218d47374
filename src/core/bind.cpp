// The parts of recording an annotated call that depend on none of its types.

#include "oa/core/bind.hpp"

namespace oa::detail {

std::string argument_label(std::size_t k, const char* name) {
  std::string s = "argument " + std::to_string(k + 1);
  if (name) s += " (" + std::string(name) + ")";
  return s;
}

void unit_check::take(const split::shape& s, std::size_t k, bool same_inner, const char* fn,
                      const std::string& arg_name, const char* const* names) {
  if (!have_like) {
    have_like = true;
    like = s;
    units = s.units;
    like_arg = k;
    return;
  }
  if (s.units != units)
    throw invalid_argument(fn, arg_name,
                           "has " + std::to_string(s.units) + " units to split where " +
                               argument_label(like_arg, names[like_arg]) + " has " + std::to_string(units) +
                               " (the split arguments of one call must have equal lengths)");
  if (same_inner && s.inner != like.inner)
    throw invalid_argument(fn, arg_name,
                           "has " + std::to_string(s.inner) + " elements per unit where " +
                               argument_label(like_arg, names[like_arg]) + " has " + std::to_string(like.inner) +
                               " (element-wise arguments must have equal shapes)");
}

value_ptr updated_value(graph& g, const value_state& old, const std::string& arg_name, std::string_view fn) {
  auto v = std::make_shared<value_state>();
  v->label = arg_name + " of " + std::string(fn) + " (updated in place)";
  v->ops = old.ops;
  v->shape = old.shape;
  v->object = old.object;
  v->owned = old.owned;  // a temporary view's copy, kept while a version may read it
  v->state = old.state;  // unsplit: chunks cannot change it
  v->user_storage = true;
  v->storage_first = old.storage_first;
  v->storage_last = old.storage_last;
  v->status = value_status::pending;
  v->owner = g.weak_from_this();
  g.set_user_version(old.object, v);
  return v;
}

value_ptr result_value(graph& g, std::string_view fn, const value_ops* ops) {
  auto v = std::make_shared<value_state>();
  v->label = "result of " + std::string(fn);
  v->ops = ops;
  v->status = value_status::pending;
  v->owner = g.weak_from_this();
  return v;
}

}  // namespace oa::detail
