#include "oa/core/runtime.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/planner.hpp"
#include "core/runtime_state.hpp"
#include "core/scheduler.hpp"
#include "oa/core/error.hpp"
#include "oa/core/lazy.hpp"

#if defined(OA_HAS_CUDA)
#include "oa/cuda/device.hpp"
#endif

namespace oa {

using detail::config_locked;
using detail::device_locked;
using detail::host_locked;
using detail::runtime_state;

namespace {

/// The runtime of programs that make none: configured from OA_CONFIG and OA_*
/// at first use; its outputs (OA_REPORT, OA_TRACE) are written at exit.
const std::shared_ptr<runtime_state>& default_state() {
  static const auto* s = [] {
    // Never destroyed: thread_local graphs may outlive statics.
    auto* st = new std::shared_ptr<runtime_state>(std::make_shared<runtime_state>());
    std::atexit([] {
      try {
        runtime::default_instance().write_outputs();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
      }
    });
    return st;
  }();
  return *s;
}

/// Set when the thread's graphs end: trivially destructible, so that it can
/// still be read by what runs after them (a static's destructor at exit, on
/// the main thread, runs after its thread_locals are gone).
thread_local bool thread_graphs_gone = false;

/// A thread's graphs: the default runtime's, and one per active runtime::use
/// (with the runtime it uses, innermost last).
struct thread_graphs {
  std::shared_ptr<detail::graph> base;
  std::vector<std::shared_ptr<detail::graph>> used;
  std::vector<runtime*> runtimes;
  ~thread_graphs() { thread_graphs_gone = true; }
};
thread_local thread_graphs this_thread;

/// The runtime the calling thread's calls go to.
runtime_state& current_state() { return detail::current_graph()->runtime(); }

}  // namespace

namespace detail {
const config& config_locked(runtime_state& s) {
  if (!s.configured) {
    s.cfg = config::from_environment(&s.origin);
    s.configured = true;
    s.publish_hook_settings();
  }
  return s.cfg;
}

std::string setting_origin(std::string_view key) {
  runtime_state& s = current_state();
  std::lock_guard lock(s.mutex);
  (void)config_locked(s);
  return s.origin.where(key);
}
}  // namespace detail

namespace {

/// Whether a GPU can be used, and why not.
bool gpu_usable(std::string& why) {
#if defined(OA_HAS_CUDA)
  return cuda::usable_devices(&why) > 0;
#else
  why = "this build of oa has no CUDA device: built without the CUDA toolkit";
  return false;
#endif
}

/// GPU `ordinal` with `memory` bytes of budget (0: the device's default).
std::unique_ptr<device> make_cuda(const config& c, const config_origin& origin, const std::string& setting,
                                  int ordinal, std::size_t memory) {
  std::string why;
  if (!gpu_usable(why))
    throw device_unavailable("oa: " + origin.where(setting) + ": device 'cuda' cannot be used: no usable GPU (" +
                             why + "); use device 'auto' or 'host' (the CPU), or 'emulated'");
#if defined(OA_HAS_CUDA)
  // The CUDA device takes the budget as given: one beyond the GPU's memory
  // would only fail allocation by allocation, mid-run.
  cudaDeviceProp props{};
  if (memory != 0 && cudaGetDeviceProperties(&props, ordinal) == cudaSuccess && memory > props.totalGlobalMem)
    throw config_error("oa: " + origin.where(setting == "devices" ? "devices" : "device_memory") + ": " +
                       std::to_string(memory) + " bytes is more than the memory of GPU " + std::to_string(ordinal) +
                       " (" + props.name + ": " + std::to_string(props.totalGlobalMem) + " bytes)");
  cuda::options o;
  o.ordinal = ordinal;
  o.memory_budget = memory;
  o.register_host_memory = c.cuda_staging == "register";
  if (c.staging_slot_bytes) o.staging_bytes = c.staging_slot_bytes;
  o.copy_threads = c.staging_threads;
  return cuda::make_device(o);
#else
  (void)c, (void)ordinal, (void)memory;
  throw device_unavailable("oa: " + origin.where(setting) + ": device 'cuda': " + why);
#endif
}

/// An emulated device from the one-device settings, overlaid by `spec` when
/// it comes from OA_DEVICES (then named "emulated:<position>").
std::unique_ptr<device> make_emulated(const config& c, const device_spec* spec, std::size_t position) {
  emulated_options o;
  if (c.device_memory) o.memory_budget = c.device_memory;
  o.link_bytes_per_second = c.link_gbps * 1e9;
  o.link_shared_bytes_per_second = c.link_shared_gbps * 1e9;
  o.link_latency_seconds = c.link_latency_us * 1e-6;
  if (c.staging_slot_bytes) o.staging_slot_bytes = c.staging_slot_bytes;
  o.staging_threads = c.staging_threads;
  o.run_device_functions = c.emulated_device_functions;
  o.fused_kernels = c.emulated_fused;
  if (!spec) {
    o.fail_fill = c.fail_fill;
    o.fail_drain = c.fail_drain;
    o.fail_launch = c.fail_launch;
    o.fail_copy = c.fail_copy;
    o.sticky_faults = c.fail_sticky;
    return make_emulated_device(o);
  }
  o.name = "emulated:" + std::to_string(position);
  if (spec->memory) o.memory_budget = *spec->memory;
  if (spec->link_gbps) o.link_bytes_per_second = *spec->link_gbps * 1e9;
  if (spec->link_shared_gbps) o.link_shared_bytes_per_second = *spec->link_shared_gbps * 1e9;
  if (spec->latency_us) o.link_latency_seconds = *spec->latency_us * 1e-6;
  o.fail_launch = spec->fail_launch;
  o.fail_copy = spec->fail_copy;
  o.fail_fill = spec->fail_fill;
  o.fail_drain = spec->fail_drain;
  o.sticky_faults = spec->sticky;
  return make_emulated_device(o);
}

/// Every usable GPU, each with the budget OA_DEVICE_MEMORY gives.
std::vector<std::unique_ptr<device>> make_all_gpus(const config& c, const config_origin& origin) {
  std::vector<std::unique_ptr<device>> out;
  int n = 1;
#if defined(OA_HAS_CUDA)
  n = std::max(1, cuda::usable_devices());
#endif
  for (int g = 0; g < n; ++g) out.push_back(make_cuda(c, origin, "device", g, c.device_memory));
  return out;
}

/// The devices stages are offered to: OA_DEVICES' list, or OA_DEVICE's
/// device (every usable GPU for cuda).
std::vector<std::unique_ptr<device>> make_devices(const config& c, const config_origin& origin, std::string& note) {
  std::vector<std::unique_ptr<device>> out;
  if (!c.devices.empty()) {
    const std::vector<device_spec> specs = parse_device_specs(c.devices, origin.where("devices"));
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const device_spec& d = specs[i];
      if (d.kind == "host") continue;  // the runtime's host takes its share
      out.push_back(d.kind == "cuda" ? make_cuda(c, origin, "devices", d.ordinal, d.memory.value_or(c.device_memory))
                                     : make_emulated(c, &d, i));
    }
    return out;
  }
  if (c.device == "auto") {
    std::string why;
    if (gpu_usable(why)) {
      note = " (auto: a usable GPU)";
      return make_all_gpus(c, origin);
    }
    note = " (auto: no usable GPU: " + why + ")";
    out.push_back(make_host_device({}));
    return out;
  }
  if (c.device == "host") out.push_back(make_host_device({}));
  if (c.device == "emulated") out.push_back(make_emulated(c, nullptr, 0));
  if (c.device == "cuda") return make_all_gpus(c, origin);
  if (!out.empty()) return out;
  validate(c, origin);  // names the bad setting; a validated config never gets here
  throw config_error("oa: " + origin.where("device") + ": unknown device '" + c.device + "'");
}

}  // namespace

