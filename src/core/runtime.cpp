#include "oa/core/runtime.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/executor.hpp"
#include "core/host_lane.hpp"
#include "core/perf_model.hpp"
#include "core/placer.hpp"
#include "core/planner.hpp"
#include "core/residency.hpp"
#include "core/stage_graph.hpp"
#include "core/stage_plan.hpp"
#include "oa/core/error.hpp"
#include "oa/core/lazy.hpp"

#if defined(OA_HAS_CUDA)
#include "oa/cuda/device.hpp"
#endif

namespace oa {

namespace detail {

/// An oa::runtime: its configuration, devices, resident values and log.
/// Graphs share it: it lives while calls recorded for it may still run.
struct runtime_state {
  std::mutex mutex;  // one evaluation at a time runs on the devices
  bool configured = false;
  config cfg;
  config_origin origin;  // where each setting of cfg came from, for error messages
  /// A device stages are offered to, with its residency table.
  struct device_entry {
    std::unique_ptr<device> dev;
    std::unique_ptr<residency> resident;  // values kept on dev (declared after it: destroyed first)
    std::string failed;                   // why dev is no longer offered stages
    // Stages (their calls) the host ran because a unit of theirs is larger
    // than the budget the user set: said once each on stderr.
    std::unordered_set<std::string> said_budget_too_small;
  };
  /// The devices, made from the configuration at first use: today the one
  /// config.device names; the scheduler offers stages to the first.
  std::vector<device_entry> devices;
  // Why the configured device could not be made: every later stage (and
  // evaluation) fails with this one error, until the configuration changes,
  // so that a caller who received it is not told of it again by each stage.
  std::exception_ptr device_error;
  std::unique_ptr<device> host;
  run_log log;
  // OA_PLACEMENT=cost: the models, read from models_file once (the setting
  // may change between evaluations), written back when they learned.
  perf_models models;
  std::string models_file;
  bool models_read = false;
  bool models_learned = false;
  std::chrono::steady_clock::time_point models_saved{};
  /// Writes the models when they learned: at most once a second during a
  /// run (a write costs more than a small stage), and when the runtime ends.
  void save_models(bool now) noexcept {
    if (!models_learned || models_file.empty()) return;
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - models_saved < std::chrono::seconds(1)) return;
    models_learned = false;
    models_saved = t;
    try {
      models.save(models_file);
    } catch (const std::exception& e) {
      // The run goes on with the models in memory; the file is the user's to fix.
      std::fprintf(stderr, "%s\n", e.what());
    }
  }
  ~runtime_state() { save_models(true); }
  bool announced = false;
  // What the Eigen hooks read on every call, without waiting for an
  // evaluation that holds `mutex`: the threshold, and their own log.
  std::atomic<bool> hook_ready{false};
  std::atomic<std::uint64_t> offload_gemm_min{0};
  std::atomic<std::uint64_t> offload_elements_min{0};
  std::atomic<std::uint64_t> offload_gemv_min{0};
  std::mutex declined_mutex;  // guards log.not_offloaded
  // Calls below the thresholds: counted apart, the common case kept cheap.
  std::atomic<std::uint64_t> gemm_below_threshold{0};
  std::atomic<std::uint64_t> gemv_below_threshold{0};
  std::atomic<std::uint64_t> cwise_below_threshold{0};
  std::atomic<std::uint64_t> reduction_below_threshold{0};
  void publish_hook_settings() {
    offload_gemm_min = cfg.offload_gemm_min;
    offload_elements_min = cfg.offload_elements_min;
    offload_gemv_min = cfg.offload_gemv_min;
    hook_ready = true;
  }
  /// Moves the cheap counts into the log (under declined_mutex).
  void fold_declined() {
    const auto fold = [&](std::atomic<std::uint64_t>& count, const char* op, const std::string& reason) {
      const std::uint64_t n = count.exchange(0);
      if (n == 0) return;
      log.add_declined(op, reason, "");
      for (auto& d : log.not_offloaded)
        if (d.op == op && d.reason == reason) d.count += n - 1;  // add_declined counted one
    };
    fold(gemm_below_threshold, "gemm",
         "below OA_OFFLOAD_GEMM_MIN (" + std::to_string(cfg.offload_gemm_min) + " multiply-adds)");
    fold(gemv_below_threshold, "gemv",
         "below OA_OFFLOAD_GEMV_MIN (" + std::to_string(cfg.offload_gemv_min) + " matrix coefficients)");
    const std::string elements_min =
        "below OA_OFFLOAD_ELEMENTS_MIN (" + std::to_string(cfg.offload_elements_min) + " coefficients)";
    fold(cwise_below_threshold, "cwise", elements_min);
    fold(reduction_below_threshold, "reduction", elements_min);
  }

