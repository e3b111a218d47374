#include "oa/core/graph.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oa/core/error.hpp"
#include "oa/core/runtime.hpp"

namespace oa::detail {

namespace {
/// The bytes [first, last) a caller's object keeps its elements in.
std::pair<const std::byte*, const std::byte*> storage_of(const void* object, const value_ops* ops,
                                                         const split::shape& s) {
  if (!ops->host_region || s.units == 0) return {nullptr, nullptr};
  const region r = ops->host_region(object, {0, s.units});
  if (!r.data || r.bytes() == 0) return {nullptr, nullptr};
  // In integers: a span past what the machine addresses (refused at planning)
  // must not overflow a pointer here; it reaches the end of memory.
  const auto begin = reinterpret_cast<std::uintptr_t>(r.data);
  std::size_t span = r.width;
  if (r.rows > 1 && (r.pitch > (UINTPTR_MAX - span) / (r.rows - 1))) return {r.data, reinterpret_cast<const std::byte*>(UINTPTR_MAX)};
  if (r.rows > 1) span += (r.rows - 1) * r.pitch;
  const std::uintptr_t end = span > UINTPTR_MAX - begin ? UINTPTR_MAX : begin + span;
  return {r.data, reinterpret_cast<const std::byte*>(end)};
}
/// Argument `a` of call `n` as messages name it: as its call named it, else
/// its value's label, less the " of <function>" a binding added.
std::string argument_name(const call_node& n, const node_arg& a) {
  if (!a.label.empty()) return a.label;
  const std::string& label = a.value->label;
  const std::string tail = " of " + n.name;
  if (label.size() > tail.size() && label.compare(label.size() - tail.size(), tail.size(), tail) == 0)
    return label.substr(0, label.size() - tail.size());
  return label;
}

/// Refuses an element-wise call that writes elements which another of its
/// arguments reads or writes in part (`a[0, n/2)` from `a[n/4, 3n/4)`): each
/// chunk would see some of them written already, by its own call or another
/// device's, in an order no run keeps. The same range (x += x) is one
/// element at a time; strided values are left alone (two columns of a
/// matrix share a span, not elements); a product copies an operand that
/// overlaps its result before it starts.
void check_overlaps(const call_node& n) {
  if (n.contraction) return;
  struct bytes_of {
    const node_arg* arg;
    const std::byte* first;
    const std::byte* last;
  };
  std::vector<bytes_of> spans;
  for (const auto& a : n.args) {
    const value_state& v = *a.value;
    if (!v.user_storage || !v.object || !v.ops || !v.ops->host_region || v.shape.units == 0) continue;
    const region r = v.ops->host_region(v.object, {0, v.shape.units});
    if (!r.data || !r.contiguous() || r.bytes() == 0) continue;
    const auto [first, last] = storage_of(v.object, v.ops, v.shape);
    if (first) spans.push_back({&a, first, last});
  }
  for (std::size_t i = 0; i < spans.size(); ++i)
    for (std::size_t j = i + 1; j < spans.size(); ++j) {
      const bytes_of &x = spans[i], &y = spans[j];
      const bool writes = x.arg->role == arg_role::mut || y.arg->role == arg_role::mut;
      const bool same = x.first == y.first && x.last == y.last;
      if (writes && !same && x.first < y.last && y.first < x.last)
        throw invalid_argument(n.name, argument_name(n, *y.arg),
                               "its elements overlap those of " + argument_name(n, *x.arg) +
                                   " in part, and the call writes one of them: the chunks would read elements "
                                   "already written (pass ranges that do not overlap, or the same range)");
    }
}

}  // namespace

int graph::add(call_node n) {
  // An argument bound after a mut argument of the same object got this
  // call's own new version: a call reads its arguments as they were before
  // it (f(a, a) with `out` overwritten and `in` read reads a's elements).
  for (auto& a : n.args)
    if (a.role == arg_role::in)
      for (const auto& m : n.args)
        if (m.role == arg_role::mut && m.new_value && a.value == m.new_value) a.value = m.value;
  try {
    check_overlaps(n);
  } catch (...) {
    forget_versions(n);
    throw;
  }
  std::lock_guard lock(mutex_);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size() - 1);
}