namespace detail {
device& host_locked(runtime_state& s) {
  if (!s.host) s.host = make_host_device({});
  return *s.host;
}

device& lane_host_locked(runtime_state& s) {
  if (!s.lane_host) s.lane_host = make_host_device({});
  return *s.lane_host;
}

device& device_locked(runtime_state& s) {
  if (s.devices.empty()) {
    if (s.device_error) std::rethrow_exception(s.device_error);
    const config& c = config_locked(s);
    std::string note;
    std::vector<std::unique_ptr<device>> made;
    try {
      made = make_devices(c, s.origin, note);
    } catch (...) {
      s.device_error = std::current_exception();
      throw;
    }
    const std::vector<device_spec> specs = parse_device_specs(c.devices, s.origin.where("devices"));
    s.host_shares = std::any_of(specs.begin(), specs.end(), [](const device_spec& d) { return d.kind == "host"; });
    std::vector<std::string> budget_from;  // per device made, in order
    for (const device_spec& d : specs)
      if (d.kind != "host")
        budget_from.push_back(d.memory ? s.origin.where("devices") + " '" + d.text + "'"
                                       : c.device_memory ? s.origin.where("device_memory") : std::string());
    for (auto& d : made) {
      runtime_state::device_entry e;
      if (specs.empty() && c.device_memory) e.budget_from = s.origin.where("device_memory");
      if (s.devices.size() < budget_from.size()) e.budget_from = budget_from[s.devices.size()];
      e.dev = std::move(d);
      e.resident = std::make_unique<detail::residency>(*e.dev);
      s.devices.push_back(std::move(e));
    }
    if (c.verbose && !s.announced) {
      for (const auto& e : s.devices) std::fprintf(stderr, "oa: device: %s%s\n", e.dev->name().c_str(), note.c_str());
      s.announced = true;
    }
  }
  return *s.first().dev;
}
}  // namespace detail

