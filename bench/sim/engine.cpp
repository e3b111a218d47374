#include "sim/engine.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

namespace oa_sim {

int graph::add_resource(resource r) {
  if (r.servers < 1) throw std::invalid_argument("oa_sim::graph::add_resource: resource '" + r.name + "' needs servers >= 1");
  if (r.group >= static_cast<int>(groups_.size()))
    throw std::invalid_argument("oa_sim::graph::add_resource: resource '" + r.name + "' names an unknown cap group");
  for (const cap_share& sh : r.shares)
    if (sh.group < 0 || sh.group >= static_cast<int>(groups_.size()) || !(sh.weight > 0))
      throw std::invalid_argument("oa_sim::graph::add_resource: resource '" + r.name +
                                  "' shares an unknown cap group or a weight not > 0");
  res_.push_back(std::move(r));
  return static_cast<int>(res_.size()) - 1;
}

int graph::add_group(cap_group g) {
  if (!(g.cap > 0)) throw std::invalid_argument("oa_sim::graph::add_group: cap of '" + g.name + "' must be > 0");
  groups_.push_back(std::move(g));
  return static_cast<int>(groups_.size()) - 1;
}

int graph::add(op o) {
  const int id = static_cast<int>(ops_.size());
  for (int d : o.deps)
    if (d < 0 || d >= id) throw std::invalid_argument("oa_sim::graph::add: op '" + o.label + "' depends on a later or unknown op");
  if (o.res >= static_cast<int>(res_.size()))
    throw std::invalid_argument("oa_sim::graph::add: op '" + o.label + "' names an unknown resource");
  if (o.work > 0 && o.rate <= 0 && (o.res < 0 || res_[static_cast<std::size_t>(o.res)].rate <= 0))
    throw std::invalid_argument("oa_sim::graph::add: op '" + o.label + "' has work but no rate");
  if (o.work < 0 || o.latency < 0) throw std::invalid_argument("oa_sim::graph::add: op '" + o.label + "' has negative time");
  ops_.push_back(std::move(o));
  return id;
}

int stream::add(op o) {
  if (last_ >= 0) o.deps.push_back(last_);
  last_ = g_->add(std::move(o));
  return last_;
}

struct simulation {
  graph& g;
  double t = 0;
  std::vector<int> waiting;                       // per op: dependencies not yet done
  std::vector<std::vector<int>> dependents;
  std::vector<double> ready;                      // per op: when it enters its queue
  std::set<std::pair<double, int>> queued;        // ops not started, by (ready, id)
  std::vector<int> running;                       // ops started, not done
  std::vector<double> left;                       // per op: work left
  std::vector<int> in_use;                        // per resource
  std::vector<double> busy_since, busy;