  device_entry& first() { return devices.front(); }
  /// The devices not lost, in their order.
  std::vector<device_entry*> usable() {
    std::vector<device_entry*> out;
    for (auto& d : devices)
      if (d.failed.empty()) out.push_back(&d);
    return out;
  }
  /// The device a stage is offered to: the first not lost (the first when
  /// all are, which place_stage then declines).
  device_entry& target() {
    for (auto& d : devices)
      if (d.failed.empty()) return d;
    return devices.front();
  }
};

}  // namespace detail

namespace {

using detail::runtime_state;

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

/// A thread's graphs: the default runtime's, and one per active runtime::use.
struct thread_graphs {
  std::shared_ptr<detail::graph> base;
  std::vector<std::shared_ptr<detail::graph>> used;
};
thread_local thread_graphs this_thread;

/// The runtime the calling thread's calls go to.
runtime_state& current_state() { return detail::current_graph()->runtime(); }

const config& config_locked(runtime_state& s) {
  if (!s.configured) {
    s.cfg = config::from_environment(&s.origin);
    s.configured = true;
    s.publish_hook_settings();
  }
  return s.cfg;
}

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

device& host_locked(runtime_state& s) {
  if (!s.host) s.host = make_host_device({});
  return *s.host;
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
    for (auto& d : made) {
      runtime_state::device_entry e;
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

/// Stages of one evaluation that the host ran because one unit of theirs
/// is larger than the budget the user set (OA_DEVICE_MEMORY, the file,
/// set_config): each stage's calls and the smallest budget that runs it.
struct budget_too_small {
  std::vector<std::pair<std::string, std::size_t>> stages;

  /// A stage not yet said for this device (every stage's report says it).
  void add(runtime_state::device_entry& target, const config& c, std::string calls, std::size_t smallest) {
    if (c.device_memory != 0 && target.said_budget_too_small.insert(calls).second)
      stages.emplace_back(std::move(calls), smallest);
  }
  /// One line on stderr for the evaluation, with the budget that runs them all.
  void say(const config& c, const config_origin& origin, const device& dev) const {
    if (stages.empty()) return;
    std::size_t all = 0;
    std::string which;
    for (const auto& [calls, smallest] : stages) {
      all = std::max(all, smallest);
      if (stages.size() > 1)
        which += (which.empty() ? ": [" : ", [") + calls + "] (" + std::to_string(smallest) + " bytes)";
    }
    const std::string what =
        stages.size() == 1 ? "stage [" + stages.front().first + "]" : std::to_string(stages.size()) + " stages";
    std::fprintf(stderr,
                 "oa: the device budget of %zu bytes (%s) cannot hold one unit of %s, which the host ran "
                 "instead%s; the smallest budget that runs %s on %s is %zu bytes\n",
                 c.device_memory, origin.where("device_memory").c_str(), what.c_str(), which.c_str(),
                 stages.size() == 1 ? "it" : "them all", dev.name().c_str(), all);
  }
};

bool progress_wanted(const config& c) {
  if (c.progress >= 0) return c.progress == 1;
  return ::isatty(STDERR_FILENO) == 1;
}

}  // namespace

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

namespace {
thread_local std::vector<runtime*> used_runtimes;  // runtime::use's, innermost last
}

runtime* runtime::use::innermost() noexcept { return used_runtimes.empty() ? nullptr : used_runtimes.back(); }

runtime::use::use(runtime& rt) : rt_(rt) {
  this_thread.used.push_back(std::make_shared<detail::graph>(rt.state_));
  used_runtimes.push_back(&rt);
}

runtime::use::~use() noexcept(false) {
  std::shared_ptr<detail::graph> g = this_thread.used.back();
  this_thread.used.pop_back();
  used_runtimes.pop_back();
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

void report_unobserved(runtime_state& s, const graph::failure& f) noexcept {
  const std::string what = describe_failure(f);
  std::fprintf(stderr, "oa: an error that no caller received (the call's results were never asked for): %s\n",
               what.c_str());
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

/// Resident copies around stage `i` (placed on the main device when
/// `on_device`): copies no stage from here on reads are dropped; copies only
/// on the device that this stage reads from host storage are written back;
/// a product read by a later stage may keep its result on the device.
template <class ReadFrom>
void prepare_residency(residency& res, const stage& s, const std::vector<call_node>& nodes, std::size_t i,
                       bool on_device, run_options& opt, const ReadFrom& read_from,
                       const std::unordered_set<const value_state*>& demanded) {
  res.drop_unless([&](const value_state* v) { return read_from(v, i); });
  device& dev = res.dev();
  // Element-wise stages on a device with its own memory read resident inputs
  // in place (and update them there), taking the copies kept from earlier
  // evaluations whose host bytes are unchanged; products read their inputs
  // from the host.
  const bool reads_copies = on_device && !dev.host_accessible() && !s.contraction;
  if (reads_copies && opt.whole_copies)
    for (int c : s.calls)
      for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
        if (a.role != arg_role::out) res.adopt(a.value);
  for (int c : s.calls) {
    for (const auto& a : nodes[static_cast<std::size_t>(c)].args) {
      if (a.role == arg_role::out) continue;
      residency::entry* e = res.find(a.value.get());
      if (e && !e->host_valid && (!reads_copies || a.role == arg_role::mut)) res.write_back(*e);
    }
    for (const auto& v : nodes[static_cast<std::size_t>(c)].scalars)
      if (residency::entry* e = res.find(v.get()); e && !e->host_valid) res.write_back(*e);
  }
  opt.resident = on_device && !dev.host_accessible() ? &res : nullptr;
  // What the stage reads in place stays while it runs; the rest may be
  // evicted by need.
  std::vector<const value_state*> reads;
  for (int c : s.calls)
    for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
      if (reads_copies && a.role != arg_role::out) reads.push_back(a.value.get());
  res.pin_only(reads);
  if (s.contraction && opt.resident) {
    const node_arg& result = nodes[static_cast<std::size_t>(s.calls.front())].args.back();
    opt.keep_result = result.role == arg_role::out && read_from(result.value.get(), i + 1);
    opt.result_on_host = !opt.keep_result || demanded.count(result.value.get()) > 0;
  }
}

void evaluate(graph& g) {
  const engine_thread_scope engine_work;
  std::lock_guard glock(g.mutex());
  std::vector<call_node> nodes = g.take_pending();
  if (nodes.empty()) return;

  runtime_state& st = g.runtime();
  // One evaluation at a time runs on the devices.
  std::lock_guard lock(st.mutex);
  const config& c = config_locked(st);

  const std::vector<bool> live = live_calls(nodes);
  const std::vector<stage> stages = form_stages(nodes, live);
  std::unordered_set<const value_state*> demanded;
  const auto needed = values_needed_on_host(nodes, live, stages, &demanded);
  // The last stage reading each value: a resident copy is dropped after it.
  std::unordered_map<const value_state*, std::size_t> last_read;
  for (std::size_t i = 0; i < stages.size(); ++i)
    for (int c : stages[i].calls) {
      for (const auto& a : nodes[static_cast<std::size_t>(c)].args)
        if (a.role != arg_role::out) last_read[a.value.get()] = i;
      for (const auto& v : nodes[static_cast<std::size_t>(c)].scalars) last_read[v.get()] = i;
    }
  const auto read_from = [&](const value_state* v, std::size_t i) {
    auto it = last_read.find(v);
    return it != last_read.end() && it->second >= i;
  };

  std::vector<trace_event> trace;
  budget_too_small too_small;
  const bool by_cost = c.placement == "cost";
  std::exception_ptr models_error;  // every stage fails with it: the caller named a file oa cannot use
  if (by_cost && (!st.models_read || st.models_file != c.perf_models)) {
    st.save_models(true);
    st.models = perf_models{};
    st.models_file = c.perf_models;
    st.models_read = true;
    try {
      if (!c.perf_models.empty()) st.models.load(c.perf_models);
    } catch (...) {
      models_error = std::current_exception();
      st.models_read = false;
    }
  }
  // Reports go to the log in stage order, each once every earlier one is in.
  std::vector<std::optional<stage_report>> reports(stages.size());
  std::size_t logged = 0;
  const auto log_ready = [&] {
    for (; logged < stages.size() && reports[logged]; ++logged) st.log.add(std::move(*reports[logged]));
  };
  // Planning errors (a budget too small, a device that cannot be made) come
  // back where the stage's values are asked for, and in the report.
  const auto failed_report = [&](const stage& s, const run_options& opt) {
    fail_stage(s, nodes, std::current_exception());
    stage_report failed;
    for (int n : s.calls) failed.calls.push_back(nodes[static_cast<std::size_t>(n)].name);
    failed.units = s.units;
    failed.op = s.contraction ? "gemm" : "stage";
    if (const char* op = nodes[static_cast<std::size_t>(s.calls.front())].report_op) failed.op = op;
    failed.placement_reason = opt.placement_reason;
    failed.error = message_of(std::current_exception());
    return failed;
  };
  // What a stage's run leaves behind, on the evaluating thread: the models
  // learn, a sticky fault retires the device, the report joins the log.
  const auto finish = [&](std::size_t i, stage_report rep, const stage_cost& cost, device& where) {
    device& host = host_locked(st);
    if (by_cost) {
      learn(st.models, cost, where, host, rep);
      st.models_learned = true;
    }
    // A report's device_fault is a sticky fault (a CUDA kernel fault,
    // OA_FAIL_STICKY): the device is lost, its unfinished chunks or tiles
    // ran elsewhere, and later stages go to the other devices or the host.
    // After a transient fault only the failed chunks re-ran (host_reruns)
    // and the device goes on.
    for (auto& e : st.devices) {
      if (e.dev.get() != &where || rep.device_fault.empty()) continue;
      e.failed = rep.device_fault;
      std::fprintf(stderr, "%s; %zu %s re-run on the host, %s\n", rep.device_fault.c_str(), rep.host_reruns,
                   stages[i].contraction ? "tiles" : "chunks",
                   st.usable().empty() ? "which runs every later stage" : "and later stages go to the other devices");
    }
    reports[i] = std::move(rep);
    log_ready();
  };
  // A stage spread over several devices: those lost in it are retired.
  const auto finish_spread = [&](std::size_t i, stage_report rep, const std::vector<runtime_state::device_entry*>& on,
                                 const std::vector<std::string>& lost) {
    for (std::size_t k = 0; k < on.size(); ++k) {
      if (lost[k].empty()) continue;
      on[k]->failed = lost[k];
      std::fprintf(stderr, "%s; its chunks went to the other devices (%zu re-run on the host)%s\n", lost[k].c_str(),
                   rep.host_reruns, st.usable().empty() ? ", and the host runs every later stage" : "");
    }
    reports[i] = std::move(rep);
    log_ready();
  };
  const std::vector<std::vector<std::size_t>> deps = stage_dependencies(stages, nodes);
  host_lane lane;
  const auto collect = [&] {
    if (!lane.busy()) return;
    host_lane::result r = lane.wait();
    st.log.add_trace(r.trace);
    finish(r.stage, std::move(r.rep), r.cost, host_locked(st));
  };
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const stage& s = stages[i];
    if (lane.busy() && std::find(deps[i].begin(), deps[i].end(), lane.stage()) != deps[i].end()) collect();
    run_options opt;
    opt.sequential = c.sequential;
    opt.chunk_bytes = c.chunk_bytes;
    opt.whole_copies = c.keep_copies;
    opt.progress = progress_wanted(c);
    opt.stage_name = "stage " + std::to_string(i + 1) + "/" + std::to_string(stages.size());
    opt.trace = c.trace.empty() ? nullptr : &trace;
    device* where = nullptr;
    stage_cost cost;
    double predicted = 0;
    try {
      if (models_error) std::rethrow_exception(models_error);
      (void)device_locked(st);
      device& host = host_locked(st);
      runtime_state::device_entry& target = st.target();
      device& dev = *target.dev;
      placement place = place_stage(s, nodes, needed, dev, host, by_cost ? 0 : c.host_threshold, target.failed);
      if (by_cost) {
        cost = cost_of(s, nodes, needed, target.resident.get());
        place = place_by_cost(cost, place, host, st.models, predicted);
      }
      where = place.where;
      opt.placement_reason = place.reason;
      if (place.smallest_budget) too_small.add(target, c, describe(s, nodes), place.smallest_budget);
      opt.streams = where == &dev ? c.streams : 0;  // a fallback host uses its own parallelism
      // Several devices: an element-wise stage's chunks go to all not lost,
      // each reading the host's data.
      std::vector<runtime_state::device_entry*> spread = st.usable();
      if (where == &dev && !s.contraction && spread.size() > 1) {
        for (auto* e : spread) prepare_residency(*e->resident, s, nodes, i, false, opt, read_from, demanded);
        opt.whole_copies = false;
        opt.spread_even = c.spread == "even";
        std::vector<std::string> lost(spread.size());
        opt.lost = &lost;
        std::vector<device*> devs;
        for (auto* e : spread) devs.push_back(e->dev.get());
        stage_report rep = run_stage(s, nodes, needed, devs, host, opt);
        rep.predicted_seconds = predicted;
        finish_spread(i, std::move(rep), spread, lost);
        if (opt.trace) st.log.add_trace(trace);
        continue;
      }
      prepare_residency(*target.resident, s, nodes, i, where == &dev, opt, read_from, demanded);
      // A stage on the host beside a device runs on a thread of its own
      // while later stages that need not follow it run on the device (one
      // host stage at a time: the host device's streams and records are its).
      const bool beside = !c.serial_stages && where == &host && &dev != &host && i + 1 < stages.size() &&
                          std::find(deps[i + 1].begin(), deps[i + 1].end(), i) == deps[i + 1].end();
      if (beside) {
        collect();
        lane.start(i, cost, predicted, [&s, &nodes, &needed, &host, opt, report_failure = failed_report,
                                        &trace_on = c.trace](std::vector<trace_event>& own_trace) {
          run_options mine = opt;
          mine.trace = trace_on.empty() ? nullptr : &own_trace;
          try {
            return run_stage(s, nodes, needed, host, host, mine);
          } catch (...) {
            return report_failure(s, mine);
          }
        });
        continue;
      }
      const std::size_t evicted_before = target.resident->evicted_bytes();
      stage_report rep = s.contraction ? run_contraction(s, nodes, *where, host, opt)
                                       : run_stage(s, nodes, needed, *where, host, opt);
      rep.evicted_bytes = target.resident->evicted_bytes() - evicted_before;
      rep.predicted_seconds = predicted;
      finish(i, std::move(rep), cost, *where);
    } catch (...) {
      reports[i] = failed_report(s, opt);
      log_ready();
    }
    if (opt.trace) st.log.add_trace(trace);
  }
  collect();
  if (!st.devices.empty()) too_small.say(c, st.origin, *st.first().dev);
  st.save_models(false);
  // No later stage of this evaluation reads a copy: those the host holds too
  // are kept for later evaluations.
  for (auto& d : st.devices) {
    if (c.keep_copies)
      d.resident->end_evaluation();
    else
      d.resident->clear();
  }
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
