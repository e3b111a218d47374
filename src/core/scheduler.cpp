#include "core/scheduler.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/stage_graph.hpp"
#include "core/stage_plan.hpp"
#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

device_group group_of(const std::vector<runtime_state::device_entry*>& on) {
  device_group g;
  for (auto* e : on) g.devices.push_back(e->dev.get());
  return g;
}

bool progress_wanted(const config& c) {
  if (c.progress >= 0) return c.progress == 1;
  return ::isatty(STDERR_FILENO) == 1;
}

}  // namespace

void scheduler::budget_too_small::add(runtime_state::device_entry& target, std::string calls, std::size_t smallest) {
  // Only a budget the user set, and a stage not yet said for this device
  // (every stage's report says it).
  if (!target.budget_from.empty() && target.said_budget_too_small.insert(calls).second)
    stages.push_back({std::move(calls), smallest, &target});
}

void scheduler::budget_too_small::say() const {
  for (std::size_t first = 0; first < stages.size(); ++first) {
    const runtime_state::device_entry* on = stages[first].target;
    bool earlier = false;
    for (std::size_t k = 0; k < first; ++k) earlier = earlier || stages[k].target == on;
    if (earlier) continue;  // said with the first stage of its device
    std::size_t all = 0, count = 0;
    std::string which;
    for (const auto& t : stages) {
      if (t.target != on) continue;
      all = std::max(all, t.smallest);
      ++count;
      which += (which.empty() ? "[" : ", [") + t.calls + "] (" + std::to_string(t.smallest) + " bytes)";
    }
    const std::string what = count == 1 ? "stage [" + stages[first].calls + "]" : std::to_string(count) + " stages";
    std::fprintf(stderr,
                 "oa: the device budget of %zu bytes (%s) cannot hold one unit of %s, which the host ran "
                 "instead%s; the smallest budget that runs %s on %s is %zu bytes\n",
                 on->dev->memory_budget(), on->budget_from.c_str(), what.c_str(),
                 count == 1 ? "" : (": " + which).c_str(), count == 1 ? "it" : "them all", on->dev->name().c_str(), all);
  }
}

scheduler::scheduler(runtime_state& st, const config& c, const std::vector<call_node>& nodes,
                     const std::vector<bool>& live, const std::vector<stage>& stages)
    : st_(st),
      c_(c),
      nodes_(nodes),
      stages_(stages),
      needed_(values_needed_on_host(nodes, live, stages, &demanded_)),
      deps_(stage_dependencies(stages, nodes)),
      done_(stages.size(), false),
      order_(stages.size()),
      feeds_host_(stages.size(), false),
      evaluation_(++st.evaluations),
      by_cost_(c.placement == "cost"),
      reports_(stages.size()) {
  for (std::size_t i = 0; i < stages.size(); ++i)
    for (int n : stages[i].calls) {
      for (const auto& a : nodes[static_cast<std::size_t>(n)].args)
        if (a.role != arg_role::out) last_read_[a.value.get()] = i;
      for (const auto& v : nodes[static_cast<std::size_t>(n)].scalars) last_read_[v.get()] = i;
    }
  read_models();
}

/// OA_PLACEMENT=cost: the models, read from their file when it is named
/// for the first time (the setting may change between evaluations).
void scheduler::read_models() {
  if (!by_cost_ || (st_.models_read && st_.models_file == c_.perf_models)) return;
  st_.save_models(true);
  st_.models = perf_models{};
  st_.models_file = c_.perf_models;
  st_.models_read = true;
  try {
    if (!c_.perf_models.empty()) st_.models.load(c_.perf_models);
  } catch (...) {
    models_error_ = std::current_exception();
    st_.models_read = false;
  }
}

bool scheduler::reads_later(const value_state* v, std::size_t i) const {
  auto it = last_read_.find(v);
  return it != last_read_.end() && it->second >= i;
}

/// The first stage in program order not yet run (stages run out of order:
/// one before it may still read a copy).
std::size_t scheduler::first_pending() const {
  return static_cast<std::size_t>(std::find(done_.begin(), done_.end(), false) - done_.begin());
}

