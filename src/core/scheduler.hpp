#pragma once
// The scheduler: one evaluation's stages over a runtime's devices. It holds
// the stages' order (which earlier stages each must follow), places each
// (placer), prepares the resident values around it, and hands it to the
// executor on a device, on several devices at once, or to the host lane
// beside them, or several together on one device's streams, each in a
// share of its memory (the DAG on streams); what each run leaves (its report, the models' lesson, a
// device lost) comes back here, and reports join the log in stage order.

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/executor.hpp"
#include "core/host_lane.hpp"
#include "core/placer.hpp"
#include "core/planner.hpp"
#include "core/results_ahead.hpp"
#include "core/runtime_state.hpp"

namespace oa::detail {

struct group_member;

/// A stage among others on one device: what it moves, and its kernels'
/// busy time.
struct member_cost {
  stage_cost cost;
  double kernel_seconds = 0;
};

/// Predicted seconds of stages of costs `ms` together, each in `share` bytes
/// of the device's memory over `slots` streams. The link's directions (and
/// its shared cap) and the device's kernels are shared: their bytes add up,
/// and so do the kernels' busy times (each stage's as measured
/// before; where none was, its bytes at the device's kernel rate).
/// Each stage's own is its pipeline's fill and drain: the one chunk's copy
/// of the direction that does not bound it (a stage that only copies in has
/// none: the link is busy from its first chunk to its last), and the
/// latency of each chunk's copy in, kernel and copy out (the device's
/// engines hand them off one by one, whichever stage they are for). One
/// stage alone is the same with ms = {its cost}. An estimate for choosing,
/// never reported as a measurement.
double predicted_seconds(const std::vector<member_cost>& ms, double share, int slots, const device_rates& r);

class scheduler {
 public:
  /// With `st.mutex` held and `c` its configuration, over the evaluation's
  /// calls and the stages formed from the live ones.
  scheduler(runtime_state& st, const config& c, const std::vector<call_node>& nodes, const std::vector<bool>& live,
            const std::vector<stage>& stages);
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  /// Runs every stage; afterwards each value the stages produce is ready or
  /// failed, and resident copies are kept for later evaluations or dropped.
  void run();

 private:
  /// Stages of one evaluation that the host ran because one unit of theirs
  /// is larger than the budget the user set: said once, at the end.
  struct budget_too_small {
    struct one {
      std::string calls;
      std::size_t smallest;
      const runtime_state::device_entry* target;
    };
    std::vector<one> stages;
    void add(runtime_state::device_entry& target, std::string calls, std::size_t smallest);
    /// A line on stderr per device, with the budget that runs them all.
    void say() const;
  };

  void read_models();
  bool bound_for_host(std::size_t i);
  void order_stages();
  bool beside_worth_it(std::size_t i) const;
  run_options options_for(std::size_t i);
  void run_one(std::size_t i, run_options& opt);
  void run_spread(std::size_t i, run_options& opt, const std::vector<runtime_state::device_entry*>& on,
                  const stage_cost& cost, double predicted);
  void start_beside(std::size_t i, const run_options& opt, const stage_cost& cost, double predicted);
  std::vector<std::size_t> companions(std::size_t i, runtime_state::device_entry& target);
  int slots_in_share(std::size_t j, device& share);
  bool reads_copies(std::size_t j, runtime_state::device_entry& target) const;
  double predicted_together(const std::vector<std::size_t>& group, std::size_t free, device& dev);
  bool leaves_copy(std::size_t j, runtime_state::device_entry& target) const;
  std::vector<group_member> members_of(const std::vector<std::size_t>& group, run_options& first,
                                        runtime_state::device_entry& target);
  void run_together(const std::vector<std::size_t>& group, run_options& first, runtime_state::device_entry& target);
  bool reads_later(const value_state* v, std::size_t i) const;
  std::size_t first_pending() const;
  void prepare_residency(residency& res, std::size_t i, bool on_device, run_options& opt,
                         std::size_t from) const;
  stage_report failed_report(const stage& s, const run_options& opt) const;
  placement placed_by_cost(std::size_t i, placement place, const std::vector<runtime_state::device_entry*>& on,
                           stage_cost& cost, double& predicted);
  void finish(std::size_t i, stage_report rep, const stage_cost& cost, device& where, bool alone = true);
  void finish_spread(std::size_t i, stage_report rep, const stage_cost& cost,
                     const std::vector<runtime_state::device_entry*>& on, const std::vector<lost_device>& lost,
                     bool host_shared);
  std::pair<placement, std::vector<runtime_state::device_entry*>> capable(std::size_t i);
  void log_ready();
  void collect_beside();
  void queue_results_ahead(std::size_t position);
  std::vector<const value_state*> large_results(std::size_t i) const;

  runtime_state& st_;
  const config& c_;
  const std::vector<call_node>& nodes_;
  const std::vector<stage>& stages_;
  std::unordered_set<const value_state*> demanded_;
  std::unordered_set<const value_state*> needed_;
  std::unordered_map<const value_state*, std::size_t> last_read_;  // the last stage reading each value
  std::vector<std::vector<std::size_t>> deps_;
  std::vector<bool> done_;  // run already (stages run together may run ahead of program order)
  std::vector<std::size_t> order_;  // the order stages are taken in (order_stages)
  std::vector<bool> feeds_host_;    // a stage the first host stage waits for: it goes first, company only if as soon
  const std::size_t evaluation_;  // the runtime's count, for the reports
  const bool by_cost_;
  std::exception_ptr models_error_;  // every stage fails with it: the caller named a file oa cannot use
  std::vector<trace_event> trace_;
  budget_too_small too_small_;
  std::vector<std::optional<stage_report>> reports_;
  std::size_t logged_ = 0;
  std::unique_ptr<results_ahead> ahead_;  // outlives the lane's stage, which takes from it
  bool lane_shared_ = false;  // a host stage ran beside the lane's on the evaluating thread
  host_lane lane_;  // last: its stage is waited for before the rest goes
};

}  // namespace oa::detail
