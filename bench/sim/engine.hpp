#pragma once
// A small discrete-event simulator: resources (servers with a rate, some
// sharing a cap), operations with dependencies, run until every operation
// has finished. The op graph says what a design does; the engine only
// schedules it.

#include <cstddef>
#include <string>
#include <vector>

namespace oa_sim {

/// A resource's use of a further cap group: `weight` of the group's units
/// per unit of its work (a memcpy moves each byte through host memory twice).
struct cap_share {
  int group = -1;
  double weight = 1;
};

/// Servers of one kind: a copy engine, the GPU, a host thread pool.
struct resource {
  std::string name;
  double rate = 0;   // work units (bytes, flops, elements) per second of one server; 0: ops give their own
  int servers = 1;   // ops running at once
  int group = -1;    // cap group (-1: none), one of its units per unit of work
  std::vector<cap_share> shares = {};  // further cap groups (the DMA engines share host memory too)
};

/// Resources whose concurrent ops together move at most `cap` units/s
/// (the link's both-ways limit, the host's memory bandwidth): when their
/// rates (times their weights) add up to more, each is scaled down in
/// proportion; an op in several groups runs at the tightest one's scale.
struct cap_group {
  std::string name;
  double cap = 0;
};

struct op {
  std::string label;
  int res = -1;         // -1: no resource, the op is only its latency
  double work = 0;      // units of the resource
  double rate = 0;      // units/s for this op (0: the resource's rate)
  double latency = 0;   // seconds between its dependencies' end and its entry in the resource's queue
  std::vector<int> deps;
  double start = -1, end = -1;  // filled by simulate()
};

struct outcome;
class graph {
 public:
  int add_resource(resource r);
  int add_group(cap_group g);
  /// Adds an op; returns its id (ids are issue order: ties in a queue go to the lower id).
  int add(op o);
  const op& at(int id) const { return ops_.at(static_cast<std::size_t>(id)); }
  std::size_t size() const noexcept { return ops_.size(); }
  const std::vector<resource>& resources() const noexcept { return res_; }

 private:
  friend struct simulation;
  friend struct outcome simulate(graph& g);
  std::vector<resource> res_;
  std::vector<cap_group> groups_;
  std::vector<op> ops_;
};

struct outcome {
  double makespan = 0;
  std::vector<double> busy;  // per resource: seconds with at least one op running
};

/// Runs the graph: each op enters its resource's queue once its dependencies
/// are done plus its latency; a free server takes the earliest queued op
/// (lowest id on ties). Throws std::invalid_argument for a dependency on a
/// later op, an unknown resource, or work with no rate.
outcome simulate(graph& g);

/// An in-order queue of ops (a CUDA stream, a host thread issuing in order):
/// each op added through it also waits for the previous one.
class stream {
 public:
  explicit stream(graph& g) : g_(&g) {}
  int add(op o);
  int last() const noexcept { return last_; }

 private:
  graph* g_;
  int last_ = -1;
};

}  // namespace oa_sim