/// Resident copies around stage `i` (placed on `res`'s device when
/// `on_device`): copies no stage from `from` (the first not yet run) on
/// reads are dropped; copies only
/// on the device that this stage reads from host storage are written back;
/// a product read by a later stage may keep its result on the device.
void scheduler::prepare_residency(residency& res, std::size_t i, bool on_device, run_options& opt,
                                  std::size_t from) const {
  const stage& s = stages_[i];
  res.drop_unless([&](const value_state* v) { return reads_later(v, from); });
  device& dev = res.dev();
  // Element-wise stages on a device with its own memory read resident inputs
  // in place (and update them there), taking the copies kept from earlier
  // evaluations whose host bytes are unchanged; products read their inputs
  // from the host.
  const bool in_place = on_device && !dev.host_accessible() && !s.contraction;
  if (in_place && opt.whole_copies)
    for (int c : s.calls)
      for (const auto& a : nodes_[static_cast<std::size_t>(c)].args)
        if (a.role != arg_role::out) res.adopt(a.value);
  for (int c : s.calls) {
    for (const auto& a : nodes_[static_cast<std::size_t>(c)].args) {
      if (a.role == arg_role::out) continue;
      residency::entry* e = res.find(a.value.get());
      if (e && !e->host_valid && (!in_place || a.role == arg_role::mut)) res.write_back(*e);
    }
    for (const auto& v : nodes_[static_cast<std::size_t>(c)].scalars)
      if (residency::entry* e = res.find(v.get()); e && !e->host_valid) res.write_back(*e);
  }
  opt.resident = on_device && !dev.host_accessible() ? &res : nullptr;
  // What the stage reads in place stays while it runs; the rest may be
  // evicted by need.
  std::vector<const value_state*> reads;
  for (int c : s.calls)
    for (const auto& a : nodes_[static_cast<std::size_t>(c)].args)
      if (in_place && a.role != arg_role::out) reads.push_back(a.value.get());
  res.pin_only(reads);
  if (s.contraction && opt.resident) {
    const node_arg& result = nodes_[static_cast<std::size_t>(s.calls.front())].args.back();
    opt.keep_result = result.role == arg_role::out && reads_later(result.value.get(), i + 1);
    opt.result_on_host = !opt.keep_result || demanded_.count(result.value.get()) > 0;
  }
}

/// Planning errors (a budget too small, a device that cannot be made) come
/// back where the stage's values are asked for, and in the report.
stage_report scheduler::failed_report(const stage& s, const run_options& opt) const {
  fail_stage(s, nodes_, std::current_exception());
  stage_report failed;
  for (int n : s.calls) failed.calls.push_back(nodes_[static_cast<std::size_t>(n)].name);
  failed.units = s.units;
  failed.op = s.contraction ? "gemm" : "stage";
  if (const char* op = nodes_[static_cast<std::size_t>(s.calls.front())].report_op) failed.op = op;
  failed.placement_reason = opt.placement_reason;
  failed.error = message_of(std::current_exception());
  return failed;
}

void scheduler::log_ready() {
  for (; logged_ < stages_.size() && reports_[logged_]; ++logged_) {
    reports_[logged_]->evaluation = evaluation_;
    reports_[logged_]->stage = logged_ + 1;
    st_.log.add(std::move(*reports_[logged_]));
  }
}

/// What a stage's run leaves behind, on the evaluating thread: the models
/// learn, a sticky fault retires the device, the report joins the log.
void scheduler::finish(std::size_t i, stage_report rep, const stage_cost& cost, device& where, bool alone) {
  device& host = host_locked(st_);
  // (A stage run together with others took its share's time, not its own.)
  if (by_cost_ && alone) {
    learn(st_.models, cost, &where == &host ? device_group{} : device_group{{&where}}, rep);
    st_.models_learned = true;
  }
  // A report's device_fault is a sticky fault (a CUDA kernel fault,
  // OA_FAIL_STICKY): the device is lost, its unfinished chunks or tiles
  // ran elsewhere, and later stages go to the other devices or the host.
  // After a transient fault only the failed chunks re-ran (host_reruns)
  // and the device goes on.
  for (auto& e : st_.devices) {
    // (Stages run together may each have met the loss: said once.)
    if (e.dev.get() != &where || rep.device_fault.empty() || !e.failed.empty()) continue;
    e.failed = rep.device_fault;
    std::fprintf(stderr, "%s; %zu %s%s re-run on the host, %s\n", rep.device_fault.c_str(), rep.host_reruns,
                 stages_[i].contraction ? "tile" : "chunk", rep.host_reruns == 1 ? "" : "s",
                 st_.usable().empty() ? "which runs every later stage" : "and later stages go to the other devices");
  }
  reports_[i] = std::move(rep);
  log_ready();
}

