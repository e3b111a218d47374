#pragma once
// The runtime: one per process. It owns the configuration, the devices and
// the log of what ran; each thread records its calls in its own graph.

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "oa/core/config.hpp"
#include "oa/core/device.hpp"
#include "oa/core/graph.hpp"
#include "oa/core/report.hpp"

namespace oa {

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

/// The process-wide configuration (from OA_CONFIG and OA_* at first use).
const config& current_config();
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
}  // namespace detail

}  // namespace oa
