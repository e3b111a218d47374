#include "core/results_ahead.hpp"

#include <utility>

#include "oa/core/graph.hpp"
#include "oa/core/runtime.hpp"

namespace oa::detail {

results_ahead::results_ahead() : thread_([this] { run(); }) {}

results_ahead::~results_ahead() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void results_ahead::queue(const std::vector<const value_state*>& values) {
  {
    std::lock_guard lock(mutex_);
    for (const value_state* v : values)
      if (state_.emplace(v, state::queued).second) queue_.push_back(v);
  }
  changed_.notify_all();
}

void results_ahead::run() {
  const engine_thread_scope engine_work;  // a split type's make runs as the engine's work
  for (;;) {
    const value_state* v = nullptr;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      v = queue_.front();
      queue_.pop_front();
      state& s = state_.at(v);
      if (s != state::queued) continue;  // its stage came first and made it
      s = state::making;
    }
    made m;
    bool ok = true;
    try {
      m.owned = v->ops->make(v->shape, v->state.get(), m.object);
    } catch (...) {
      ok = false;  // its stage makes it again, and meets the error there
    }
    {
      std::lock_guard lock(mutex_);
      if (ok) made_.emplace(v, std::move(m));
      state_.at(v) = ok ? state::made : state::taken;
    }
    changed_.notify_all();
  }
}

std::optional<results_ahead::made> results_ahead::take(const value_state* v) {
  std::unique_lock lock(mutex_);
  auto it = state_.find(v);
  if (it == state_.end()) return std::nullopt;
  changed_.wait(lock, [&] { return it->second != state::making; });
  const bool ready = it->second == state::made;
  it->second = state::taken;
  if (!ready) return std::nullopt;
  auto m = made_.find(v);
  made out = std::move(m->second);
  made_.erase(m);
  return out;
}

}  // namespace oa::detail