/// A stage spread over several devices: those lost in it are retired.
void scheduler::finish_spread(std::size_t i, stage_report rep, const stage_cost& cost,
                              const std::vector<runtime_state::device_entry*>& on, const std::vector<lost_device>& lost,
                              bool host_shared) {
  if (by_cost_) {
    device_group group = group_of(on);
    if (host_shared) group.devices.push_back(&host_locked(st_));
    learn(st_.models, cost, group, rep);
    st_.models_learned = true;
  }
  // A device lost in the stage leaves it: element-wise chunks it had not
  // taken went to the others, those it had queued (and a product's tiles it
  // had not finished) ran on the host.
  for (std::size_t k = 0; k < on.size(); ++k) {
    if (lost[k].why.empty()) continue;
    on[k]->failed = lost[k].why;
    const bool others = !st_.usable().empty();
    std::fprintf(stderr, "%s; %zu of its %s ran on the host%s%s\n", lost[k].why.c_str(), lost[k].reruns,
                 stages_[i].contraction ? "tiles" : "chunks",
                 stages_[i].contraction || !others ? "" : ", the others went to the other devices",
                 others ? "; later stages go to the devices left" : "; the host runs every later stage");
  }
  reports_[i] = std::move(rep);
  log_ready();
}

void scheduler::collect_beside() {
  if (!lane_.busy()) return;
  host_lane::result r = lane_.wait();
  st_.log.add_trace(r.trace);
  finish(r.stage, std::move(r.rep), r.cost, host_locked(st_), !lane_shared_);
  lane_shared_ = false;
}

run_options scheduler::options_for(std::size_t i) {
  run_options opt;
  opt.sequential = c_.sequential;
  opt.chunk_bytes = c_.chunk_bytes;
  opt.whole_copies = c_.keep_copies;
  opt.progress = progress_wanted(c_);
  opt.stage_name = "stage " + std::to_string(i + 1) + "/" + std::to_string(stages_.size());
  opt.trace = c_.trace.empty() ? nullptr : &trace_;
  return opt;
}

namespace {
constexpr std::size_t worth_ahead = std::size_t{4} << 20;  // smaller results are made in no time
constexpr double worth_beside = 1 << 20;  // a host stage with less data runs where it is
constexpr const char* beside_track = ", beside the devices";  // the lane's host device in traces
}  // namespace

/// The results of stage i its stage would make, `worth_ahead` bytes or more
/// each (none for a product: its tiles write the result as they go).
std::vector<const value_state*> scheduler::large_results(std::size_t i) const {
  std::vector<const value_state*> out;
  const stage& s = stages_[i];
  if (s.contraction) return out;
  for (int c : s.calls)
    nodes_[static_cast<std::size_t>(c)].for_each_output([&](const value_ptr& v) {
      if (!v->object && v->ops && v->ops->make && needed_.count(v.get()) && v->shape.bytes() >= worth_ahead &&
          std::find(out.begin(), out.end(), v.get()) == out.end())
        out.push_back(v.get());
    });
  return out;
}

/// Running stages together (not one at a time, the baseline), the large
/// results of the stage after each are made on a thread of their own while
/// it runs (`results_ahead`), so that their first touch overlaps it: the
/// host holds them one stage sooner. Without the thread, each stage makes
/// its own.
void scheduler::queue_results_ahead(std::size_t position) {
  if (c_.serial_stages || c_.sequential) return;
  std::size_t after = position + 1;  // the next stage not run yet (some ran together with an earlier one)
  while (after < order_.size() && done_[order_[after]]) ++after;
  if (after >= order_.size()) return;
  const std::vector<const value_state*> next = large_results(order_[after]);
  if (next.empty()) return;
  try {
    if (!ahead_) ahead_ = std::make_unique<results_ahead>();
    ahead_->queue(next);
  } catch (...) {
    // (No thread to be had: the stages make their own.)
  }
}