value_ptr graph::bind_user(void* object, const value_ops* ops, const split::shape& s, std::string label,
                           bool writes) {
  std::lock_guard lock(mutex_);
  auto it = user_versions_.find(object);
  // Another object over the same elements (a span of a vector) that pending
  // calls use: their order through two objects is not tracked, so the caller
  // evaluates first when a call updates them through it, or when this call
  // writes them (a read beside reads needs no order).
  const auto [first, last] = storage_of(object, ops, s);
  if (first)
    for (const auto& [other, version] : user_versions_) {
      if (other == object || !(writes || version->pending())) continue;
      if (version->storage_first && first < version->storage_last && version->storage_first < last) return nullptr;
    }
  // Another object at a binding's address (the one bound is gone: a span of
  // a refused call, then one of another length in its place) is bound
  // afresh, and takes the binding's place when nothing else holds that (no
  // pending call reads it). A pending one: the caller evaluates first.
  bool replace = false;
  if (it != user_versions_.end()) {
    const value_state& known = *it->second;
    const bool same_object = known.shape == s && known.storage_first == first && known.storage_last == last;
    if (known.ops == ops && same_object) return it->second;
    if (known.pending()) return nullptr;  // caller evaluates first
    replace = known.ops == ops && it->second.use_count() == 1;
  }
  auto v = std::make_shared<value_state>();
  v->label = std::move(label);
  v->ops = ops;
  v->shape = s;
  v->object = object;
  v->user_storage = true;
  v->storage_first = first;
  v->storage_last = last;
  v->status = value_status::ready;
  if (it == user_versions_.end())
    user_versions_.emplace(object, v);
  else if (replace)
    it->second = v;
  return v;
}

value_ptr graph::bind_user_evaluated(void* object, const value_ops* ops, const split::shape& s, std::string label,
                                     bool writes) {
  if (auto v = bind_user(object, ops, s, label, writes)) return v;
  value_ptr pending;  // this object's own pending version, if that is what waits
  {
    std::lock_guard lock(mutex_);
    if (auto it = user_versions_.find(object); it != user_versions_.end() && it->second->pending())
      pending = it->second;
  }
  evaluate(*this);
  value_ptr v = bind_user(object, ops, s, std::move(label), writes);
  if (pending && pending->status == value_status::failed) v->fail(pending->error);
  return v;
}

void graph::forget_versions(const call_node& n) noexcept {
  std::lock_guard lock(mutex_);
  for (const auto& a : n.args)
    if (a.role == arg_role::mut && a.new_value)
      if (auto it = user_versions_.find(a.new_value->object); it != user_versions_.end() && it->second == a.new_value) {
        // Back to the version it read, which earlier pending calls may read
        // (a later write must follow them). A binding no other call holds
        // goes: its object may be gone before the next call is recorded.
        long here = 0;
        for (const auto& b : n.args) here += (b.value == a.value) + (b.new_value == a.value);
        if (a.value->pending() || a.value.use_count() > here)
          it->second = a.value;
        else
          user_versions_.erase(it);
      }
}

void graph::set_user_version(void* object, value_ptr v) {
  std::lock_guard lock(mutex_);
  user_versions_[object] = std::move(v);
}

std::vector<call_node> graph::take_pending() {
  std::lock_guard lock(mutex_);
  user_versions_.clear();
  return std::exchange(nodes_, {});
}

graph::~graph() {
  for (const auto& f : failures_) report_unobserved(*runtime_, f);
  // Calls recorded but never evaluated: their arguments may be gone already
  // (a thread's locals die before its graph), so they cannot run now.
  if (!nodes_.empty()) {
    std::string names;
    for (std::size_t i = 0; i < nodes_.size() && i < 8; ++i) names += (i ? ", " : "") + nodes_[i].name;
    if (nodes_.size() > 8) names += ", ...";
    report_unobserved(*runtime_, {nullptr, names,
                       std::to_string(nodes_.size()) + " recorded calls never ran: their thread ended before "
                       "evaluating them (call oa::evaluate() or keep an oa::scope in the thread)"});
  }
}

void graph::add_failures(std::vector<failure> f) {
  std::lock_guard lock(mutex_);
  for (auto& x : f) failures_.push_back(std::move(x));
}

void graph::delivered(const std::exception_ptr& e) {
  std::lock_guard lock(mutex_);
  std::erase_if(failures_, [&](const failure& f) { return f.error == e; });
}

std::vector<graph::failure> graph::take_failures() {
  std::lock_guard lock(mutex_);
  return std::exchange(failures_, {});
}

bool graph::empty() const {
  std::lock_guard lock(mutex_);
  return nodes_.empty();
}

}  // namespace oa::detail