config current_config() { return runtime::current().configuration(); }

void set_config(const config& c) { set_config(c, config_origin("set_config")); }

void set_config(const config& c, const config_origin& origin) { runtime::current().configure(c, origin); }

device& current_device() { return runtime::current().main_device(); }

device& host_device() { return runtime::current().host(); }

std::vector<stage_report> reports() { return runtime::current().reports(); }

void clear_reports() { runtime::current().clear_reports(); }

std::vector<run_log::declined> not_offloaded() { return runtime::current().not_offloaded(); }

void write_outputs() { runtime::current().write_outputs(); }

// ---- runtime ---------------------------------------------------------------------

runtime::runtime(std::shared_ptr<detail::runtime_state> s) : state_(std::move(s)) {}

runtime::runtime(const config& c) : runtime(c, config_origin("oa::runtime")) {}

runtime::runtime(const config& c, const config_origin& origin) : state_(std::make_shared<runtime_state>()) {
  validate(c, origin);
  state_->cfg = c;
  state_->origin = origin;
  state_->configured = true;
  state_->publish_hook_settings();
}

runtime::~runtime() = default;

runtime& runtime::default_instance() {
  static runtime* r = new runtime(default_state());  // never destroyed, like its state
  return *r;
}

runtime& runtime::current() {
  runtime_state& s = current_state();
  if (&s == default_state().get()) return default_instance();
  // A runtime::use is active: find its runtime object.
  return *use::innermost();
}

config runtime::configuration() const {
  std::lock_guard lock(state_->mutex);
  return config_locked(*state_);
}

void runtime::configure(const config& c, const config_origin& origin) {
  validate(c, origin);  // before anything changes: a bad config leaves the old one in place
  // This thread's pending calls for this runtime run under the old
  // configuration; their errors stay for the next evaluate() (or get()).
  if (&detail::current_graph()->runtime() == state_.get()) detail::evaluate(*detail::current_graph());
  std::lock_guard lock(state_->mutex);
  state_->save_models(true);  // what the old configuration's models learned
  state_->cfg = c;
  state_->origin = origin;
  state_->configured = true;
  state_->publish_hook_settings();
  state_->devices.clear();
  state_->kernel_times = {};  // of the devices just dropped
  state_->device_error = nullptr;
}

std::vector<device*> runtime::devices() {
  std::lock_guard lock(state_->mutex);
  (void)device_locked(*state_);
  std::vector<device*> out;
  for (auto& d : state_->devices) out.push_back(d.dev.get());
  return out;
}

device& runtime::main_device() {
  std::lock_guard lock(state_->mutex);
  return device_locked(*state_);
}

device& runtime::host() {
  std::lock_guard lock(state_->mutex);
  return host_locked(*state_);
}

std::vector<stage_report> runtime::reports() const {
  std::lock_guard lock(state_->mutex);
  return state_->log.stages;
}

