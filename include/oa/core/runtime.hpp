#pragma once
// Runtimes: each owns a configuration, its devices and the log of what ran;
// each thread records its calls in a graph of its current runtime.

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "oa/core/config.hpp"
#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"
#include "oa/core/report.hpp"

namespace oa {

namespace detail {
struct runtime_state;
}

/// A runtime: a configuration, the devices made from it (the one stages are
/// offered to, and the host), the values kept on them between stages, and
/// the log of what ran. Programs that make none use the default runtime,
/// configured from OA_CONFIG and OA_* at first use. An oa::runtime::use makes
/// a runtime the one the calling thread's calls go to; the free functions
/// below (set_config, current_device, reports, ...) act on the thread's
/// current runtime. A runtime's devices stay until the last call recorded for
/// it has run, even after the runtime object is gone.
///
///   oa::runtime gpu(gpu_config), cpu(cpu_config);
///   {
///     oa::runtime::use on(gpu);   // calls below run on gpu's device
///     auto y = f(x);
///   }                             // evaluated here, errors thrown
class runtime {
 public:
  /// A runtime of its own; `c` is validated first (oa::config_error names
  /// the bad setting). Devices are made at first use.
  explicit runtime(const config& c);
  runtime(const config& c, const config_origin& origin);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// The runtime of programs that make none.
  static runtime& default_instance();
  /// The calling thread's current runtime: the innermost use, else the default.
  static runtime& current();

  /// A copy of the configuration (another thread may replace it meanwhile).
  config configuration() const;
  /// Replaces the configuration; devices are made again at next use. This
  /// thread's pending calls for this runtime run first, under the old one.
  void configure(const config& c, const config_origin& origin = config_origin("oa::runtime::configure"));
  /// The devices stages may be offered to, made on first use: today the one
  /// config::device names (each with its table of resident values).
  std::vector<device*> devices();
  /// The first of them: the one stages are offered to.
  device& main_device();
  /// The host device: small stages, CPU-only calls, re-runs after faults.
  device& host();
  std::vector<stage_report> reports() const;
  /// Calls the Eigen hooks (oa_offload) left to Eigen, by operation and reason.
  std::vector<run_log::declined> not_offloaded() const;
  void clear_reports();
  /// Writes the configuration's report and trace files now.
  void write_outputs();

  /// While alive, the calling thread's calls go to `rt`. At its end they are
  /// evaluated and, unless an exception is propagating, the first error no
  /// get() received is thrown, as oa::scope does. Uses nest.
  class use {
   public:
    explicit use(runtime& rt);
    ~use() noexcept(false);
    use(const use&) = delete;
    use& operator=(const use&) = delete;

   private:
    friend class runtime;
    static runtime* innermost() noexcept;
    runtime& rt_;
    int uncaught_ = std::uncaught_exceptions();
  };

 private:
  explicit runtime(std::shared_ptr<detail::runtime_state> s);
  std::shared_ptr<detail::runtime_state> state_;
};

/// Evaluates every call this thread has recorded, then throws the first
/// error (program order) of a call that no get() has rethrown yet, with its
/// type; when several calls failed, the others are listed on stderr. Calls
/// that depended on a failed call fail with its error.
void evaluate();

/// Evaluates this thread's pending calls when it ends, and throws as
/// evaluate() does, unless an exception is already propagating (then the
/// errors wait for the next evaluate(), or are reported when the thread ends).
class scope {
 public:
  scope() = default;
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
  ~scope() noexcept(false);

 private:
  int uncaught_ = std::uncaught_exceptions();
};

/// A copy of the current runtime's configuration (the default runtime's:
/// from OA_CONFIG and OA_* at first use), taken under the runtime's lock, so
/// that a set_config on another thread never changes it while it is read.
config current_config();
/// Replaces the configuration; devices are re-created on next use. Pending
/// calls are evaluated first, under the old configuration. The whole config
/// is validated first: oa::config_error names the bad setting as
/// "set_config: <key>", or as `origin` names it.
void set_config(const config& c);
void set_config(const config& c, const config_origin& origin);

/// The device that stages are offered to (OA_DEVICE), created on first use.
device& current_device();
/// The host device, for small stages and chunks re-run after device faults.
device& host_device();

/// Stage reports of everything evaluated so far in this process.
std::vector<stage_report> reports();
/// Calls the Eigen hooks (oa_offload) left to Eigen, by operation and reason.
std::vector<run_log::declined> not_offloaded();
/// Forgets reports and timeline so far (benchmarks call it between runs).
void clear_reports();
/// Writes OA_REPORT / OA_TRACE now (also done at exit when configured).
void write_outputs();

namespace detail {
/// This thread's graph of pending calls.
std::shared_ptr<graph> current_graph();
/// Evaluates the pending calls of `g`; errors stay with their values and in `g`.
void evaluate(graph& g);
/// Throws the first failure of `g` not yet received by a caller (see evaluate()).
void rethrow_failures(graph& g, const char* where);
/// A call was just recorded in `g`. After its thread's state has ended (in a
/// destructor at exit) nothing would evaluate it later: it runs now, and its
/// error is thrown by the call, as the CPU function's would be.
void recorded(graph& g, const char* call);

/// Whether this thread runs engine work: an evaluation, or a device's engine
/// thread. Work that would enter the engine from there (an Eigen hook in an
/// annotated CPU function) runs where it is: the engine cannot wait for itself.
bool in_engine_thread() noexcept;
/// Whether a product of `multiply_adds` (m n k) reaches OA_OFFLOAD_GEMM_MIN
/// of the current runtime (read without waiting for an evaluation in
/// progress); one below it is counted for the report.
bool offload_gemm_wanted(double multiply_adds);
/// The same for a matrix-vector product of an m x k matrix (m k) and
/// OA_OFFLOAD_GEMV_MIN.
bool offload_gemv_wanted(double matrix_coefficients);
/// The same for a coefficient-wise assignment (or a reduction) and
/// OA_OFFLOAD_ELEMENTS_MIN.
bool offload_elements_wanted(std::uint64_t coefficients, bool reduction);
/// Records a call an Eigen hook left to Eigen, and why, for the report.
void note_not_offloaded(const std::string& op, const std::string& reason, const std::string& dims);
/// Engine threads (host and emulated devices) started so far in this
/// process. A device keeps its threads for its life: evaluations reuse them.
std::uint64_t engine_threads_started() noexcept;
/// Marks the calling thread as running engine work while it lives.
class engine_thread_scope {
 public:
  engine_thread_scope() noexcept;
  ~engine_thread_scope();
  engine_thread_scope(const engine_thread_scope&) = delete;
  engine_thread_scope& operator=(const engine_thread_scope&) = delete;
};
}  // namespace detail

}  // namespace oa
