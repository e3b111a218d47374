#include "oa/core/graph.hpp"

#include <utility>

#include "oa/core/runtime.hpp"

namespace oa::detail {

int graph::add(call_node n) {
  std::lock_guard lock(mutex_);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size() - 1);
}

value_ptr graph::bind_user(void* object, const value_ops* ops, const split::shape& s, std::string label) {
  std::lock_guard lock(mutex_);
  auto it = user_versions_.find(object);
  if (it != user_versions_.end() && it->second->ops == ops) return it->second;
  if (it != user_versions_.end() && it->second->pending()) return nullptr;  // caller evaluates first
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
  value_ptr pending;
  {
    std::lock_guard lock(mutex_);
    pending = user_versions_.at(object);
  }
  evaluate(*this);
  value_ptr v = bind_user(object, ops, s, std::move(label));
  if (pending->status == value_status::failed) {
    v->status = value_status::failed;
    v->error = pending->error;
  }
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
