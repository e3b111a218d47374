// The host device: the real CPU. Each stream is one worker thread running its
// ops in order, so K streams give K-way parallelism; workers outlive their
// streams and serve the next ones, for the device's life. Memory is plain host
// memory, never capped; the budget it reports is a planning target.

#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "host/stream_worker.hpp"
#include "oa/core/error.hpp"

namespace oa {

namespace detail {
namespace {

// Each stream's working set per chunk: a share of a shared L3 rather than an
// L2. Measured on Black-Scholes and Haversine (2 cores, 1 MiB L2 each, 32 MiB
// L3): 8 MiB chunks ran 3-5% faster than 2 MiB ones, since each chunk costs a
// hand-over between the submitting thread and the stream's worker, and
// running all calls on 256 KiB sub-blocks of a chunk gained nothing.
constexpr std::size_t cache_bytes_per_stream = std::size_t{8} << 20;

class host_device final : public stream_device {
 public:
  explicit host_device(const host_options& opt)
      : stream_device("host_device"),
        streams_(opt.threads > 0 ? opt.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
        // Chunks are sized from the budget: keep each stream's working set in cache.
        budget_(opt.memory_budget ? opt.memory_budget : cache_bytes_per_stream * static_cast<std::size_t>(streams_)),
        memory_("host", 64, 1, SIZE_MAX) {}

  ~host_device() override {  // each worker drains its queue, then joins
    workers_.clear();
    idle_.clear();
  }

  device_kind kind() const noexcept override { return device_kind::host; }
  std::string name() const override { return "host"; }
  bool host_accessible() const noexcept override { return true; }
  int preferred_streams() const noexcept override { return streams_; }

  std::size_t memory_budget() const noexcept override { return budget_; }
  std::size_t bytes_in_use() const noexcept override { return memory_.in_use(); }
  std::size_t peak_bytes() const noexcept override { return memory_.peak(); }
  void reset_peak() noexcept override { memory_.reset_peak(); }
  void* allocate(std::size_t bytes) override { return memory_.allocate(bytes); }
  void deallocate(void* p, std::size_t) noexcept override { memory_.deallocate(p); }
  void set_out_of_memory_handler(std::function<bool(std::size_t)> h) override { memory_.set_handler(std::move(h)); }

  void copy_to_device_async(const region& dst, const region& src, stream_id s) override {
    copy("copy_to_device_async", phase::h2d, dst, src, s);
  }
  void copy_to_host_async(const region& dst, const region& src, stream_id s) override {
    copy("copy_to_host_async", phase::d2h, dst, src, s);
  }

  void launch_async(launch k, stream_id s) override {
    auto st = find_stream("launch_async", s);
    op o;
    o.what = phase::compute;
    o.label = std::move(k.name);
    if (!k.entry) throw invalid_argument(function_name("launch_async"), "k", "launch '" + o.label + "' has no entry");
    o.body = [entry = std::move(k.entry), view = stream_view{this, s}] { entry(view); };
    submit(st, std::move(o));
  }

 private:
  void copy(const char* method, phase what, const region& dst, const region& src, stream_id s) {
    auto st = find_stream(method, s);
    check_copy(method, dst, src);
    op o;
    o.what = what;
    o.bytes = src.bytes();
    o.body = [dst, src] { copy_region(dst, src); };
    submit(st, std::move(o));
  }

  void enqueue(op o) override { workers_.at(o.stream->id)->push(std::move(o)); }
  // A stream takes an idle worker, or starts one; a destroyed stream's worker
  // (its queue drained: destroy_stream waited for its work) goes back idle, so
  // evaluations reuse the device's threads instead of starting their own.
  void stream_added(stream_id s) override {
    std::unique_ptr<fifo_engine> w;
    if (!idle_.empty()) {
      w = std::move(idle_.back());
      idle_.pop_back();
    } else {
      w = std::make_unique<fifo_engine>([this](op& o) { execute(o); });
    }
    workers_.emplace(s, std::move(w));  // if this throws, the worker stops: nothing was queued on it
  }
  void stream_removed(stream_id s) noexcept override {
    auto it = workers_.find(s);
    if (it == workers_.end()) return;
    try {
      idle_.push_back(std::move(it->second));
    } catch (...) {  // no room to keep it: the worker stops (its queue is empty)
    }
    workers_.erase(it);
  }

  const int streams_;
  const std::size_t budget_;
  host_memory_stack memory_;
  std::map<stream_id, std::unique_ptr<fifo_engine>> workers_;  // under the submission lock
  std::vector<std::unique_ptr<fifo_engine>> idle_;             // workers of destroyed streams, ditto
};

}  // namespace
}  // namespace detail

std::unique_ptr<device> make_host_device(const host_options& opt) {
  OA_EXPECTS(opt.threads >= 0, "make_host_device", "opt.threads", "must be >= 0 (0: hardware concurrency)");
  return std::make_unique<detail::host_device>(opt);
}

}  // namespace oa
