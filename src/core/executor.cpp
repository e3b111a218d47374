#include "core/executor.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/chunk_pipeline.hpp"
#include "core/chunk_work.hpp"
#include "core/host_taker.hpp"
#include "core/progress.hpp"
#include "core/recovery.hpp"
#include "core/results_ahead.hpp"
#include "core/stage_plan.hpp"
#include "core/undo_log.hpp"
#include "oa/core/error.hpp"
#include "oa/core/process_clock.hpp"

namespace oa::detail {

stage cancel_failed(const stage& s, const std::vector<call_node>& nodes, std::string* why) {
  stage kept = s;
  kept.calls.clear();
  std::string names;
  std::exception_ptr first;
  for (int c : s.calls) {
    const call_node& n = nodes[static_cast<std::size_t>(c)];
    std::exception_ptr err;
    for (const auto& a : n.args)
      if (a.role != arg_role::out && a.value->status == value_status::failed) err = a.value->error;
    for (const auto& v : n.scalars)
      if (v->status == value_status::failed) err = v->error;
    if (!err) {
      kept.calls.push_back(c);
      continue;
    }
    n.for_each_output([&](const value_ptr& v) { v->fail(err); });
    names += (names.empty() ? "" : ", ") + n.name;
    if (!first) first = err;
  }
  if (why && why->empty() && first) *why = names + ": not run: what they read failed: " + message_of(first);
  return kept;
}


stage_report report_for(const stage& s, const std::vector<call_node>& nodes, const device& dev,
                        const run_options& opt) {
  stage_report rep;
  for (int c : s.calls) rep.calls.push_back(nodes[static_cast<std::size_t>(c)].name);
  rep.device = dev.name();
  rep.placement_reason = opt.placement_reason;
  rep.units = s.units;
  rep.op = s.contraction ? "gemm" : "stage";
  if (!s.calls.empty())
    if (const char* op = nodes[static_cast<std::size_t>(s.calls.front())].report_op) rep.op = op;
  if (rep.op == "cwise" || rep.op == "reduction") rep.dims = "elements=" + std::to_string(s.units);
  if (s.contraction && !s.calls.empty()) {
    const contraction_desc& d = *nodes[static_cast<std::size_t>(s.calls.front())].contraction;
    rep.dims = "m=" + std::to_string(d.m) + " n=" + std::to_string(d.n) + " k=" + std::to_string(d.k);
  }
  return rep;
}

void add_device_records(stage_report& rep, device& dev, const run_options& opt) {
  const std::vector<op_record> ops = dev.take_records();
  std::string stage;  // copies are named by direction only: this says whose they are
  for (const std::string& c : rep.calls) stage += (stage.empty() ? "" : ", ") + c;
  for (const auto& o : ops) {
    if (o.what == phase::h2d) rep.h2d_bytes += o.bytes;
    if (o.what == phase::d2h) rep.d2h_bytes += o.bytes;
    if (o.what == phase::fill) rep.fill_seconds += o.end - o.begin;
    if (o.what == phase::drain) rep.drain_seconds += o.end - o.begin;
    if (o.what == phase::prefault) rep.prefault_seconds += o.end - o.begin;
    if (opt.trace) {
      std::string track = o.what == phase::compute                          ? "stream " + std::to_string(o.stream)
                          : o.what == phase::h2d || o.what == phase::d2h ? std::string(to_string(o.what)) + " copy engine"
                          : o.what == phase::pin                         ? std::string("host memory pinned")
                                                                         : "staging " + std::string(to_string(o.what)) + " threads";
      opt.trace->push_back({dev.name(), std::move(track), o.what == phase::compute ? o.label : to_string(o.what),
                            o.begin, o.end, o.bytes, stage});
    }
  }
  rep.h2d_seconds += busy_seconds(ops, phase::h2d);
  rep.compute_seconds += busy_seconds(ops, phase::compute);
  rep.d2h_seconds += busy_seconds(ops, phase::d2h);
}

void check_caller_objects(const stage& s, const std::vector<call_node>& nodes) {
  for (int c : s.calls) {
    const call_node& n = nodes[static_cast<std::size_t>(c)];
    for (const auto& a : n.args) {
      const value_state& v = *a.value;
      if (a.role == arg_role::out || !v.user_storage || !v.ops || !v.ops->shape_of) continue;
      const split::shape now = v.ops->shape_of(v.object);
      if (now == v.shape) continue;
      throw invalid_argument(n.name, v.label,
                             "the caller's object has " + std::to_string(now.units) + " units of " +
                                 std::to_string(now.unit_bytes()) + " bytes now, but had " +
                                 std::to_string(v.shape.units) + " of " + std::to_string(v.shape.unit_bytes()) +
                                 " when the call was recorded: objects passed to oa must stay alive and unchanged "
                                 "until their calls have run");
    }
  }
}

/// The shared handle of a value the stage's calls take or make.
value_ptr value_of(const stage& s, const std::vector<call_node>& nodes, const value_state* v) {
  for (int c : s.calls)
    for (const auto& a : nodes[static_cast<std::size_t>(c)].args) {
      if (a.value.get() == v) return a.value;
      if (a.new_value.get() == v) return a.new_value;
    }
  return nullptr;
}

void fail_stage(const stage& s, const std::vector<call_node>& nodes, std::exception_ptr e) {
  for (int c : s.calls)
    nodes[static_cast<std::size_t>(c)].for_each_output([&](const value_ptr& v) { v->fail(e); });
}

namespace {

/// "emulated:0 + emulated:1" ("+ host" where it takes chunks too): a stage
/// spread over several devices.
std::string spread_name(const std::vector<device*>& devs, const device* host) {
  std::string out;
  for (device* d : devs) out += (out.empty() ? "" : " + ") + d->name();
  if (host) out += " + " + host->name();
  return out;
}

/// One run of a stage's calls, and the position of the call whose error
/// failed it, if one did.
struct attempt {
  stage_report rep;
  std::optional<std::size_t> culprit;
};

/// In-place updates: the new version of a value with a buffer of its own
/// lives where the old one does (its copy), and a copy ends up holding the
/// last version. (old, new) value indices in call order, and each value's
/// next version (-1: none).
struct update_chain {
  std::vector<std::pair<std::size_t, std::size_t>> updates;
  std::vector<int> next_version;

