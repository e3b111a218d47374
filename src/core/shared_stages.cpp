// Stages together on one device's streams (the DAG on streams): stages that
// conflict with no stage not yet run before them start beside the first,
// each planned for an even share of the device's free memory, each on its
// own streams; the copies of one and the kernels of another overlap on the
// device as the chunks of one stage do.

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <future>
#include <optional>

#include "core/device_share.hpp"
#include "core/scheduler.hpp"
#include "core/stage_plan.hpp"
#include "oa/core/error.hpp"

namespace oa::detail {

namespace {
constexpr std::size_t most_together = 4;  // stages on one device at once
constexpr std::size_t look_ahead = 16;    // stages looked at past the first
constexpr double worth_it = 0.9;          // together must be predicted this much faster than one at a time
constexpr double host_waits = 1.1;        // what the host's stage may wait longer for its inputs, at most
}  // namespace

double predicted_seconds(const std::vector<member_cost>& ms, double share, int slots, const device_rates& r) {
  double in = 0, out = 0, busy = 0, ends = 0, latency = 0;
  const double chunk = share / std::max(1, slots);
  for (const member_cost& m : ms) {
    const stage_cost& c = m.cost;
    in += c.in_bytes;
    out += c.out_bytes;
    busy += m.kernel_seconds;
    if (c.bytes <= 0 || chunk <= 0) continue;
    const double per_chunk = std::min(1.0, chunk / c.bytes);
    ends = std::max(ends, per_chunk * std::min(c.in_bytes / r.h2d, c.out_bytes / r.d2h));
    latency += std::ceil(1 / per_chunk) * 3 * r.op_latency;  // a chunk's copy in, kernel and copy out
  }
  double body = std::max(in / r.h2d, out / r.d2h);
  if (r.both_ways > 0) body = std::max(body, (in + out) / r.both_ways);
  body = std::max(body, busy);
  return body + ends + latency;
}

/// A stage reads a copy resident on the device, or kept there from an
/// earlier evaluation (one of a kind that has been read before being
/// evicted): it runs alone, in place, rather than copy the value in again
/// beside others.
bool scheduler::reads_copies(std::size_t j, runtime_state::device_entry& target) const {
  residency& res = *target.resident;
  for (int c : stages_[j].calls)
    for (const auto& a : nodes_[static_cast<std::size_t>(c)].args)
      if (a.role != arg_role::out &&
          (res.find(a.value.get()) || (res.holds_kept(*a.value) && res.keeping_pays(*a.value))))
        return true;
  return false;
}

/// A stage that, alone, would leave a copy on the device for a later stage
/// or evaluation to read in place: an element-wise stage keeps whole copies
/// of its values while they fit in half the budget (with OA_KEEP_COPIES;
/// the first to fit take the room, as the planner gives it), a product
/// keeps its result for a later stage that reads it. Beside others it would
/// leave none, and the value would cross the link again. A copy only for a
/// later evaluation counts while such copies have been read there: one
/// that the stages before its reader evict each time (a stage streaming
/// more than the budget) is not worth a stage run alone.
bool scheduler::leaves_copy(std::size_t j, runtime_state::device_entry& target) const {
  const stage& s = stages_[j];
  const auto partitioned = [](const value_state* v) {
    return v && v->ops && v->ops->kind == split::split_kind::partitioned && v->shape.units > 0;
  };
  std::size_t room = target.dev->memory_budget() / 2;
  std::vector<const value_state*> seen;
  for (int c : s.calls)
    for (const auto& a : nodes_[static_cast<std::size_t>(c)].args) {
      const value_state* v = a.value.get();
      if (s.contraction) {
        if (a.role == arg_role::out && reads_later(v, j + 1)) return true;
        continue;
      }
      if (!c_.keep_copies || !partitioned(v) || std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
      seen.push_back(v);
      if (v->shape.bytes() > room) continue;
      room -= v->shape.bytes();
      if (reads_later(v, j + 1) || target.resident->keeping_pays(*v)) return true;
    }
  return false;
}

/// The pipeline slots stage j is planned with in `share`; 0 when one unit
/// of it on one slot does not fit. A product joins others only when A, B
/// and C take at most half its share (a margin, so that it runs as one
/// tile: smaller tiles would move more bytes); its copies and its kernel
/// then overlap as a pipeline's (two slots, as far as the model goes).
int scheduler::slots_in_share(std::size_t j, device& share) {
  constexpr int whole_product = 2;
  const stage& s = stages_[j];
  if (s.contraction) {
    const contraction_desc& d = *nodes_[static_cast<std::size_t>(s.calls.front())].contraction;
    return (d.m * d.k + d.k * d.n + d.m * d.n) * d.elem_bytes <= share.memory_budget() / 2 ? whole_product : 0;
  }
  run_options opt = options_for(j);
  opt.whole_copies = false;
  opt.streams = c_.streams;
  try {
    return plan_stage(s, nodes_, needed_, share, host_locked(st_), opt).slots;
  } catch (...) {
    return 0;  // too small a share, or a stage that fails to plan at all: alone, it says why
  }
}

/// Predicted seconds of stages `group` together, each in an even share of
/// `free` bytes (one stage: alone in all of it). Together, none finishes
/// before its own pipeline in its share would: on one slot a stage's copies
/// and kernels take turns (a sort's runs, whose unit fills a small share),
/// so its chunks' copies in, kernels and copies out add up. A stage that
/// does not fit its share makes the group never sooner.
double scheduler::predicted_together(const std::vector<std::size_t>& group, std::size_t free, device& dev) {
  const int slots = c_.streams > 0 ? c_.streams : dev.preferred_streams();
  const device_rates r = dev.rates();
  const std::size_t share = free / group.size();
  std::vector<member_cost> members;
  double own = 0;
  shared_device whole(dev);
  device_share part(whole, share);
  for (std::size_t j : group) {
    member_cost m{cost_of(stages_[j], nodes_, needed_, nullptr)};
    const stage_cost& c = m.cost;
    const auto measured = st_.kernel_times.predict(c.op, dev.name(), c.bytes);
    m.kernel_seconds = measured ? *measured : r.kernel_bytes > 0 ? c.bytes / r.kernel_bytes : 0.0;
    const int in_share = slots_in_share(j, part);
    if (in_share == 0) return std::numeric_limits<double>::infinity();
    if (in_share == 1) own = std::max(own, c.in_bytes / r.h2d + m.kernel_seconds + c.out_bytes / r.d2h);
    members.push_back(std::move(m));
  }
  return std::max(own, predicted_seconds(members, static_cast<double>(share), slots, r));
}

/// The stages that run together with stage i on `target`: i, and later
/// stages (in program order, at most `look_ahead` past it) that conflict
/// with no stage not yet run before them (nor with the host lane's), are
/// placed on `target` alone, read no copy resident (or kept) there, leave
/// none for a later stage to read (`leaves_copy`), and fit an even share of
/// the memory free on it. Each joins when the stages with it are
/// predicted to finish sooner than without it and it alone: only where they
/// use the device unevenly (one copies in while another copies out, or
/// computes) do they gain; stages that all stream one way would only share
/// the link, in more, smaller chunks. With no rates for the link (an
/// unthrottled emulated one) nothing is predicted: one at a time. Empty
/// when i runs alone.
std::vector<std::size_t> scheduler::companions(std::size_t i, runtime_state::device_entry& target) {
  // Baselines run one stage at a time.
  device& dev = *target.dev;
  if (c_.serial_stages || c_.sequential || st_.host_shares || reads_copies(i, target) ||
      leaves_copy(i, target))
    return {};
  const device_rates r = dev.rates();
  if (!(r.h2d > 0) || !(r.d2h > 0)) return {};
  // Copies kept from earlier evaluations count as free: they are evicted to
  // make the shares, as the pager evicts them for a stage alone.
  const std::size_t budget = dev.memory_budget(), in_use = dev.bytes_in_use();
  const std::size_t held = in_use - std::min(in_use, target.resident->kept_bytes());
  const std::size_t free = budget - std::min(budget, held);
  std::vector<std::size_t> group{i};
  double seconds = predicted_together(group, free, dev), alone = seconds;
  const double alone_i = seconds;
  for (std::size_t j = i + 1; j < stages_.size() && j <= i + look_ahead && group.size() < most_together; ++j) {
    if (done_[j]) continue;
    bool ready = true;
    for (std::size_t k : deps_[j]) ready = ready && done_[k] && !(lane_.busy() && lane_.stage() == k);
    if (!ready) continue;
    std::vector<std::size_t> with = group;
    with.push_back(j);
    double t = 0, j_alone = 0;
    try {
      auto [place, on] = capable(j);
      // By cost, a stage joins where it is predicted to finish first, and
      // not while it calibrates (its models learn its time alone).
      double predicted = 1;
      if (by_cost_ && place.where == target.dev.get()) {
        stage_cost cost;
        place = placed_by_cost(j, std::move(place), on, cost, predicted);
      }
      if (on.size() != 1 || on.front() != &target || place.where != target.dev.get() || !(predicted > 0) ||
          reads_copies(j, target) || leaves_copy(j, target))
        continue;
      t = predicted_together(with, free, dev);
      j_alone = predicted_together({j}, free, dev);
    } catch (...) {
      continue;  // a stage that cannot be looked at runs alone, and meets its error there
    }
    if (t >= worth_it * (seconds + j_alone)) continue;
    // A stage the host's next stage waits for takes company only where it
    // would end about as soon.
    if (feeds_host_[i] && t > host_waits * alone_i) continue;
    group = std::move(with);
    seconds = t;
    alone += j_alone;
  }
  // (Each member fits its share: a group one would not fit is never sooner.)
  if (group.size() < 2 || seconds >= worth_it * alone) return {};
  const std::size_t now_free = budget - std::min(budget, in_use);
  if (now_free < free && (!target.resident->evict(free - now_free) ||
                          budget - std::min(budget, dev.bytes_in_use()) < free))
    return {};
  return group;
}

/// One stage of a group: its options, its share of the device, its trace
/// and its report.
struct group_member {
  std::size_t stage;
  run_options opt;
  std::unique_ptr<device_share> share;
  std::vector<trace_event> trace;
  std::optional<stage_report> rep;
};

namespace {

/// The device's pager off while the group runs (residency::pause_pager).
struct paused_pager {
  residency& res;
  explicit paused_pager(residency& r) : res(r) { res.pause_pager(); }
  paused_pager(const paused_pager&) = delete;
  paused_pager& operator=(const paused_pager&) = delete;
  ~paused_pager() {
    try {
      res.resume_pager();
    } catch (...) {
      // Without its pager the device still keeps its budget: a stage past it
      // takes smaller chunks.
    }
  }
};

}  // namespace

/// The members of `group`, each reading the host's data (copies it reads
/// are written back first). A member other than the first whose copies
/// cannot be prepared is left out: it runs later, alone, and meets the
/// error there; the first's error is its own, as alone.
std::vector<group_member> scheduler::members_of(const std::vector<std::size_t>& group, run_options& first,
                                          runtime_state::device_entry& target) {
  std::vector<group_member> ms;
  for (std::size_t j : group) {
    group_member m{j, j == group.front() ? first : options_for(j), nullptr, {}, std::nullopt};
    try {
      if (j != group.front()) {
        auto [place, on] = capable(j);
        if (by_cost_) {
          stage_cost cost;
          double predicted = 0;
          place = placed_by_cost(j, std::move(place), on, cost, predicted);
        }
        m.opt.placement_reason = place.reason;
        m.opt.streams = c_.streams;
      }
      prepare_residency(*target.resident, j, false, m.opt, first_pending());
    } catch (...) {
      if (j == group.front()) throw;
      continue;
    }
    m.opt.whole_copies = false;
    ms.push_back(std::move(m));
  }
  return ms;
}

/// Runs `group` (stage numbers, the first placed by run_one with `first`'s
/// options) together on target's streams, each in its share of the free
/// memory, each on a thread of its own (on this one when no thread can be
/// made); reports and device faults are taken in stage order once all have
/// ended.
void scheduler::run_together(const std::vector<std::size_t>& group, run_options& first,
                             runtime_state::device_entry& target) {
  device& dev = *target.dev;
  device& host = host_locked(st_);
  shared_device whole(dev);  // declared first: it goes after the shares, which go after their threads
  std::vector<group_member> ms = members_of(group, first, target);
  const std::size_t share = (dev.memory_budget() - std::min(dev.memory_budget(), dev.bytes_in_use())) / ms.size();
  std::string numbers;
  for (const group_member& m : ms) numbers += (numbers.empty() ? "" : ", ") + std::to_string(m.stage + 1);
  for (group_member& m : ms) {
    m.share = std::make_unique<device_share>(whole, share);
    m.opt.trace = c_.trace.empty() ? nullptr : &m.trace;
    m.opt.placement_reason += "; together with stages " + numbers + " on its streams, in a share of " +
                              std::to_string(share) + " bytes of its memory";
  }
  const auto run = [this, &host](group_member& m) {
    const engine_thread_scope engine_work;
    const stage& s = stages_[m.stage];
    try {
      return s.contraction ? run_contraction(s, nodes_, *m.share, host, m.opt)
                           : run_stage(s, nodes_, needed_, *m.share, host, m.opt);
    } catch (...) {
      return failed_report(s, m.opt);
    }
  };
  {
    const paused_pager no_pager(*target.resident);
    std::vector<std::future<stage_report>> threads;
    try {
      for (group_member& m : ms) threads.push_back(std::async(std::launch::async, run, std::ref(m)));
    } catch (...) {
      // No thread for the rest: they run here, beside those started.
    }
    for (std::size_t k = threads.size(); k < ms.size(); ++k) ms[k].rep = run(ms[k]);
    for (std::size_t k = 0; k < threads.size(); ++k) {
      try {
        ms[k].rep = threads[k].get();
      } catch (...) {
        ms[k].rep = failed_report(stages_[ms[k].stage], ms[k].opt);
      }
    }
  }
  for (group_member& m : ms) {
    m.share.reset();
    done_[m.stage] = true;
  }
  for (group_member& m : ms) {
    if (m.opt.trace) st_.log.add_trace(m.trace);
    finish(m.stage, std::move(*m.rep), stage_cost{}, dev, false);
  }
}

}  // namespace oa::detail
