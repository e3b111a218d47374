#include "oa/core/graph.hpp"

#include <cstdint>
#include <utility>

#include "oa/core/runtime.hpp"

namespace oa::detail {

int graph::add(call_node n) {
  std::lock_guard lock(mutex_);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size() - 1);
}

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
}  // namespace

value_ptr graph::bind_user(void* object, const value_ops* ops, const split::shape& s, std::string label) {
  std::lock_guard lock(mutex_);
  auto it = user_versions_.find(object);
  if (it != user_versions_.end() && it->second->ops == ops) return it->second;
  if (it != user_versions_.end() && it->second->pending()) return nullptr;  // caller evaluates first
  // Another object over the same elements (a span of a vector) that pending
  // calls use: their order through two objects is not tracked, so the caller
  // evaluates first (then this object is the only one bound over them).
  const auto [first, last] = storage_of(object, ops, s);
  if (first)
    for (const auto& [other, version] : user_versions_) {
      if (other == object) continue;
      const auto [o_first, o_last] = storage_of(other, version->ops, version->shape);
      if (o_first && first < o_last && o_first < last) return nullptr;
    }
  auto v = std::make_shared<value_state>();
  v->label = std::move(label);
  v->ops = ops;
  v->shape = s;
  v->object = object;
  v->user_storage = true;
  v->status = value_status::ready;
  if (it == user_versions_.end()) user_versions_.emplace(object, v);
  return v;
}

value_ptr graph::bind_user_evaluated(void* object, const value_ops* ops, const split::shape& s, std::string label) {
  if (auto v = bind_user(object, ops, s, label)) return v;
  value_ptr pending;  // this object's own pending version, if that is what waits
  {
    std::lock_guard lock(mutex_);
    if (auto it = user_versions_.find(object); it != user_versions_.end() && it->second->pending())
      pending = it->second;
  }
  evaluate(*this);
  value_ptr v = bind_user(object, ops, s, std::move(label));
  if (pending && pending->status == value_status::failed) v->fail(pending->error);
  return v;
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