std::vector<run_log::declined> runtime::not_offloaded() const {
  std::lock_guard lock(state_->declined_mutex);
  state_->fold_declined();
  return state_->log.not_offloaded;
}

void runtime::clear_reports() {
  std::scoped_lock lock(state_->mutex, state_->declined_mutex);
  state_->log.clear();
  state_->gemm_below_threshold = 0;
  state_->gemv_below_threshold = 0;
  state_->cwise_below_threshold = 0;
  state_->reduction_below_threshold = 0;
}

void runtime::write_outputs() {
  std::scoped_lock lock(state_->mutex, state_->declined_mutex);
  state_->fold_declined();
  if (!state_->configured) return;
  state_->save_models(true);
  if (!state_->cfg.report.empty()) write_report_json(state_->cfg.report, state_->log);
  if (!state_->cfg.trace.empty()) write_trace_json(state_->cfg.trace, state_->log.trace);
}

runtime* runtime::use::innermost() noexcept {
  return thread_graphs_gone || this_thread.runtimes.empty() ? nullptr : this_thread.runtimes.back();
}

runtime::use::use(runtime& rt) : rt_(rt) {
  if (thread_graphs_gone)
    throw error("oa::runtime::use: this thread's oa state has ended (a destructor at its exit): use the "
                "default runtime there");
  this_thread.used.push_back(std::make_shared<detail::graph>(rt.state_));
  this_thread.runtimes.push_back(&rt);
}

runtime::use::~use() noexcept(false) {
  if (thread_graphs_gone) return;  // a use outliving its thread's state (a static's): its calls went with it
  std::shared_ptr<detail::graph> g = this_thread.used.back();
  this_thread.used.pop_back();
  this_thread.runtimes.pop_back();
  detail::evaluate(*g);
  if (std::uncaught_exceptions() <= uncaught_) detail::rethrow_failures(*g, "oa::runtime::use");
}

void evaluate() {
  auto g = detail::current_graph();
  detail::evaluate(*g);
  detail::rethrow_failures(*g, "oa::evaluate");
}

scope::~scope() noexcept(false) {
  auto g = detail::current_graph();
  detail::evaluate(*g);
  // While an exception unwinds, the failures wait for the next evaluate()
  // (or are reported when the thread ends): one exception at a time.
  if (std::uncaught_exceptions() <= uncaught_) detail::rethrow_failures(*g, "oa::scope");
}

