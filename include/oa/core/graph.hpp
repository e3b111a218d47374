#pragma once
// The task graph: values and the annotated calls between them.
//
// Types are erased here so that one engine plans and runs every frontend's
// calls. A value knows how to find chunk [begin, end) in its host storage and
// how to create that storage; a call node carries the annotation's CPU
// function over a chunk and, when the annotation names one, its device
// function: element-wise (fused into generated kernels; a host twin) or
// given as code (oa::kernel).

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "oa/core/contraction.hpp"
#include "oa/core/device.hpp"
#include "oa/split_types/split.hpp"

namespace oa::detail {

class graph;
struct value_state;
struct runtime_state;  // an oa::runtime's devices, configuration and log

/// What the engine needs of a (split type, value type) pair.
struct value_ops {
  const char* split_name;
  split::split_kind kind;
  /// The host object's shape now (partitioned values): checked against the
  /// shape recorded at the call, to catch a caller's object resized since.
  split::shape (*shape_of)(const void* object);
  /// Chunk of the host object's storage (partitioned values).
  region (*host_region)(const void* object, split::range r);
  /// Chunk of a packed device buffer holding chunk r (same width and rows as
  /// host_region), given the value's unsplit state (null for values without).
  region (*packed_region)(std::byte* buffer, const split::shape& s, split::range r, const void* state);
  /// Creates uninitialised host storage of the value's shape, carrying `state`
  /// (value_state::state: null for values without unsplit state); returns the owner.
  std::shared_ptr<void> (*make)(const split::shape& s, const void* state, void*& object);
  /// Reductions: folds `n` partials (each `partial_bytes`) in order into `object`.
  void (*merge)(const std::byte* partials, std::size_t n, void* object);
  std::size_t partial_bytes;
};

enum class value_status : std::uint8_t { pending, ready, failed };

struct value_state {
  std::string label;  // for messages: "result of vm::add"
  const value_ops* ops = nullptr;
  split::shape shape;
  std::shared_ptr<void> owned;  // host storage the runtime owns (null for the caller's data),
                                // or the copy of a temporary view of the caller's data
  void* object = nullptr;       // host object: owned, or the caller's
  std::shared_ptr<const void> state;  // unsplit state (split types with state), fixed when recorded
  bool user_storage = false;    // `object` is the caller's: always written back
  // The bytes [first, last) the caller's object kept its elements in when it
  // was bound: later bindings are checked against these, not against the
  // object, which may be gone by then (a span bound by a call refused).
  const std::byte* storage_first = nullptr;
  const std::byte* storage_last = nullptr;
  // Published by the evaluating thread after the value (or `error`) is in
  // place, and read (acquire) by get() on any thread: whoever sees ready or
  // failed sees what the evaluation wrote. Set `error` before `failed`.
  std::atomic<value_status> status{value_status::ready};
  std::exception_ptr error;
  int producer = -1;            // index of the producing node in the pending graph
  std::atomic<int> handles{0};  // lazy<> handles alive: a held value is materialized
  std::weak_ptr<graph> owner;

  bool pending() const noexcept { return status.load(std::memory_order_acquire) == value_status::pending; }
  /// Fails the value with `e`: the error first, then the status that publishes it.
  void fail(std::exception_ptr e) noexcept {
    error = std::move(e);
    status.store(value_status::failed, std::memory_order_release);
  }
};
using value_ptr = std::shared_ptr<value_state>;

/// One chunk's arguments: a region per partitioned argument, in spec order.
struct kernel_args {
  split::range r;
  const region* regions = nullptr;
  std::byte* partial = nullptr;  // reduction partial of this chunk, if the call has one
  std::byte* scratch = nullptr;  // device scratch memory of this chunk (oa::kernel(...).scratch(...))
  std::size_t scratch_bytes = 0;
};
using kernel_fn = std::function<void(const kernel_args&)>;
/// A chunk's work enqueued on a device stream (see device_entry).
using entry_fn = std::function<void(const kernel_args&, const stream_view&)>;

/// A device function given as code (oa::kernel): on the CUDA device `gpu`
/// enqueues the chunk's work on the stream it is given, over the chunk's
/// device memory; host and emulated devices run `twin` in its place, in
/// stream order. No `gpu`: the build has no GPU version (such a call runs
/// on the host when the device is a GPU).
struct device_kernel {
  entry_fn gpu;
  kernel_fn twin;
  // Device memory the GPU function works in: scratch_per_unit bytes per unit
  // of the chunk plus scratch_fixed, planned with the stage's buffers.
  std::size_t scratch_per_unit = 0;
  std::size_t scratch_fixed = 0;
};

enum class arg_role : std::uint8_t { in, mut, out };

/// An element-wise call as a GPU kernel generator sees it: the functor of
/// oa/core/ops.hpp applied to each element, operands in order.
struct elementwise_desc {
  struct operand {
    int arg = -1;          // partitioned argument (index into call_node::args)
    int scalar = -1;       // lazy broadcast (index into call_node::scalars)
    std::string literal;   // broadcast value, as an exact C++ literal
    std::string type;      // C++ type of one element / of the value
  };
  /// One operation of an expression (oa/core/expression.hpp):
  /// oa::ops::<op>{}(inputs...), each input operand k (k >= 0) or step s (-1 - s).
  struct step {
    std::string op;
    std::vector<int> inputs;
  };
  std::string op;                    // functor name in oa::ops, applied to the operands (no steps)
  std::vector<operand> operands;
  std::vector<step> steps;           // an expression: its value is the last step's
  int out_arg = -1;                  // argument written (out or mut); -1: a reduction
  std::string out_type;              // element type written / of the partial
  std::string reduce_op;             // reduction: functor name in oa::ops ("add", "min", "max")
  std::string reduce_identity;       // reduction: identity literal
};

struct node_arg {
  arg_role role;
  value_ptr value;      // in: read; out: written; mut: the version read
  value_ptr new_value;  // mut: the version written (aliases value's storage)
  bool overwrites = false;  // mut: every element written before any is read (oa::overwrite): not copied in
  std::string label{};      // as messages name it ("argument 2 (x)"); empty: its value's label
};

struct call_node {
  std::string name;                 // the annotated function
  std::vector<node_arg> args;       // partitioned arguments, in spec order
  std::vector<value_ptr> scalars;   // lazy broadcast arguments (must be ready first)
  value_ptr reduction;              // result of a reduction, if any
  std::size_t units = 0;            // units of the split (all partitioned args agree)
  kernel_fn cpu;                    // the annotated CPU function over a chunk
  kernel_fn device_twin;            // host twin of the device function; empty: CPU only
  std::shared_ptr<const elementwise_desc> elementwise;  // for kernel generation; set with device_twin
  std::shared_ptr<const device_kernel> kernel;          // a device function given as code (not fused)
  double cost_per_unit = 1.0;       // relative work per unit (annotation's estimate)
  const char* report_op = nullptr;  // the stage report's op when set (an Eigen hook's: "gemv", "cwise", ...)
  /// A contraction (a matrix product) rather than a chunked call: args are
  /// A (in), B (in), an optional C read (in), and C written (out or mut).
  /// It runs as a stage of its own, tile by tile.
  std::shared_ptr<const contraction_desc> contraction;

