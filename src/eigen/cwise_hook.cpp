// Eigen's coefficient-wise assignments, taken from its Assignment template
// (oa/eigen/offload.hpp) as a flattened tree, become engine calls: one per
// operation, each an element-wise call with its oa::ops functor, so the
// engine forms one stage of them (one fused kernel per chunk on a GPU;
// chunk-sized temporaries on the host) and the last writes the caller's
// destination. Evaluated at once: an Eigen statement holds its value when it
// ends. Leaves are borrowed from Eigen's storage for the call.

// First: Eigen storage this unit frees may come from the pinned pool.
#include "oa/eigen/pinned_storage.hpp"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "oa/core/annotate.hpp"
#include "oa/core/fusion.hpp"
#include "oa/core/ops.hpp"
#include "oa/core/runtime.hpp"
#include "eigen/evaluate_hooked.hpp"
#include "oa/eigen/hooks.hpp"

namespace oa::eigen_hooks {

namespace {

std::size_t bytes_of(scalar_type t) { return t == scalar_type::f64 ? 8 : t == scalar_type::f32 ? 4 : sizeof(bool); }

const char* type_name(scalar_type t) {
  return t == scalar_type::f64 ? "double" : t == scalar_type::f32 ? "float" : "bool";
}

/// The oa::ops functor of an operation (casts convert through the node's type).
const char* ops_name(cwise_op op) {
  switch (op) {
    case cwise_op::add: return "add";
    case cwise_op::sub: return "sub";
    case cwise_op::mul: return "mul";
    case cwise_op::div: return "div";
    case cwise_op::min: return "min";
    case cwise_op::max: return "max";
    case cwise_op::pow: return "pow";
    case cwise_op::less: return "less";
    case cwise_op::less_equal: return "less_equal";
    case cwise_op::greater: return "greater";
    case cwise_op::greater_equal: return "greater_equal";
    case cwise_op::equal_to: return "equal_to";
    case cwise_op::not_equal_to: return "not_equal_to";
    case cwise_op::select: return "select";
    case cwise_op::exp: return "exp";
    case cwise_op::log: return "log";
    case cwise_op::log2: return "log2";
    case cwise_op::sqrt: return "sqrt";
    case cwise_op::sin: return "sin";
    case cwise_op::cos: return "cos";
    case cwise_op::tan: return "tan";
    case cwise_op::asin: return "asin";
    case cwise_op::acos: return "acos";
    case cwise_op::atan: return "atan";
    case cwise_op::tanh: return "tanh";
    case cwise_op::erf: return "erf";
    case cwise_op::abs: return "abs";
    case cwise_op::square: return "square";
    case cwise_op::negate: return "negate";
    case cwise_op::cast: return "identity";
    case cwise_op::leaf:
    case cwise_op::constant: break;
  }
  return nullptr;
}

enum class arity { unary, binary, compare, select, cast, none };

arity arity_of(cwise_op op) {
  switch (op) {
    case cwise_op::add: case cwise_op::sub: case cwise_op::mul: case cwise_op::div:
    case cwise_op::min: case cwise_op::max: case cwise_op::pow:
      return arity::binary;
    case cwise_op::less: case cwise_op::less_equal: case cwise_op::greater: case cwise_op::greater_equal:
    case cwise_op::equal_to: case cwise_op::not_equal_to:
      return arity::compare;
    case cwise_op::select: return arity::select;
    case cwise_op::cast: return arity::cast;
    case cwise_op::leaf: case cwise_op::constant: return arity::none;
    default: return arity::unary;
  }
}

// ---- the caller's arrays, borrowed --------------------------------------------

struct borrowed_array {
  std::byte* data;
  std::size_t size;
  std::size_t elem_bytes;
};

split::shape shape_of(const void* object) {
  const auto& b = *static_cast<const borrowed_array*>(object);
  return {b.size, 1, b.elem_bytes};
}
region host_region(const void* object, split::range r) {
  const auto& b = *static_cast<const borrowed_array*>(object);
  const std::size_t w = r.size() * b.elem_bytes;
  return {b.data ? b.data + r.begin * b.elem_bytes : nullptr, w, 1, w};
}
region packed_region(std::byte* buffer, const split::shape& s, split::range r, const void*) {
  const std::size_t w = r.size() * s.elem_bytes;
  return {buffer, w, 1, w};
}
constexpr detail::value_ops borrowed_ops{split::contiguous::name, split::split_kind::partitioned, &shape_of,
                                         &host_region, &packed_region, nullptr, nullptr, 0};

detail::value_ptr borrowed(borrowed_array& b, std::string label) {
  auto v = std::make_shared<detail::value_state>();
  v->label = std::move(label);
  v->ops = &borrowed_ops;
  v->shape = shape_of(&b);
  v->object = &b;
  v->user_storage = true;
  return v;
}

/// A temporary of the tree: storage the runtime owns if it must have any.
detail::value_ptr temporary(scalar_type t, std::size_t size, const std::shared_ptr<detail::graph>& g) {
  auto v = std::make_shared<detail::value_state>();
  v->label = "a temporary of an Eigen expression";
  if (t == scalar_type::f64) v->ops = &detail::partitioned_ops<split::contiguous, Eigen::ArrayXd>::table;
  else if (t == scalar_type::f32) v->ops = &detail::partitioned_ops<split::contiguous, Eigen::ArrayXf>::table;
  else v->ops = &detail::partitioned_ops<split::contiguous, Eigen::Array<bool, Eigen::Dynamic, 1>>::table;
  v->shape = {size, 1, bytes_of(t)};
  v->status = detail::value_status::pending;
  v->owner = g->weak_from_this();
  return v;
}

// ---- one operation over a chunk, on the host ------------------------------------

struct operand {
  int slot = -1;  // argument of the call; -1: a constant
  double value = 0;
  scalar_type type = scalar_type::f64;
};
struct op_call {
  cwise_op op;
  scalar_type type;  // of the result
  std::vector<operand> in;
  int out = -1;  // argument written
};

template <class T>
using array = Eigen::Array<T, Eigen::Dynamic, 1>;

/// Calls f with operand o over the chunk: a map of its region, or a constant.
template <class T, class F>
void with(const operand& o, const detail::kernel_args& k, Eigen::Index n, F&& f) {
  if (o.slot < 0) {
    f(array<T>::Constant(n, static_cast<T>(o.value)));
  } else {
    f(Eigen::Map<const array<T>>(reinterpret_cast<const T*>(k.regions[o.slot].data), n));
  }
}

/// Calls f with a type tag of t (float, double).
template <class F>
void with_real(scalar_type t, F&& f) {
  if (t == scalar_type::f64) f(double{});
  else f(float{});
}
template <class F>
void with_any(scalar_type t, F&& f) {
  if (t == scalar_type::boolean) f(bool{});
  else with_real(t, f);
}

std::optional<host_math::fn> vector_math(cwise_op op) {
  switch (op) {
    case cwise_op::exp: return host_math::fn::exp;
    case cwise_op::log2: return host_math::fn::log2;
    case cwise_op::sin: return host_math::fn::sin;
    case cwise_op::cos: return host_math::fn::cos;
    case cwise_op::asin: return host_math::fn::asin;
    case cwise_op::erf: return host_math::fn::erf;
    default: return std::nullopt;
  }
}

template <class T>
void unary(const op_call& c, const detail::kernel_args& k, Eigen::Index n) {
  Eigen::Map<array<T>> out(reinterpret_cast<T*>(k.regions[c.out].data), n);
  if constexpr (std::is_same_v<T, double>) {
    const operand& a = c.in[0];
    if (const auto f = vector_math(c.op); f && a.slot >= 0)
      if (host_math::apply(*f, reinterpret_cast<const double*>(k.regions[a.slot].data), out.data(),
                           static_cast<std::size_t>(n)))
        return;
  }
  with<T>(c.in[0], k, n, [&](const auto& a) {
    switch (c.op) {
      case cwise_op::exp: out = a.exp(); break;
      case cwise_op::log: out = a.log(); break;
      case cwise_op::log2: out = a.log2(); break;
      case cwise_op::sqrt: out = a.sqrt(); break;
      case cwise_op::sin: out = a.sin(); break;
      case cwise_op::cos: out = a.cos(); break;
      case cwise_op::tan: out = a.tan(); break;
      case cwise_op::asin: out = a.asin(); break;
      case cwise_op::acos: out = a.acos(); break;
      case cwise_op::atan: out = a.atan(); break;
      case cwise_op::tanh: out = a.tanh(); break;
      case cwise_op::erf: out = a.erf(); break;
      case cwise_op::abs: out = a.abs(); break;
      case cwise_op::square: out = a.square(); break;
      case cwise_op::negate: out = -a; break;
      default: throw error("oa: Eigen hook: operation is not unary");
    }
  });
}

template <class T>
void binary(const op_call& c, const detail::kernel_args& k, Eigen::Index n) {
  Eigen::Map<array<T>> out(reinterpret_cast<T*>(k.regions[c.out].data), n);
  with<T>(c.in[0], k, n, [&](const auto& a) {
    with<T>(c.in[1], k, n, [&](const auto& b) {
      switch (c.op) {
        case cwise_op::add: out = a + b; break;
        case cwise_op::sub: out = a - b; break;
        case cwise_op::mul: out = a * b; break;
        case cwise_op::div: out = a / b; break;
        case cwise_op::min: out = (b < a).select(b, a); break;  // oa::ops::min
        case cwise_op::max: out = (a < b).select(b, a); break;  // oa::ops::max
        case cwise_op::pow: out = a.pow(b); break;
        default: throw error("oa: Eigen hook: operation is not binary");
      }
    });
  });
}

template <class U>
void compare(const op_call& c, const detail::kernel_args& k, Eigen::Index n) {
  Eigen::Map<array<bool>> out(reinterpret_cast<bool*>(k.regions[c.out].data), n);
  with<U>(c.in[0], k, n, [&](const auto& a) {
    with<U>(c.in[1], k, n, [&](const auto& b) {
      switch (c.op) {
        case cwise_op::less: out = a < b; break;
        case cwise_op::less_equal: out = a <= b; break;
        case cwise_op::greater: out = a > b; break;
        case cwise_op::greater_equal: out = a >= b; break;
        case cwise_op::equal_to: out = a == b; break;
        case cwise_op::not_equal_to: out = a != b; break;
        default: throw error("oa: Eigen hook: operation is not a comparison");
      }
    });
  });
}

template <class T>
void select(const op_call& c, const detail::kernel_args& k, Eigen::Index n) {
  Eigen::Map<array<T>> out(reinterpret_cast<T*>(k.regions[c.out].data), n);
  with<bool>(c.in[0], k, n, [&](const auto& cond) {
    with<T>(c.in[1], k, n, [&](const auto& a) {
      with<T>(c.in[2], k, n, [&](const auto& b) { out = cond.select(a, b); });
    });
  });
}

void run_op(const op_call& c, const detail::kernel_args& k) {
  const auto n = static_cast<Eigen::Index>(k.r.size());
  if (n == 0) return;
  switch (arity_of(c.op)) {
    case arity::unary: with_real(c.type, [&](auto t) { unary<decltype(t)>(c, k, n); }); break;
    case arity::binary: with_real(c.type, [&](auto t) { binary<decltype(t)>(c, k, n); }); break;
    case arity::compare: with_real(c.in[0].type, [&](auto t) { compare<decltype(t)>(c, k, n); }); break;
    case arity::select: with_real(c.type, [&](auto t) { select<decltype(t)>(c, k, n); }); break;
    case arity::cast:
      with_real(c.type, [&](auto t) {
        using T = decltype(t);
        Eigen::Map<array<T>> out(reinterpret_cast<T*>(k.regions[c.out].data), n);
        with_any(c.in[0].type, [&](auto u) {
          with<decltype(u)>(c.in[0], k, n, [&](const auto& a) { out = a.template cast<T>(); });
        });
      });
      break;
    case arity::none: throw error("oa: Eigen hook: a leaf is not an operation");
  }
}

// ---- the tree, checked, then recorded -------------------------------------------

/// Why the engine cannot take this tree, or nullptr: types oa's operations
/// lack (the kernels and host functions cover these combinations).
const char* unsupported(const cwise_call& call) {
  if (call.count < 1 || call.size < 0) return "an empty expression";
  for (int i = 0; i < call.count; ++i) {
    const cwise_node& n = call.nodes[i];
    const auto type_of = [&](int j) { return call.nodes[j].type; };
    for (int j : {n.a, n.b, n.c})
      if (j >= i) return "a malformed expression";
    const bool real = n.type != scalar_type::boolean;
    switch (arity_of(n.op)) {
      case arity::none:
        if (n.op == cwise_op::leaf && !n.data && call.size > 0) return "an operand without storage";
        break;
      case arity::unary:
        if (n.a < 0 || !real || type_of(n.a) != n.type) return "a function of mixed types";
        break;
      case arity::binary:
        if (n.a < 0 || n.b < 0 || !real || type_of(n.a) != n.type || type_of(n.b) != n.type)
          return "an operator of mixed types";
        break;
      case arity::compare:
        if (n.a < 0 || n.b < 0 || real || type_of(n.a) != type_of(n.b) || type_of(n.a) == scalar_type::boolean)
          return "a comparison of booleans or of mixed types";
        break;
      case arity::select:
        if (n.a < 0 || n.b < 0 || n.c < 0 || !real || type_of(n.a) != scalar_type::boolean ||
            type_of(n.b) != n.type || type_of(n.c) != n.type)
          return "a select of mixed types";
        break;
      case arity::cast:
        if (n.a < 0 || !real) return "a cast to bool";
        break;
    }
  }
  if (call.nodes[call.count - 1].type != call.dst_type) return "a destination of another type";
  if (call.dst_type == scalar_type::boolean) return "a boolean destination";
  return nullptr;
}

/// Whether [p, p + bytes) and [q, q + bytes2) overlap.
bool overlaps(const void* p, std::size_t bytes, const void* q, std::size_t bytes2) {
  const auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(q);
  return a < b + bytes2 && b < a + bytes;
}

void decline(const char* op, const std::string& why, std::ptrdiff_t size) {
  detail::note_not_offloaded(op, why, "elements=" + std::to_string(size));
}

// Reductions, merged chunk by chunk in order.
using split::product;

template <class T, class F>
decltype(auto) with_reduction(reduce_kind k, F&& f) {
  switch (k) {
    case reduce_kind::sum: return f(split::sum{});
    case reduce_kind::prod: return f(product{});
    case reduce_kind::min: return f(split::min{});
    case reduce_kind::max: return f(split::max{});
  }
  return f(split::sum{});
}

template <class T, class A>
T reduce_chunk(reduce_kind k, const A& a) {
  switch (k) {
    case reduce_kind::sum: return a.sum();
    case reduce_kind::prod: return a.prod();
    // NaN when any coefficient is, as split::min and max merge the chunks.
    case reduce_kind::min: return a.template minCoeff<Eigen::PropagateNaN>();
    case reduce_kind::max: return a.template maxCoeff<Eigen::PropagateNaN>();
  }
  return T(0);
}

/// A chunk's partial: the node's operation over the chunk (none for a leaf
/// reduced as it is), reduced.
void reduce_op(const op_call& c, reduce_kind kind, const detail::kernel_args& k) {
  const auto n = static_cast<Eigen::Index>(k.r.size());
  with_real(c.type, [&](auto t) {
    using T = decltype(t);
    T partial = with_reduction<T>(kind, [](auto split) { return decltype(split)::template identity<T>(); });
    if (n > 0 && c.op == cwise_op::leaf) {
      partial = reduce_chunk<T>(kind, Eigen::Map<const array<T>>(reinterpret_cast<const T*>(k.regions[0].data), n));
    } else if (n > 0) {
      array<T> values(n);
      // The call's regions its operands index (a constant has none), then the values'.
      std::size_t used = 0;
      for (const operand& a : c.in) used = std::max(used, static_cast<std::size_t>(a.slot + 1));
      std::vector<region> regions(k.regions, k.regions + used);
      const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
      regions.push_back({reinterpret_cast<std::byte*>(values.data()), bytes, 1, bytes});
      op_call to_values = c;
      to_values.out = static_cast<int>(regions.size() - 1);
      detail::kernel_args with_values = k;
      with_values.regions = regions.data();
      run_op(to_values, with_values);
      partial = reduce_chunk<T>(kind, values);
    }
    std::memcpy(k.partial, &partial, sizeof(T));
  });
}

class recorder {
 public:
  /// An assignment; or, with `reduction`, the reduction of the tree (call's
  /// destination unused).
  recorder(const cwise_call& call, std::shared_ptr<detail::graph> g, std::optional<reduce_kind> reduction = {})
      : call_(call), g_(std::move(g)), size_(static_cast<std::size_t>(call.size)), reduction_(reduction) {
    dst_ = {static_cast<std::byte*>(call.dst), size_, bytes_of(call.dst_type)};
    leaves_.reserve(static_cast<std::size_t>(call.count));  // stable addresses: values point at them
  }