  explicit simulation(graph& gr) : g(gr) {
    const std::size_t n = g.ops_.size();
    waiting.assign(n, 0);
    dependents.assign(n, {});
    ready.assign(n, 0);
    left.assign(n, 0);
    in_use.assign(g.res_.size(), 0);
    busy_since.assign(g.res_.size(), 0);
    busy.assign(g.res_.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
      op& o = g.ops_[i];
      o.start = o.end = -1;
      left[i] = o.work;
      waiting[i] = static_cast<int>(o.deps.size());
      for (int d : o.deps) dependents[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
      if (o.deps.empty()) queued.insert({o.latency, static_cast<int>(i)});
    }
  }

  double rate_of(int id) const {
    const op& o = g.ops_[static_cast<std::size_t>(id)];
    return o.rate > 0 ? o.rate : g.res_[static_cast<std::size_t>(o.res)].rate;
  }

  /// Current rates of the running ops, scaled down where a cap group is exceeded.
  std::vector<double> rates() const {
    std::vector<double> r(running.size(), 0), demand(g.groups_.size(), 0);
    const auto each_share = [&](const resource& res, auto&& f) {
      if (res.group >= 0) f(cap_share{res.group, 1});
      for (const cap_share& sh : res.shares) f(sh);
    };
    for (std::size_t i = 0; i < running.size(); ++i) {
      const op& o = g.ops_[static_cast<std::size_t>(running[i])];
      if (o.res < 0 || left[static_cast<std::size_t>(running[i])] <= 0) continue;
      r[i] = rate_of(running[i]);
      each_share(g.res_[static_cast<std::size_t>(o.res)],
                 [&](const cap_share& sh) { demand[static_cast<std::size_t>(sh.group)] += r[i] * sh.weight; });
    }
    for (std::size_t i = 0; i < running.size(); ++i) {
      const op& o = g.ops_[static_cast<std::size_t>(running[i])];
      if (o.res < 0) continue;
      double scale = 1;
      each_share(g.res_[static_cast<std::size_t>(o.res)], [&](const cap_share& sh) {
        const double cap = g.groups_[static_cast<std::size_t>(sh.group)].cap, d = demand[static_cast<std::size_t>(sh.group)];
        if (d > cap) scale = std::min(scale, cap / d);
      });
      r[i] *= scale;
    }
    return r;
  }

  /// Starts every queued op that is ready now and has a free server.
  void start_ready() {
    for (auto it = queued.begin(); it != queued.end() && it->first <= t;) {
      const int id = it->second;
      op& o = g.ops_[static_cast<std::size_t>(id)];
      if (o.res >= 0 && in_use[static_cast<std::size_t>(o.res)] >= g.res_[static_cast<std::size_t>(o.res)].servers) {
        ++it;
        continue;
      }
      if (o.res >= 0 && in_use[static_cast<std::size_t>(o.res)]++ == 0) busy_since[static_cast<std::size_t>(o.res)] = t;
      o.start = t;
      running.push_back(id);
      it = queued.erase(it);
    }
  }

  void finish(int id) {
    op& o = g.ops_[static_cast<std::size_t>(id)];
    o.end = t;
    if (o.res >= 0 && --in_use[static_cast<std::size_t>(o.res)] == 0)
      busy[static_cast<std::size_t>(o.res)] += t - busy_since[static_cast<std::size_t>(o.res)];
    for (int d : dependents[static_cast<std::size_t>(id)]) {
      ready[static_cast<std::size_t>(d)] = std::max(ready[static_cast<std::size_t>(d)], t);
      if (--waiting[static_cast<std::size_t>(d)] == 0)
        queued.insert({ready[static_cast<std::size_t>(d)] + g.ops_[static_cast<std::size_t>(d)].latency, d});
    }
  }

  void run() {
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (;;) {
      start_ready();
      const std::vector<double> r = rates();
      double next = inf;
      for (std::size_t i = 0; i < running.size(); ++i)
        next = std::min(next, left[static_cast<std::size_t>(running[i])] <= 0 ? t : t + left[static_cast<std::size_t>(running[i])] / r[i]);
      for (const auto& q : queued)
        if (q.first > t) {
          next = std::min(next, q.first);
          break;
        }
      if (next == inf) break;
      const double dt = next - t;
      t = next;
      std::vector<int> done;
      for (std::size_t i = 0; i < running.size(); ++i) {
        double& l = left[static_cast<std::size_t>(running[i])];
        if (l > 0) l -= r[i] * dt;
        // Rounding: work that would take under a picosecond is done.
        if (l <= 0 || (r[i] > 0 && l / r[i] < 1e-12)) {
          l = 0;
          done.push_back(running[i]);
        }
      }
      running.erase(std::remove_if(running.begin(), running.end(),
                                   [&](int id) { return std::find(done.begin(), done.end(), id) != done.end(); }),
                    running.end());
      std::sort(done.begin(), done.end());
      for (int id : done) finish(id);
    }
  }
};

outcome simulate(graph& g) {
  simulation s(g);
  s.run();
  outcome out;
  for (const op& o : g.ops_) {
    if (o.end < 0) throw std::logic_error("oa_sim::simulate: op '" + o.label + "' never ran");
    out.makespan = std::max(out.makespan, o.end);
  }
  out.busy = s.busy;
  return out;
}

}  // namespace oa_sim
