#pragma once
// Shared machinery of the devices that run on the host (host, emulated):
// stream-ordered operations with completion tokens, FIFO engine threads,
// events, the error state of streams, the record of what ran, and memory
// accounting.
//
// A copy or launch is queued on an engine (a thread). Before it runs it waits
// for its dependencies: the previous copy or launch of its stream and the
// events the stream waited on since. Dependencies are always submitted before
// the operation, and every engine runs its queue in submission order, so the
// earliest unfinished operation can always run: no deadlock, however
// operations are routed to engines. Engines live as long as their device: a
// device may hand a destroyed stream's engine (its queue drained) to a new
// stream, whose operations are all submitted later, so its queue stays in
// submission order.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "oa/core/device.hpp"
#include "oa/core/memory.hpp"

namespace oa::detail {

/// Completion token of an operation or an event: set once, waited on by any
/// number of threads. Continuations run on the thread that sets it.
class completion {
 public:
  void set(std::exception_ptr error = nullptr);
  void wait() const;
  bool done() const;
  /// The error it was set with (an event's stream error); valid once done.
  std::exception_ptr error() const;
  /// Runs `fn` once done: now, on this thread, if it already is.
  void then(std::function<void()> fn);

 private:
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void()>> then_;
};

using token = std::shared_ptr<completion>;

struct stream_state {
  explicit stream_state(stream_id i) : id(i) {}
  const stream_id id;
  std::mutex m;               // guards the fields below
  token last;                 // last copy or launch submitted
  std::vector<token> waits;   // events waited on since `last` was submitted
  std::exception_ptr error;   // first failure, until synchronize reports it
};

/// A copy or launch on its way through an engine.
struct op {
  std::shared_ptr<stream_state> stream;
  std::vector<token> deps;
  token done;
  phase what = phase::compute;
  std::size_t bytes = 0;
  std::string label;
  std::function<void()> body;  // throws to fail the op
  std::exception_ptr fault;    // injected: the op fails without running body
};

/// When a link busy for `seconds` from `begin` is free again; the clock's
/// maximum when that lies beyond it (a tiny bandwidth must not wrap around).
std::chrono::steady_clock::time_point link_deadline(std::chrono::steady_clock::time_point begin, double seconds);
/// Sleeps until `t`, however far away it is.
void sleep_until_deadline(std::chrono::steady_clock::time_point t);

/// A thread running its queue of ops one at a time, in push order.
class fifo_engine {
 public:
  explicit fifo_engine(std::function<void(op&)> run);
  /// Runs what is still queued, then joins.
  ~fifo_engine();
  fifo_engine(const fifo_engine&) = delete;
  fifo_engine& operator=(const fifo_engine&) = delete;

  void push(op o);

 private:
  void loop();

  std::function<void(op&)> run_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<op> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

/// A device's memory in host memory (see oa/core/memory.hpp): aligned host
/// memory under a budget, with statistics, and a handler asked to free
/// memory when the budget is reached. Deallocation trusts its own record of
/// sizes; whatever the user leaked is freed with the device.
class host_memory_stack {
 public:
  /// Each allocation is `alignment`-aligned and counts its size rounded up to
  /// `granularity`; in use never exceeds `budget` (SIZE_MAX: uncapped).
  host_memory_stack(std::string device, std::size_t alignment, std::size_t granularity, std::size_t budget)
      : host_(alignment), limit_(host_, budget, granularity, std::move(device)), stats_(limit_, &limit_), top_(stats_) {}
  /// Throws oa::device_out_of_memory past the budget (after the handler).
  void* allocate(std::size_t bytes) { return top_.allocate(bytes, -1); }
  /// Frees p (null or unknown pointers are ignored).
  void deallocate(void* p) noexcept {
    std::size_t bytes = 0;
    if (host_.size_of(p, bytes)) top_.deallocate(p, bytes, -1);
  }
  std::size_t in_use() const noexcept { return stats_.in_use(); }
  std::size_t peak() const noexcept { return stats_.peak(); }
  void reset_peak() noexcept { stats_.reset_peak(); }
  bool contains(const void* p) const noexcept { return host_.contains(p); }
  void set_handler(retry_on_failure::handler h) { top_.set_handler(std::move(h)); }

 private:
  host_memory host_;
  limit_resource limit_;
  statistics_resource stats_;
  retry_on_failure top_;
};

/// Streams, events, error state, synchronization and records; a derived device
/// decides which engine runs each op (enqueue) and calls execute() there.
/// Derived destructors must stop their engines: engines call back into this.
class stream_device : public device {
 public:
  stream_id create_stream() override;
  void destroy_stream(stream_id s) noexcept override;
  event record_event(stream_id s) override;
  void wait_event(stream_id s, const event& e) override;
  std::exception_ptr synchronize_event(const event& e) override;
  void synchronize(stream_id s) override;
  void wait_idle() override;
  void set_recording(bool on) override;
  std::vector<op_record> take_records() override;
  double now() const override;
  /// The timeline's origin: now() counts from it.
  std::chrono::steady_clock::time_point epoch() const noexcept { return epoch_; }

 protected:
  /// `api` prefixes the function named by errors ("emulated_device").
  explicit stream_device(std::string api);

  /// "api::method".
  std::string function_name(const char* method) const;
  /// The stream, or oa::invalid_argument naming the method and "stream".
  std::shared_ptr<stream_state> find_stream(const char* method, stream_id s) const;
  /// Throws oa::invalid_argument unless src can be copied to dst.
  void check_copy(const char* method, const region& dst, const region& src) const;
  /// Orders `o` after the stream's earlier work and hands it to enqueue().
  void submit(const std::shared_ptr<stream_state>& st, op o);
  /// The stream's later work waits for `t` too (as for an event).
  void wait_token(const std::shared_ptr<stream_state>& st, token t);
  /// Fails the stream's later work with `e` (its first error stays).
  static void fail_stream(stream_state& st, std::exception_ptr e) noexcept;
  /// A token done once the stream's work submitted so far is, carrying the
  /// stream's error at that moment (what an event recorded now would say).
  token work_done(stream_id s);
  /// On an engine thread: waits for the dependencies, runs the op unless its
  /// stream is in error, records it, keeps its failure, completes it.
  void execute(op& o) noexcept;

  // Called with the submission lock held; must not block on device work.
  virtual void enqueue(op o) = 0;
  virtual void stream_added(stream_id) {}
  virtual void stream_removed(stream_id) noexcept {}

 private:
  static void wait_pending(stream_state& st);
  /// The event's token, or oa::invalid_argument naming the method and "e".
  token event_token(const char* method, const event& e) const;

  const std::string api_;
  const std::chrono::steady_clock::time_point epoch_;
  // Held from capturing an op's dependencies until it is queued, so that every
  // engine's queue is in submission order; also guards the stream table.
  mutable std::mutex m_;
  std::map<stream_id, std::shared_ptr<stream_state>> streams_;
  stream_id next_id_ = 0;
  std::atomic<bool> recording_{false};
  std::mutex records_m_;
  std::vector<op_record> records_;
};

}  // namespace oa::detail