  /// Records the calls; returns the value the destination ends as (the
  /// reduction's value).
  detail::value_ptr record() {
    const int root = call_.count - 1;
    if (reduction_) {
      values_.assign(static_cast<std::size_t>(call_.count), nullptr);
      for (int i = 0; i < root; ++i) {
        const cwise_node& n = call_.nodes[i];
        if (n.op == cwise_op::leaf) values_[i] = leaf(n);
        else if (n.op != cwise_op::constant) values_[i] = add(i, target::temporary);
      }
      if (call_.nodes[root].op == cwise_op::leaf) values_[root] = leaf(call_.nodes[root]);
      return add(root, target::reduction);
    }
    const std::size_t dst_bytes = size_ * bytes_of(call_.dst_type);
    bool aliased = call_.assign != assign_kind::assign;  // dst op= tree reads dst
    for (int i = 0; i < call_.count; ++i)
      if (call_.nodes[i].op == cwise_op::leaf)
        aliased = aliased || overlaps(call_.nodes[i].data, size_ * bytes_of(call_.nodes[i].type), call_.dst, dst_bytes);

    // The destination: written in place (its old value may be read, and a
    // failure must leave it as it was), or written only.
    dst_value_ = borrowed(dst_, "the destination of an Eigen assignment");
    values_.assign(static_cast<std::size_t>(call_.count), nullptr);
    for (int i = 0; i < call_.count; ++i) {
      const cwise_node& n = call_.nodes[i];
      if (n.op == cwise_op::constant) continue;
      if (n.op == cwise_op::leaf) {
        values_[i] = leaf(n);
        continue;
      }
      const bool last = i == root && call_.assign == assign_kind::assign;
      values_[i] = add(i, last ? (aliased ? target::in_place : target::destination) : target::temporary);
    }
    if (call_.assign == assign_kind::assign) return result_;
    // dst op= tree: one more call, dst's old value with the tree's.
    const cwise_op op = call_.assign == assign_kind::add   ? cwise_op::add
                        : call_.assign == assign_kind::sub ? cwise_op::sub
                        : call_.assign == assign_kind::mul ? cwise_op::mul
                                                           : cwise_op::div;
    compound(op, root);
    return result_;
  }