/// Several devices: an element-wise stage's chunks, or a product's blocks of
/// C, go to all not lost, each reading the host's data.
void scheduler::run_spread(std::size_t i, run_options& opt, const std::vector<runtime_state::device_entry*>& on,
                           const stage_cost& cost, double predicted) {
  for (auto* e : on) prepare_residency(*e->resident, i, false, opt, first_pending());
  opt.whole_copies = false;
  opt.spread_even = c_.spread == "even";
  opt.host_share = st_.host_shares && !stages_[i].contraction && !c_.sequential;
  std::vector<lost_device> lost(on.size());
  opt.lost = &lost;
  std::vector<device*> devs;
  for (auto* e : on) devs.push_back(e->dev.get());
  const stage& s = stages_[i];
  stage_report rep = s.contraction ? run_contraction(s, nodes_, devs, host_locked(st_), opt)
                                   : run_stage(s, nodes_, needed_, devs, host_locked(st_), opt);
  rep.predicted_seconds = predicted;
  finish_spread(i, std::move(rep), cost, on, lost, opt.host_share);
}

/// A stage on the host beside a device runs on a thread of its own, on a
/// host device of its own, while later stages that need not follow it run
/// on the device, and host stages that need not follow it on the host (one
/// such stage at a time).
void scheduler::start_beside(std::size_t i, const run_options& opt, const stage_cost& cost, double predicted) {
  collect_beside();
  device& host = lane_host_locked(st_);
  lane_.start(i, cost, predicted, [this, &s = stages_[i], &host, opt](std::vector<trace_event>& own_trace) {
    run_options mine = opt;
    mine.trace = c_.trace.empty() ? nullptr : &own_trace;
    stage_report rep;
    try {
      rep = s.contraction ? run_contraction(s, nodes_, host, host, mine)
                          : run_stage(s, nodes_, needed_, host, host, mine);
    } catch (...) {
      rep = failed_report(s, mine);
    }
    // Its tracks apart from those of the host stages run meanwhile.
    for (trace_event& e : own_trace)
      if (e.device == host.name()) e.device += beside_track;
    return rep;
  });
}

/// The devices not lost that can run stage i (a unit of it fits their
/// budget, which is not far below the largest), and the placement on the
/// first of them; when none can, the first refusal (the host, and why),
/// with `on` empty.
std::pair<placement, std::vector<runtime_state::device_entry*>> scheduler::capable(std::size_t i) {
  const stage& s = stages_[i];
  device& host = host_locked(st_);
  const std::size_t threshold = by_cost_ ? 0 : c_.host_threshold;
  // A device with a budget far below the largest would make every device
  // run its small chunks (or a product its small tiles): it sits out.
  std::size_t largest = 0;
  for (auto* e : st_.usable()) largest = std::max(largest, e->dev->memory_budget());
  std::vector<runtime_state::device_entry*> on;
  std::optional<placement> first;
  std::vector<std::pair<runtime_state::device_entry*, placement>> refused;
  for (auto* e : st_.usable()) {
    placement p = place_stage(s, nodes_, needed_, *e->dev, host, threshold, e->failed);
    if (p.where != e->dev.get()) {
      refused.emplace_back(e, std::move(p));
      continue;
    }
    // Sequential (a baseline): one device, one chunk at a time.
    if (e->dev->memory_budget() < largest / 8 || (c_.sequential && !on.empty())) continue;
    if (!first) first = std::move(p);
    on.push_back(e);
  }
  if (first) return {std::move(*first), std::move(on)};
  // None can: each device whose budget is too small for a unit is said.
  for (auto& r : refused)
    if (r.second.smallest_budget) too_small_.add(*r.first, describe(s, nodes_), r.second.smallest_budget);
  if (!refused.empty()) return {std::move(refused.front().second), {}};
  // Every device lost: each one's loss is said.
  runtime_state::device_entry& target = st_.target();
  std::string failed;
  for (const auto& e : st_.devices)
    if (!e.failed.empty()) failed += (failed.empty() ? "" : "; ") + e.failed;
  return {place_stage(s, nodes_, needed_, *target.dev, host, threshold, failed.empty() ? target.failed : failed), {}};
}