  update_chain(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L)
      : next_version(L.values.size(), -1) {
    std::unordered_map<const value_state*, std::size_t> index;
    for (std::size_t k = 0; k < L.values.size(); ++k) index[L.values[k].v] = k;
    for (int c : s.calls)
      for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
        if (a.role == arg_role::mut) {
          const std::size_t from = index.at(a.value.get()), to = index.at(a.new_value.get());
          updates.emplace_back(from, to);
          next_version[from] = static_cast<int>(to);
        }
  }
  std::size_t last_version(std::size_t k) const {
    while (next_version[k] >= 0) k = static_cast<std::size_t>(next_version[k]);
    return k;
  }
};

/// The plan, and whole copies allocated for it; without room for them, the
/// stage planned again without.
stage_plan plan_with_copies(const stage& s, const std::vector<call_node>& nodes,
                            const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& host,
                            const run_options& opt, whole_copies& whole) {
  stage_plan P = plan_stage(s, nodes, needed_on_host, dev, host, opt);
  whole.copies.resize(P.layout.values.size());
  whole.host.resize(P.layout.values.size());
  try {
    for (std::size_t k = 0; k < P.whole.size(); ++k) {
      if (!P.whole[k]) continue;
      whole.host[k] = residency::whole_region(*P.layout.values[k].v);
      whole.copies[k] = device_buffer(dev, residency::span(whole.host[k]));
    }
  } catch (const device_out_of_memory&) {
    whole.copies.clear();
    run_options without = opt;
    without.whole_copies = false;
    P = plan_stage(s, nodes, needed_on_host, dev, host, without);
    whole.copies.resize(P.layout.values.size());
  }
  return P;
}

/// A stage that succeeded: reductions merged from every entry of every
/// chunk in order (the result does not depend on which stream ran which
/// chunk), its values ready, and when every chunk ran on the device its
/// whole copies kept as resident values.
void commit(const stage& s, const std::vector<call_node>& nodes, const stage_plan& P, chunk_feed& feed,
            whole_copies& whole, const update_chain& chain, bool copies_hold, const run_options& opt,
            stage_report& rep) {
  const stage_layout& L = P.layout;
  const std::size_t nchunks = feed.partial_entries().size();
  for (std::size_t q = 0; q < L.reductions.size(); ++q) {
    value_state* r = L.reductions[q];
    const std::size_t pb = r->ops->partial_bytes;
    std::vector<std::byte> mine;
    for (std::size_t j = 0; j < nchunks; ++j) {
      const std::byte* from = feed.partials().data() + j * P.chunk_partial_bytes + P.partial_offsets[q];
      mine.insert(mine.end(), from, from + feed.partial_entries()[j] * pb);
    }
    r->ops->merge(mine.data(), mine.size() / std::max<std::size_t>(pb, 1), r->object);
  }
  for (int c : s.calls)
    nodes[static_cast<std::size_t>(c)].for_each_output([](const value_ptr& v) { v->status = value_status::ready; });
  if (!copies_hold) return;
  for (std::size_t k = 0; k < whole.copies.size(); ++k) {
    if (!whole.copies[k].data()) continue;
    rep.resident_bytes += whole.copies[k].size();
    opt.resident->add(value_of(s, nodes, L.values[chain.last_version(k)].v), std::move(whole.copies[k]),
                      whole.host[k], true);
  }
}

/// One stage's plan for several devices: planned for each (no whole copies,
/// no resident values: the chunks of every device read the host), the one
/// with the smallest chunks taken by all, so that any device can run any chunk.
stage_plan plan_spread(const stage& s, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, const std::vector<device*>& devs,
                       device& host, const run_options& opt) {
  run_options plain = opt;
  plain.whole_copies = false;
  plain.resident = nullptr;
  // A device that cannot plan the stage sits it out (it cannot allocate a
  // chunk of the others' plan either); with none, the first one's error.
  std::optional<stage_plan> best;
  std::exception_ptr first_error;
  for (device* d : devs) {
    try {
      stage_plan P = plan_stage(s, nodes, needed_on_host, *d, host, plain);
      if (!best || P.chunks.chunk_units < best->chunks.chunk_units) best = std::move(P);
    } catch (const plan_error&) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (!best) std::rethrow_exception(first_error);
  return std::move(*best);
}

/// The pipelines of a stage's devices, one each, run side by side (each
/// driven by a thread of its own beyond the first). A device that cannot
/// hold one of the shared chunks sits the stage out.
/// `host_share`, when given, takes chunks too, as the last taker.
void run_pipelines(std::vector<std::unique_ptr<chunk_pipeline>>& pipes, host_taker* host_share, chunk_feed& feed,
                   std::vector<pipeline_outcome>& outs, std::vector<stage_report>& reps) {
  const bool shared = pipes.size() > 1 || host_share;
  // Nothing may escape a thread: what a taker throws fails the stage.
  const auto one = [&](std::size_t d) {
    try {
      if (d == pipes.size()) return host_share->run(feed, static_cast<int>(d), outs[d]);
      try {
        if (shared) pipes[d]->allocate(outs[d], true);
      } catch (const plan_error&) {
        feed.leave(static_cast<int>(d));  // no room for one shared chunk: it sits the stage out
      }
      pipes[d]->run(feed, static_cast<int>(d), outs[d], reps[d]);
    } catch (...) {
      if (!outs[d].stage_error) outs[d].stage_error = std::current_exception();
      feed.stop();
    }
  };
  std::vector<std::thread> others;
  for (std::size_t d = 1; d < outs.size(); ++d) others.emplace_back(one, d);
  one(0);
  for (auto& t : others) t.join();
}

/// Runs the stage once: plan, chunk pipelines, host re-runs of faulted
/// chunks, then its values committed, or on a call's error every caller's
/// object put back and the stage failed.
attempt run_once(const stage& s, const std::vector<call_node>& nodes,
                 const std::unordered_set<const value_state*>& needed_on_host, const std::vector<device*>& devs,
                 device& host, const run_options& opt) {
  const auto t0 = clock_type::now();
  device& dev = *devs.front();
  const bool spread = devs.size() > 1 || opt.host_share;
  const std::size_t takers = devs.size() + (opt.host_share ? 1 : 0);
  attempt a{report_for(s, nodes, dev, opt), {}};
  stage_report& rep = a.rep;
  if (spread) rep.device = spread_name(devs, opt.host_share ? &host : nullptr);
  // Whole copies are freed after the slots' streams are done (the pipelines
  // go first), or kept when the stage succeeds.
  whole_copies whole;
  const stage_plan P = spread ? plan_spread(s, nodes, needed_on_host, devs, host, opt)
                              : plan_with_copies(s, nodes, needed_on_host, dev, host, opt, whole);
  whole.copies.resize(P.layout.values.size());
  whole.host.resize(P.layout.values.size());
  // Planned without the copies pinned for it: the stage reads every value
  // from the host, which must hold them first.
  if (P.release_pinned) opt.resident->release_pinned();
  const stage_layout& L = P.layout;
  const update_chain chain(s, nodes, L);
  const bool fused = P.mode == placement_mode::fused;

  // Host storage of results, created uninitialised and filled chunk by chunk.
  // Its first touch is host work before the stage's first copy (a large
  // result's pages faulted in): a trace shows it.
  const auto making = std::chrono::steady_clock::now();
  std::size_t made_bytes = 0;
  for (const auto& v : L.values)
    if (v.cls == value_class::output && !v.v->object) {
      if (auto m = opt.ahead ? opt.ahead->take(v.v) : std::nullopt) {
        v.v->owned = std::move(m->owned);
        v.v->object = m->object;
        continue;
      }
      v.v->owned = v.v->ops->make(v.v->shape, v.v->state.get(), v.v->object);
      made_bytes += v.v->shape.bytes();
    }
  for (value_state* r : L.reductions) r->owned = r->ops->make(r->shape, r->state.get(), r->object);
  if (opt.trace && made_bytes > 0) {
    std::string calls;
    for (const std::string& c : rep.calls) calls += (calls.empty() ? "" : ", ") + c;
    opt.trace->push_back({host.name(), "host results", "results made", process_seconds(making),
                          process_seconds(std::chrono::steady_clock::now()), made_bytes, std::move(calls)});
  }

  for (device* d : devs) {
    d->set_recording(true);
    (void)d->take_records();
    d->reset_peak();
  }
  undo_log undo(s, nodes);         // outlives the pipelines, whose queued work saves into it
  std::optional<chunk_feed> feed;  // likewise: queued work writes the partials
  std::vector<pipeline_outcome> outs(takers);
  std::vector<stage_report> reps(devs.size());
  std::optional<host_taker> host_share;
  if (opt.host_share) host_share.emplace(host, s, nodes, needed_on_host, P, undo);
  std::vector<std::unique_ptr<chunk_pipeline>> pipes;
  for (device* d : devs)
    pipes.push_back(std::make_unique<chunk_pipeline>(s, nodes, P, *d, opt, whole, chain.updates, undo));
  // One device may take smaller chunks when its memory runs short; chunks
  // shared by several are fixed before any runs.
  if (!spread) pipes.front()->allocate(outs.front(), false);
  const std::size_t chunk_units = spread ? P.chunks.chunk_units : pipes.front()->chunk_units();
  // The progress line names every device a spread stage runs on.
  const std::string what = spread ? P.what.substr(0, P.what.rfind(" on ")) + " on " + rep.device : P.what;
  feed.emplace(s.units, chunk_units, P.chunk_partial_bytes, static_cast<int>(takers), opt.spread_even, opt.progress,
               "oa: " + what);
  undo.plan(feed->ranges());
  run_pipelines(pipes, host_share ? &*host_share : nullptr, *feed, outs, reps);

  pipeline_outcome out;
  for (std::size_t d = 0; d < takers; ++d) {
    out.faulted.insert(out.faulted.end(), outs[d].faulted.begin(), outs[d].faulted.end());
    if (!out.stage_error) out.stage_error = outs[d].stage_error;
    if (outs[d].lost && !out.lost) out.lost = outs[d].lost;
    if (outs[d].lost) rep.device_fault += (rep.device_fault.empty() ? "" : "; ") + message_of(outs[d].lost);
    out.completed += outs[d].completed;
    if (opt.lost && outs[d].lost && d < devs.size()) (*opt.lost)[d] = {message_of(outs[d].lost), outs[d].faulted.size()};
  }
  // Chunks no device took (every one was lost, or had no room) run on the host.
  if (!out.stage_error)
    for (std::size_t j : feed->untaken()) out.faulted.push_back(j);
  const std::size_t nchunks = feed->count();
  rep.device_chunks = out.completed - (host_share ? outs.back().completed : 0);  // the host's share is in chunks_by_device

  // Chunks the devices failed on run again on the host, from the caller's
  // data as it was before the chunk.
  if (!out.stage_error && !out.faulted.empty()) {
    // The host reads inputs from their host storage: device-only copies go back first.
    for (residency::entry* e : P.resident_in) {
      if (!e || e->host_valid || out.stage_error) continue;
      try {
        opt.resident->write_back(*e);
      } catch (...) {
        out.stage_error = std::make_exception_ptr(
            device_fault("oa: " + e->value->label + " was kept only in the memory of " + dev.name() +
                         ", and could not be copied back after a device fault: " + message_of(std::current_exception())));
      }
    }
  }
  if (!out.stage_error && !out.faulted.empty()) {
    std::sort(out.faulted.begin(), out.faulted.end());
    for (std::size_t j : out.faulted) undo.before_rerun(j);
    if (!fused)
      for (std::size_t j : out.faulted) feed->partial_entries()[j] = 1;
    out.stage_error = rerun_on_host(*P.fallback, s, nodes, needed_on_host, feed->ranges(), out.faulted,
                                    feed->chunk_units(), L, P.partial_offsets, P.chunk_partial_bytes, feed->partials(),
                                    fused ? &feed->partial_entries() : nullptr);
    rep.host_reruns = out.faulted.size();
  }

  rep.streams = 0;
  for (std::size_t d = 0; d < devs.size(); ++d) {
    add_device_records(rep, *devs[d], opt);
    rep.peak_device_bytes = std::max(rep.peak_device_bytes, reps[d].peak_device_bytes);
    rep.resident_bytes_saved += reps[d].resident_bytes_saved;
    rep.streams += pipes[d]->slots();
    if (spread) rep.chunks_by_device.emplace_back(devs[d]->name(), outs[d].completed);
  }
  if (host_share) rep.chunks_by_device.emplace_back(host.name(), outs.back().completed);
  rep.chunk_units = feed->chunk_units();
  rep.chunks = nchunks;
  rep.sequential = opt.sequential;
  rep.bytes_per_unit = P.bytes_per_unit;
  rep.rollback_bytes = undo.bytes();

  // Copies updated in place hold the new versions only if every chunk ran
  // on the device and the stage succeeded.
  const bool copies_hold = opt.resident && !out.stage_error && out.faulted.empty() && !out.lost;
  for (std::size_t k = 0; k < P.resident_in.size(); ++k) {
    if (!P.resident_in[k] || chain.next_version[k] < 0) continue;
    if (copies_hold)
      opt.resident->rekey(L.values[k].v, value_of(s, nodes, L.values[chain.last_version(k)].v));
    else
      opt.resident->drop(L.values[k].v);
  }

  if (out.stage_error) {
    // All or nothing: the caller's objects go back to what they were.
    undo.restore_all();
    std::exception_ptr error = out.stage_error;
    try {
      std::rethrow_exception(out.stage_error);
    } catch (const call_failed& f) {
      a.culprit = f.position;
      error = f.error;
    } catch (...) {
    }
    rep.error = message_of(error);
    if (a.culprit) {
      // Only the call that threw fails: run_stage runs the rest again.
      nodes[static_cast<std::size_t>(s.calls[*a.culprit])].for_each_output([&](const value_ptr& v) {
        v->fail(error);
      });
    } else {
      fail_stage(s, nodes, error);
    }
  } else {
    commit(s, nodes, P, *feed, whole, chain, copies_hold, opt, rep);
  }
  rep.seconds = seconds_since(t0);
  return a;
}

}  // namespace

stage_report run_stage(const stage& s_in, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, device& dev, device& host,
                       const run_options& opt) {
  return run_stage(s_in, nodes, needed_on_host, std::vector<device*>{&dev}, host, opt);
}

stage_report run_stage(const stage& s_in, const std::vector<call_node>& nodes,
                       const std::unordered_set<const value_state*>& needed_on_host, const std::vector<device*>& devs,
                       device& host, const run_options& opt) {
  const auto t0 = clock_type::now();
  stage_report first = report_for(s_in, nodes, *devs.front(), opt);
  if (devs.size() > 1 || opt.host_share) first.device = spread_name(devs, opt.host_share ? &host : nullptr);
  std::string error;  // the first error: a call cancelled, else one that threw
  stage s = cancel_failed(s_in, nodes, &error);
  first.error = error;
  if (s.calls.empty()) return first;
  check_caller_objects(s, nodes);
  // A call that throws fails alone, with the calls that read what it writes
  // (cancelled when the rest runs again): the others are computed, as a
  // plain program computes what comes before or beside a statement that
  // throws. The report names every call and the first error.
  // A device lost in any attempt is the stage's (its scheduler retires it),
  // and the chunks every attempt ran again on the host count.
  std::string fault;
  std::size_t reruns = 0;
  for (;;) {
    attempt a = run_once(s, nodes, needed_on_host, devs, host, opt);
    if (error.empty()) error = a.rep.error;
    if (fault.empty()) fault = a.rep.device_fault;
    reruns += a.rep.host_reruns;
    if (a.culprit) {
      s.calls.erase(s.calls.begin() + static_cast<std::ptrdiff_t>(*a.culprit));
      s = cancel_failed(s, nodes);
    }
    if (!a.culprit || s.calls.empty()) {
      stage_report rep = std::move(a.rep);
      rep.calls = first.calls;
      rep.error = error;
      rep.device_fault = fault;
      rep.host_reruns = reruns;
      rep.seconds = seconds_since(t0);
      return rep;
    }
  }
}

}  // namespace oa::detail