 private:
  enum class target { temporary, destination, in_place, reduction };

  detail::value_ptr leaf(const cwise_node& n) {
    // The destination read as an operand is the destination's value.
    if (n.data == call_.dst && n.type == call_.dst_type) return dst_value_;
    leaves_.push_back({static_cast<std::byte*>(const_cast<void*>(n.data)), size_, bytes_of(n.type)});
    return borrowed(leaves_.back(), "an operand of an Eigen assignment");
  }

  /// Operand j of a call; `dst_slot`: the slot of the destination when the
  /// call updates it in place (its old value is read there), else -1.
  operand operand_of(int j, detail::call_node& node, detail::elementwise_desc& d, int& slot, int dst_slot = -1) {
    const cwise_node& n = call_.nodes[j];
    operand o;
    o.type = n.type;
    if (dst_slot >= 0 && values_[j] == dst_value_) {
      o.slot = dst_slot;
      d.operands.push_back({dst_slot, -1, {}, type_name(n.type)});
      return o;
    }
    if (n.op == cwise_op::constant) {
      o.value = n.value;
      with_any(n.type, [&](auto t) {
        using T = decltype(t);
        fusion::describe_scalar(d, static_cast<T>(n.value));
      });
      return o;
    }
    o.slot = slot++;
    node.args.push_back({detail::arg_role::in, values_[j], nullptr});
    d.operands.push_back({o.slot, -1, {}, type_name(n.type)});
    return o;
  }