namespace detail {

namespace {
thread_local int engine_depth = 0;
}
bool in_engine_thread() noexcept { return engine_depth > 0; }

namespace {
runtime_state& hook_state() {
  runtime_state& s = current_state();
  if (!s.hook_ready) {
    std::lock_guard lock(s.mutex);
    (void)config_locked(s);  // a bad OA_* setting throws here, naming it
  }
  return s;
}
}  // namespace

bool offload_gemm_wanted(double multiply_adds) {
  runtime_state& s = hook_state();
  if (multiply_adds >= static_cast<double>(s.offload_gemm_min.load(std::memory_order_relaxed))) return true;
  s.gemm_below_threshold.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool offload_gemv_wanted(double matrix_coefficients) {
  runtime_state& s = hook_state();
  if (matrix_coefficients >= static_cast<double>(s.offload_gemv_min.load(std::memory_order_relaxed))) return true;
  s.gemv_below_threshold.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool offload_elements_wanted(std::uint64_t coefficients, bool reduction) {
  runtime_state& s = hook_state();
  if (coefficients >= s.offload_elements_min.load(std::memory_order_relaxed)) return true;
  (reduction ? s.reduction_below_threshold : s.cwise_below_threshold).fetch_add(1, std::memory_order_relaxed);
  return false;
}

void note_not_offloaded(const std::string& op, const std::string& reason, const std::string& dims) {
  runtime_state& s = current_state();
  std::lock_guard lock(s.declined_mutex);
  s.log.add_declined(op, reason, dims);
}
engine_thread_scope::engine_thread_scope() noexcept { ++engine_depth; }
engine_thread_scope::~engine_thread_scope() { --engine_depth; }

std::shared_ptr<graph> current_graph() {
  if (thread_graphs_gone) {
    // Called after the thread's graphs ended: by a destructor that runs at
    // the thread's exit (a static's, on the main thread, at the program's).
    // A graph of its own for what is left of the thread, left for the
    // process's end to reclaim (a pointer: nothing destroys it out of order).
    // Its calls run as they are recorded: nothing would evaluate them later.
    thread_local std::shared_ptr<graph>* late = nullptr;
    if (!late) late = new std::shared_ptr<graph>(std::make_shared<graph>(default_state(), true));
    return *late;
  }
  if (!this_thread.used.empty()) return this_thread.used.back();
  if (!this_thread.base) this_thread.base = std::make_shared<graph>(default_state());
  return this_thread.base;
}

void note_delivered(const value_state& v) noexcept {
  if (auto g = v.owner.lock()) g->delivered(v.error);
}

/// "call: message", unless the message names the call already.
std::string describe_failure(const graph::failure& f) {
  return f.message.find(f.call) != std::string::npos ? f.message : f.call + ": " + f.message;
}

void rethrow_failures(graph& g, const char* where) {
  std::vector<graph::failure> f = g.take_failures();
  if (f.empty()) return;
  if (f.size() > 1) {
    std::string others;
    for (std::size_t i = 1; i < f.size(); ++i) others += "\n  " + describe_failure(f[i]);
    std::fprintf(stderr, "oa: %s: %zu calls failed; the first error is thrown, the others were:%s\n", where, f.size(),
                 others.c_str());
  }
  std::rethrow_exception(f.front().error);
}

void recorded(graph& g, const char* call) {
  // A call made by a CPU function the evaluation runs waits for that
  // function's own get(), as it would before the thread's state ended.
  if (!g.at_once() || in_engine_thread()) return;
  evaluate(g);
  rethrow_failures(g, call);
}

void report_unobserved(runtime_state& s, const graph::failure& f) noexcept {
  const std::string what = describe_failure(f);
  // Without an error: calls that never ran (their thread ended first).
  if (f.error)
    std::fprintf(stderr, "oa: an error that no caller received (the call's results were never asked for): %s\n",
                 what.c_str());
  else
    std::fprintf(stderr, "oa: %s\n", what.c_str());
  try {
    std::lock_guard lock(s.mutex);
    s.log.unobserved_errors.push_back(what);
  } catch (...) {
  }
}

void evaluate_owner(const value_state& v) {
  if (auto g = v.owner.lock()) evaluate(*g);
  if (v.pending())
    throw error("oa: " + v.label + ": never computed: the thread that recorded its call ended before evaluating it");
}

void evaluate(graph& g) {
  const engine_thread_scope engine_work;
  std::lock_guard glock(g.mutex());
  std::vector<call_node> nodes = g.take_pending();
  if (nodes.empty()) return;

  runtime_state& st = g.runtime();
  // One evaluation at a time runs on the devices.
  std::lock_guard lock(st.mutex);
  const config* cp = nullptr;
  try {
    cp = &config_locked(st);
  } catch (...) {
    // A bad setting (OA_DEVICES, OA_STREAMS, ...) fails every call taken,
    // each with its error, as a device that cannot be made does: none stays
    // pending, nor is any lost.
    const std::exception_ptr e = std::current_exception();
    for (const call_node& n : nodes) n.for_each_output([&](const value_ptr& v) { v->fail(e); });
    g.add_failures({{e, nodes.front().name, message_of(e)}});
    return;
  }
  const config& c = *cp;

  const std::vector<bool> live = live_calls(nodes);
  const std::vector<stage> stages = form_stages(nodes, live);
  scheduler(st, c, nodes, live, stages).run();
  // Errors of calls, once each, in program order, for evaluate() and scope.
  std::vector<graph::failure> failures;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    nodes[i].for_each_output([&](const value_ptr& v) {
      if (v->status != value_status::failed) return;
      for (const auto& f : failures)
        if (f.error == v->error) return;
      failures.push_back({v->error, nodes[i].name, message_of(v->error)});
    });
  }
  g.add_failures(std::move(failures));
  // Values of calls that were never needed stay pending no longer.
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!live[i])
      nodes[i].for_each_output([](const value_ptr& v) {
        if (v->pending()) v->status = value_status::ready;
      });
}

}  // namespace detail
}  // namespace oa