/// OA_PLACEMENT=cost: where stage i is predicted to finish first, the host
/// or the devices `on` that can run it (`place` is the first's placement);
/// its cost, and the prediction (0 while a side calibrates).
placement scheduler::placed_by_cost(std::size_t i, placement place,
                                    const std::vector<runtime_state::device_entry*>& on, stage_cost& cost,
                                    double& predicted) {
  const stage& s = stages_[i];
  device& host = host_locked(st_);
  runtime_state::device_entry& target = on.empty() ? st_.target() : *on.front();
  // Resident copies count only where the stage reads them: on one device.
  cost = cost_of(s, nodes_, needed_, on.size() > 1 ? nullptr : target.resident.get(), place.layout.get());
  device_group group = on.size() > 1 ? group_of(on) : device_group{{target.dev.get()}};
  if (st_.host_shares && !s.contraction && !c_.sequential) group.devices.push_back(&host);
  return place_by_cost(cost, place, host, st_.models, predicted, group);
}

/// Places stage i and runs it (or starts it beside the device).
void scheduler::run_one(std::size_t i, run_options& opt) {
  const stage& s = stages_[i];
  if (models_error_) std::rethrow_exception(models_error_);
  (void)device_locked(st_);
  device& host = host_locked(st_);
  // Several devices share a stage placed on the first of them.
  auto [place, on] = capable(i);
  runtime_state::device_entry& target = on.empty() ? st_.target() : *on.front();
  device& dev = *target.dev;
  const bool host_shares = st_.host_shares && !s.contraction && !c_.sequential;
  stage_cost cost;
  double predicted = 0;
  if (by_cost_) place = placed_by_cost(i, std::move(place), on, cost, predicted);
  device& where = *place.where;
  opt.placement_reason = place.reason;
  opt.streams = &where == &dev ? c_.streams : 0;  // a fallback host uses its own parallelism
  if (&where == &dev && (on.size() > 1 || host_shares)) return run_spread(i, opt, on, cost, predicted);
  // (A stage still calibrating runs alone: its models learn its time alone.)
  if (&where == &dev && &dev != &host && on.size() == 1 && !host_shares && (!by_cost_ || predicted > 0))
    if (std::vector<std::size_t> group = companions(i, target); !group.empty())
      return run_together(group, opt, target);
  prepare_residency(*target.resident, i, &where == &dev, opt, first_pending());
  // (Not while the host takes shares of device stages: its streams are theirs too.)
  // While another runs beside on the lane's host device, a small host stage
  // (a reduction's initial value) runs here, on the host device: it does
  // not wait for that one.
  const bool host_here = !c_.serial_stages && !st_.host_shares && &where == &host && &dev != &host;
  const bool small = host_here && lane_.busy() && cost_of(s, nodes_, needed_, nullptr).bytes < worth_beside;
  if (host_here && !small && beside_worth_it(i)) return start_beside(i, opt, cost, predicted);
  if (&where == &host && !small) collect_beside();  // a larger one waits for the lane's (the cores are its)
  // (Timed beside the lane's stage, it teaches the models nothing, nor does that one.)
  const bool beside_lane = &where == &host && lane_.busy();
  lane_shared_ = lane_shared_ || beside_lane;
  const std::size_t evicted_before = target.resident->evicted_bytes();
  stage_report rep = s.contraction ? run_contraction(s, nodes_, where, host, opt)
                                   : run_stage(s, nodes_, needed_, where, host, opt);
  rep.evicted_bytes = target.resident->evicted_bytes() - evicted_before;
  rep.predicted_seconds = predicted;
  // The kernels' time of a stage the device ran whole (none re-run on the
  // host), by the bytes companions() looks it up by.
  if (&where != &host && !s.contraction && rep.error.empty() && rep.device_fault.empty() && rep.host_reruns == 0 &&
      rep.compute_seconds > 0) {
    const stage_cost measured = cost_of(s, nodes_, needed_, nullptr);
    st_.kernel_times.record(measured.op, where.name(), measured.bytes, rep.compute_seconds);
  }
  finish(i, std::move(rep), cost, where, !beside_lane);
}