  detail::value_ptr add(int i, target t) {
    const cwise_node& n = call_.nodes[i];
    if (t == target::reduction) return add_reduction(i);
    detail::call_node node;
    node.name = std::string("Eigen::") + (n.op == cwise_op::cast ? "cast" : ops_name(n.op));
    node.units = size_;
    auto d = std::make_shared<detail::elementwise_desc>();
    d->op = ops_name(n.op);
    op_call c{n.op, n.type, {}, -1};
    int slot = 0;
    detail::value_ptr out;
    if (t == target::in_place) {
      out = written(node, t);  // slot 0: the destination, read and written
      c.out = slot++;
    }
    for (int j : {n.a, n.b, n.c})
      if (j >= 0) c.in.push_back(operand_of(j, node, *d, slot, t == target::in_place ? 0 : -1));
    if (t == target::temporary) {
      out = temporary(n.type, size_, g_);
      c.out = slot;
      node.args.push_back({detail::arg_role::out, out, nullptr});
    } else if (t == target::destination) {
      c.out = slot;
      out = written(node, t);
    }
    d->out_arg = c.out;
    d->out_type = type_name(n.type);
    finish(node, std::move(c), std::move(d));
    out->producer = g_->add(std::move(node));
    return out;
  }

  /// The reduction of node i: its operation and the reduction in one call
  /// (a leaf is reduced as it is).
  detail::value_ptr add_reduction(int i) {
    const cwise_node& n = call_.nodes[i];
    const reduce_kind kind = *reduction_;
    detail::call_node node;
    node.name = std::string("Eigen::") + (kind == reduce_kind::sum    ? "sum"
                                          : kind == reduce_kind::prod ? "prod"
                                          : kind == reduce_kind::min  ? "minCoeff"
                                                                      : "maxCoeff");
    node.units = size_;
    auto d = std::make_shared<detail::elementwise_desc>();
    op_call c{n.op, n.type, {}, -1};
    int slot = 0;
    if (n.op == cwise_op::leaf) {
      d->op = "identity";
      c.in.push_back({slot++, 0, n.type});
      node.args.push_back({detail::arg_role::in, values_[i], nullptr});
      d->operands.push_back({0, -1, {}, type_name(n.type)});
    } else {
      d->op = ops_name(n.op);
      for (int j : {n.a, n.b, n.c})
        if (j >= 0) c.in.push_back(operand_of(j, node, *d, slot));
    }
    auto v = std::make_shared<detail::value_state>();
    v->label = "the value of " + node.name;
    v->status = detail::value_status::pending;
    v->handles = 1;  // asked for, as by a lazy handle: the engine computes it
    v->owner = g_->weak_from_this();
    with_real(n.type, [&](auto t) {
      using T = decltype(t);
      with_reduction<T>(kind, [&](auto split) {
        using S = decltype(split);
        v->ops = &detail::reduction_ops<S, T>::table;
        fusion::describe_reduction<T>(*d, S::op::device_op, S::template identity<T>());
        return 0;
      });
    });
    node.reduction = v;
    node.report_op = "reduction";
    node.cpu = [c = std::move(c), kind](const detail::kernel_args& k) { reduce_op(c, kind, k); };
    node.device_twin = node.cpu;
    node.elementwise = std::move(d);
    v->producer = g_->add(std::move(node));
    return v;
  }