  /// Values this node writes (outputs, new mut versions, reduction result).
  template <class F>
  void for_each_output(F&& f) const {
    for (const auto& a : args) {
      if (a.role == arg_role::out) f(a.value);
      if (a.role == arg_role::mut) f(a.new_value);
    }
    if (reduction) f(reduction);
  }
};

/// The pending calls of one thread's program, in program order.
class graph : public std::enable_shared_from_this<graph> {
 public:
  /// An error of an evaluated call that no caller has received yet.
  struct failure {
    std::exception_ptr error;
    std::string call;     // the first call (program order) that failed with it
    std::string message;
  };

  /// The graph of calls recorded for runtime `rt` (its devices run them);
  /// `at_once`: each call runs as it is recorded (see recorded()).
  explicit graph(std::shared_ptr<runtime_state> rt, bool at_once = false)
      : runtime_(std::move(rt)), at_once_(at_once) {}
  bool at_once() const noexcept { return at_once_; }
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  /// Failures nobody received are reported (stderr and the run report).
  ~graph();

  /// Records a call; returns its index. A call that writes elements another
  /// of its arguments reads or writes in part (not the same range) is an
  /// oa::invalid_argument naming both, and is not recorded.
  int add(call_node n);
  /// The latest version of a caller's object used in this graph (a mut call
  /// makes a new version); creates the binding on first use. Null when the
  /// latest version is pending under another split type, or when another
  /// object over the same elements (a span of a vector) is used by pending
  /// calls that update them, or by any pending call when this one `writes`
  /// them: evaluate first.
  value_ptr bind_user(void* object, const value_ops* ops, const split::shape& s, std::string label,
                      bool writes = true);
  /// bind_user, evaluating this graph first when it says to. If the
  /// object's pending version's call failed, the binding fails with its
  /// error: a call reading it is cancelled, as any call depending on a
  /// failed one is.
  value_ptr bind_user_evaluated(void* object, const value_ops* ops, const split::shape& s, std::string label,
                                bool writes = true);
  /// A call refused while it was recorded: the objects it would have
  /// updated are back at the versions it read.
  void forget_versions(const call_node& n) noexcept;
  /// Marks that a mut call wrote a new version of the caller's object.
  void set_user_version(void* object, value_ptr v);

  std::vector<call_node> take_pending();
  bool empty() const;

  /// Errors of an evaluation, for evaluate() and scope to rethrow.
  void add_failures(std::vector<failure> f);
  /// get() handed `e` to the caller: evaluate() need not throw it again.
  void delivered(const std::exception_ptr& e);
  std::vector<failure> take_failures();
  std::recursive_mutex& mutex() const { return mutex_; }
  runtime_state& runtime() const noexcept { return *runtime_; }

 private:
  std::shared_ptr<runtime_state> runtime_;  // kept alive while calls or errors may need it
  bool at_once_ = false;
  mutable std::recursive_mutex mutex_;
  std::vector<call_node> nodes_;
  std::unordered_map<void*, value_ptr> user_versions_;
  std::vector<failure> failures_;
};

/// Reports a failure that no caller received (defined by the runtime).
void report_unobserved(runtime_state& rt, const graph::failure& f) noexcept;

}  // namespace oa::detail
