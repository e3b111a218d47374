#pragma once
// A stage placed on the host, run on a thread of its own while the
// evaluating thread goes on with later stages that need not follow it on
// the device and small ones on the host (the CPU and the GPU side by side),
// on a host device of its own. One such stage at a time.

#include <cstddef>
#include <future>
#include <utility>
#include <vector>

#include "core/placer.hpp"
#include "oa/core/report.hpp"
#include "oa/core/runtime.hpp"

namespace oa::detail {

class host_lane {
 public:
  struct result {
    std::size_t stage;
    stage_report rep;
    stage_cost cost;
    std::vector<trace_event> trace;
  };

  host_lane() = default;
  host_lane(const host_lane&) = delete;
  host_lane& operator=(const host_lane&) = delete;
  /// Whatever happens to the evaluation, the stage's thread is waited for:
  /// it uses the evaluation's calls and values.
  ~host_lane() {
    if (done_.valid()) done_.wait();
  }

  /// Runs `run(trace)` (returning the stage's report, its failures turned
  /// into one) on a thread of its own.
  template <class Run>
  void start(std::size_t stage, stage_cost cost, double predicted, Run run) {
    stage_ = stage;
    cost_ = std::move(cost);
    predicted_ = predicted;
    trace_.clear();
    done_ = std::async(std::launch::async, [this, run = std::move(run)]() mutable {
      const engine_thread_scope engine_work;
      return run(trace_);
    });
  }
  bool busy() const noexcept { return done_.valid(); }
  std::size_t stage() const noexcept { return stage_; }
  /// Waits for the stage; its report, cost and trace.
  result wait() {
    stage_report rep = done_.get();
    rep.predicted_seconds = predicted_;
    return {stage_, std::move(rep), std::move(cost_), std::move(trace_)};
  }

 private:
  std::size_t stage_ = 0;
  stage_cost cost_;
  double predicted_ = 0;
  std::vector<trace_event> trace_;
  std::future<stage_report> done_;  // last: waited for before the rest goes
};

}  // namespace oa::detail