  /// dst = dst (op) tree, in place.
  void compound(cwise_op op, int root) {
    detail::call_node node;
    node.name = std::string("Eigen::operator") + (op == cwise_op::add   ? "+="
                                                  : op == cwise_op::sub ? "-="
                                                  : op == cwise_op::mul ? "*="
                                                                        : "/=");
    node.units = size_;
    auto d = std::make_shared<detail::elementwise_desc>();
    d->op = ops_name(op);
    op_call c{op, call_.dst_type, {}, 0};
    // Slot 0: the destination, read and written; then the tree's value.
    detail::value_ptr out = written(node, target::in_place);
    c.in.push_back({0, 0, call_.dst_type});
    d->operands.push_back({0, -1, {}, type_name(call_.dst_type)});
    int slot = 1;
    c.in.push_back(operand_of(root, node, *d, slot, 0));
    d->out_arg = 0;
    d->out_type = type_name(call_.dst_type);
    finish(node, std::move(c), std::move(d));
    out->producer = g_->add(std::move(node));
  }

  /// The destination as the call's written argument (appended to its args).
  detail::value_ptr written(detail::call_node& node, target t) {
    result_ = std::make_shared<detail::value_state>();
    result_->label = "the destination of an Eigen assignment";
    result_->ops = &borrowed_ops;
    result_->shape = dst_value_->shape;
    result_->object = dst_value_->object;
    result_->user_storage = true;
    result_->status = detail::value_status::pending;
    result_->owner = g_->weak_from_this();
    if (t == target::in_place)
      node.args.push_back({detail::arg_role::mut, dst_value_, result_});
    else
      node.args.push_back({detail::arg_role::out, result_, nullptr});
    return result_;
  }