/// Whether stage i goes to the host while a device is at hand (by
/// threshold, capability or cost, as run_one would place it now) with work
/// enough to be worth running beside the device: a megabyte of data or more
/// (a reduction's initial value, a small stage, ends before it would matter).
bool scheduler::bound_for_host(std::size_t i) {
  try {
    if (cost_of(stages_[i], nodes_, needed_, nullptr).bytes < worth_beside) return false;
    auto [place, on] = capable(i);
    if (by_cost_ && !on.empty()) {
      stage_cost cost;
      double predicted = 0;
      place = placed_by_cost(i, std::move(place), on, cost, predicted);
    }
    return place.where == &host_locked(st_);
  } catch (...) {
    return false;  // it meets its error when it runs
  }
}

/// Program order, but the first stage bound for the host goes as soon as
/// its inputs are made: the device stages it follows first (with others
/// only where they would end about as soon), then it on the host lane while the rest run on the device. Left in its
/// place it may come last, with nothing left to run beside it (a sort's
/// merge after the device's independent work).
void scheduler::order_stages() {
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  if (stages_.size() < 3 || c_.serial_stages || c_.sequential || st_.host_shares || models_error_) return;
  try {
    if (&device_locked(st_) == &host_locked(st_)) return;
  } catch (...) {
    return;  // the device cannot be made: each stage says so in order
  }
  std::size_t h = 0;
  while (h < stages_.size() && !bound_for_host(h)) ++h;
  if (h == 0 || h == stages_.size()) return;  // first already, or none
  std::vector<bool> before(stages_.size(), false);  // h's ancestors (a stage follows earlier ones only)
  for (std::size_t j = h + 1; j-- > 0;)
    if (j == h || before[j])
      for (std::size_t k : deps_[j]) before[k] = true;
  // Every other stage one it follows, and it last: nothing would run beside it.
  if (h + 1 == stages_.size() && std::all_of(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(h),
                                             [](bool b) { return b; }))
    return;
  order_.clear();
  for (std::size_t k = 0; k < h; ++k)
    if (before[k]) order_.push_back(k), feeds_host_[k] = true;
  order_.push_back(h);
  for (std::size_t k = 0; k < stages_.size(); ++k)
    if (k != h && !before[k]) order_.push_back(k);
}

/// A host stage runs beside the device when the next stage to run need not
/// follow it.
bool scheduler::beside_worth_it(std::size_t i) const {
  auto it = std::find(order_.begin(), order_.end(), i);
  while (it != order_.end() && (*it == i || done_[*it])) ++it;
  return it != order_.end() && std::find(deps_[*it].begin(), deps_[*it].end(), i) == deps_[*it].end();
}

void scheduler::run() {
  order_stages();
  for (std::size_t p = 0; p < order_.size(); ++p) {
    const std::size_t i = order_[p];
    if (done_[i]) continue;  // ran together with an earlier stage
    // A stage that must follow the one beside the device waits for it.
    if (lane_.busy() && std::find(deps_[i].begin(), deps_[i].end(), lane_.stage()) != deps_[i].end())
      collect_beside();
    queue_results_ahead(p);
    run_options opt = options_for(i);
    opt.ahead = ahead_.get();
    try {
      run_one(i, opt);
    } catch (...) {
      reports_[i] = failed_report(stages_[i], opt);
      log_ready();
    }
    done_[i] = true;
    if (opt.trace) st_.log.add_trace(trace_);
  }
  collect_beside();
  too_small_.say();
  st_.save_models(false);
  // No later stage of this evaluation reads a copy: those the host holds too
  // are kept for later evaluations.
  for (auto& d : st_.devices) {
    if (c_.keep_copies)
      d.resident->end_evaluation();
    else
      d.resident->clear();
  }
}

}  // namespace oa::detail