  void finish(detail::call_node& node, op_call c, std::shared_ptr<detail::elementwise_desc> d) const {
    node.report_op = reduction_ ? "reduction" : "cwise";
    node.cpu = [c = std::move(c)](const detail::kernel_args& k) { run_op(c, k); };
    node.device_twin = node.cpu;
    node.elementwise = std::move(d);
  }

  const cwise_call& call_;
  std::shared_ptr<detail::graph> g_;
  std::size_t size_;
  borrowed_array dst_;
  std::vector<borrowed_array> leaves_;
  std::vector<detail::value_ptr> values_;
  detail::value_ptr dst_value_, result_;
  std::optional<reduce_kind> reduction_;
};

}  // namespace

bool cwise_wanted(std::ptrdiff_t size) {
  return size > 0 && detail::offload_elements_wanted(static_cast<std::uint64_t>(size), false);
}

void cwise_declined(const char* reason, std::ptrdiff_t size) {
  decline("cwise", std::string("unsupported expression: ") + (reason ? reason : "unknown"), size);
}

bool cwise(const cwise_call& call) {
  if (detail::in_engine_thread()) {
    decline("cwise", "called inside the engine (an annotated CPU function)", call.size);
    return false;
  }
  if (const char* why = unsupported(call)) {
    decline("cwise", std::string("unsupported expression: ") + why, call.size);
    return false;
  }
  for (int i = 0; i < call.count; ++i) {
    const cwise_node& n = call.nodes[i];
    const std::size_t dst_bytes = static_cast<std::size_t>(call.size) * bytes_of(call.dst_type);
    if (n.op == cwise_op::leaf && n.data != call.dst &&
        overlaps(n.data, static_cast<std::size_t>(call.size) * bytes_of(n.type), call.dst, dst_bytes)) {
      // Eigen's result then depends on its loop order: keep it.
      decline("cwise", "an operand overlapping the destination at another offset", call.size);
      return false;
    }
  }
  const auto g = detail::current_graph();
  recorder r(call, g);  // owns the borrowed arrays the values point at: alive until evaluated
  detail::value_ptr result;
  {
    std::lock_guard lock(g->mutex());
    result = r.record();
  }
  return evaluate_hooked(*g, result, "cwise", "elements=" + std::to_string(call.size));
}

}  // namespace oa::eigen_hooks

namespace oa::eigen_hooks {

bool reduce_wanted(std::ptrdiff_t size) {
  return size > 0 && detail::offload_elements_wanted(static_cast<std::uint64_t>(size), true);
}

void reduce_declined(const char* reason, std::ptrdiff_t size) {
  decline("reduction", std::string("unsupported expression: ") + (reason ? reason : "unknown"), size);
}

bool reduce(const reduce_call& call, double* result) {
  if (detail::in_engine_thread()) {
    decline("reduction", "called inside the engine (an annotated CPU function)", call.size);
    return false;
  }
  // As an assignment whose destination is the reduction.
  cwise_call as_tree{call.nodes, call.count, nullptr, call.count > 0 ? call.nodes[call.count - 1].type : scalar_type::f64,
                     call.size, assign_kind::assign};
  if (const char* why = unsupported(as_tree)) {
    decline("reduction", std::string("unsupported expression: ") + why, call.size);
    return false;
  }
  const auto g = detail::current_graph();
  recorder r(as_tree, g, call.kind);
  detail::value_ptr value;
  {
    std::lock_guard lock(g->mutex());
    value = r.record();
  }
  if (!evaluate_hooked(*g, value, "reduction", "elements=" + std::to_string(call.size))) return false;
  if (as_tree.dst_type == scalar_type::f64) *result = *static_cast<const double*>(value->object);
  else *result = static_cast<double>(*static_cast<const float*>(value->object));
  return true;
}

}  // namespace oa::eigen_hooks
