// The emulated device: a GPU's execution model on the host. Memory is a
// capped arena; one host-to-device copy engine, one device-to-host copy engine
// and N compute engines each run their own queue in order (as a GPU's engines
// do), so copies in both directions overlap kernels of other streams. As a
// GPU's DMA, the copy engines read and write pinned host memory only: pageable
// memory goes through the staging engine (src/core/staging.hpp), whose
// threads fill and drain pinned slots, the same host code as on CUDA, so its
// cost is real host work here. The link has a rate per direction, a rate both
// directions share and a latency per copy; the Nth launch, copy, fill or
// drain can be made to fail, to exercise the engine's recovery without a GPU.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/pinned_backend.hpp"
#include "core/staging.hpp"
#include "host/link_model.hpp"
#include "host/stream_worker.hpp"
#include "oa/core/error.hpp"
#include "oa/core/pinned.hpp"

namespace oa {

namespace detail {
namespace {

/// Streams waiting for words the staging engine's threads set: each waits
/// through a token, completed when its word reaches the value.
class word_waiters {
 public:
  /// A token done once `w` reaches `v`; null when it already has.
  token wait(const flag_word& w, std::uint32_t v) {
    std::lock_guard lock(m_);
    if (reached(w.load(std::memory_order_acquire), v)) return nullptr;
    waiting_.push_back({&w, v, std::make_shared<completion>()});
    return waiting_.back().done;
  }
  /// `w` changed: completes the tokens it now satisfies.
  void wrote(const flag_word& w) noexcept {
    std::vector<token> ready;
    {
      std::lock_guard lock(m_);
      std::erase_if(waiting_, [&](entry& e) {
        if (e.word != &w || !reached(w.load(std::memory_order_acquire), e.value)) return false;
        ready.push_back(std::move(e.done));
        return true;
      });
    }
    for (auto& t : ready) t->set();
  }

 private:
  struct entry {
    const flag_word* word;
    std::uint32_t value;
    token done;
  };
  std::mutex m_;
  std::vector<entry> waiting_;
};

int default_staging_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 2, 1u, 4u));
}

class emulated_device final : public stream_device, private staging_port {
  // Allocations are aligned and counted in blocks of this size, as a GPU's
  // allocator does.
  static constexpr std::size_t granularity = 256;

 public:
  explicit emulated_device(const emulated_options& opt)
      : stream_device("emulated_device"),
        opt_(opt),
        memory_("emulated", granularity, granularity, opt.memory_budget),
        link_(opt.link_bytes_per_second, opt.link_shared_bytes_per_second, opt.link_latency_seconds),
        h2d_(std::make_unique<fifo_engine>([this](op& o) { execute(o); })),
        d2h_(std::make_unique<fifo_engine>([this](op& o) { execute(o); })) {
    for (int i = 0; i < opt.compute_threads; ++i)
      compute_.push_back(std::make_unique<fifo_engine>([this](op& o) { execute(o); }));
    // Measured once per process, here rather than inside the first stage's timing.
    if (opt.pinned_only_dma) (void)staging_thread_rate();
  }

  ~emulated_device() override {
    // Each engine drains before the next stops; what an op waits for is either
    // done or queued on an engine still running, or a fill or drain of the
    // staging engine, whose threads run until it goes.
    wait_idle();
    staging_.reset();
    h2d_.reset();
    d2h_.reset();
    compute_.clear();
  }

  device_kind kind() const noexcept override { return device_kind::emulated; }
  std::string name() const override { return opt_.name; }
  /// How faults name it: "emulated device", "emulated device emulated:1" among several.
  std::string who() const { return opt_.name == "emulated" ? "emulated device" : "emulated device " + opt_.name; }
  bool host_accessible() const noexcept override { return false; }
  bool runs_device_functions() const noexcept override { return opt_.run_device_functions || opt_.fused_kernels; }
  bool compiles_kernels() const noexcept override { return opt_.fused_kernels; }
  // Three chunks in flight (in, compute, out) plus one of slack, so that a
  // late copy does not stall the other engines.
  int preferred_streams() const noexcept override { return 4; }
  // The link as configured; each operation also pays its hand-off to an
  // engine thread (tens of microseconds on an idle machine). Staging: the
  // fill threads at one thread's measured memcpy rate (snapped to a ladder,
  // so plans do not follow the measurement's noise). Kernels run on the
  // host at rates not modelled here: unknown.
  device_rates rates() const noexcept override {
    device_rates r;
    r.h2d = r.d2h = opt_.link_bytes_per_second;
    r.both_ways = opt_.link_shared_bytes_per_second;
    r.op_latency = opt_.link_latency_seconds + 30e-6;
    if (opt_.pinned_only_dma) {
      device_rates measured;
      measured.staging = staging_thread_rate() * (opt_.staging_threads > 0 ? opt_.staging_threads : default_staging_threads());
      r.staging = measured.snapped().staging;
    }
    return r;
  }

  // The staging engine's host work joins the streams' timeline.
  void set_recording(bool on) override {
    stream_device::set_recording(on);
    std::lock_guard lock(staging_m_);
    recording_ = on;
    if (staging_) staging_->record_spans(on, epoch());
  }
  std::vector<op_record> take_records() override {
    std::vector<op_record> out = stream_device::take_records();
    std::lock_guard lock(staging_m_);
    if (staging_)
      for (op_record& r : staging_->take_spans()) out.push_back(std::move(r));
    return out;
  }

  std::size_t staged_bytes() const noexcept override {
    std::lock_guard lock(staging_m_);
    if (!staging_) return 0;
    const staging_stats st = staging_->stats();
    return st.bytes_in + st.bytes_out;
  }

  std::size_t memory_budget() const noexcept override { return opt_.memory_budget; }
  std::size_t bytes_in_use() const noexcept override { return memory_.in_use(); }
  std::size_t peak_bytes() const noexcept override { return memory_.peak(); }
  void reset_peak() noexcept override { memory_.reset_peak(); }
  std::size_t allocation_granularity() const noexcept override { return granularity; }
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
    if (!k.entry) throw invalid_argument(function_name("launch_async"), "k", "launch '" + k.name + "' has no entry");
    if (k.kernel) check_kernel(*k.kernel);
    check_lost();
    op o;
    o.what = phase::compute;
    const std::uint64_t n = ++launches_;
    if (n == opt_.fail_launch) {
      const std::string what = "injected fault in launch #" + std::to_string(n) + " (kernel '" + k.name + "')";
      o.fault = std::make_exception_ptr(device_fault(fault_text(what), opt_.sticky_faults));
      lose(what);
    }
    o.label = std::move(k.name);
    o.body = [entry = std::move(k.entry), view = stream_view{this, s}] { entry(view); };
    submit(st, std::move(o));
  }

 private:
  // A generated kernel's pointer arguments must lie in this device's memory,
  // as a GPU's must: a host pointer given to a kernel is the engine's bug.
  void check_kernel(const generated_kernel& g) const {
    if (!opt_.fused_kernels)
      throw invalid_argument(function_name("launch_async"), "k",
                             "kernel '" + g.name + "' given to an emulated device that does not take generated kernels");
    if (g.args.size() != g.arg_sizes.size())
      throw invalid_argument(function_name("launch_async"), "k", "kernel '" + g.name + "': argument sizes do not match");
    for (std::size_t i : g.pointer_args) {
      const auto* p = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(g.args.at(i)));
      if (!memory_.contains(p))
        throw invalid_argument(function_name("launch_async"), "k",
                               "kernel '" + g.name + "': argument " + std::to_string(i) +
                                   " is not a pointer into this device's memory");
    }
  }

  // After a sticky fault every later submission fails at once, as work
  // submitted to a CUDA context does after a kernel fault.
  void check_lost() const {
    if (!lost_) return;
    std::lock_guard lock(lost_m_);
    throw device_fault("oa: " + who() + ": lost after an " + lost_what_ + ", which was sticky");
  }
  // An injected fault's message; a sticky one says what check_lost says, so
  // that whichever a stage meets first, its report reads the same.
  std::string fault_text(const std::string& what) const {
    return "oa: " + who() + ": " + (opt_.sticky_faults ? "lost after an " + what + ", which was sticky" : what);
  }
  void lose(const std::string& what) {
    if (!opt_.sticky_faults) return;
    std::lock_guard lock(lost_m_);
    lost_what_ = what;
    lost_ = true;
  }

  void copy(const char* method, phase what, const region& dst, const region& src, stream_id s) {
    auto st = find_stream(method, s);
    check_copy(method, dst, src);
    check_lost();
    const std::uint64_t n = ++copies_;
    std::exception_ptr fault;
    if (n == opt_.fail_copy) {
      const std::string what_failed = "injected fault in copy #" + std::to_string(n) + " (" + to_string(what) + ", " +
                                      std::to_string(src.bytes()) + " bytes)";
      fault = std::make_exception_ptr(device_fault(fault_text(what_failed), opt_.sticky_faults));
      lose(what_failed);
    }
    const region& host = what == phase::h2d ? src : dst;
    if (!opt_.pinned_only_dma || is_pinned(host.data, span(host))) return dma_op(dst, src, what, st, fault);
    // Pageable: through the staging engine, whose DMAs carry this copy's fault.
    std::lock_guard lock(staging_m_);
    staged_fault_ = fault;
    if (what == phase::h2d)
      staging().copy_in(dst, src, s);
    else
      staging().copy_out(dst, src, s);
    staged_fault_ = nullptr;
  }

  static std::size_t span(const region& r) noexcept {
    return r.rows == 0 || r.width == 0 ? 0 : (r.rows - 1) * r.pitch + r.width;
  }

  /// A copy by a copy engine, at the link's rate.
  void dma_op(const region& dst, const region& src, phase what, const std::shared_ptr<stream_state>& st,
              std::exception_ptr fault) {
    op o;
    o.what = what;
    o.bytes = src.bytes();
    o.fault = std::move(fault);
    o.body = [this, dst, src, what] {
      const auto begin = std::chrono::steady_clock::now();
      const auto done = link_.throttled() ? link_.reserve(what, src.bytes(), begin) : begin;
      copy_region(dst, src);
      // Only this direction's engine uses its way of the link, so sleeping
      // here is the link being busy: the next copy this way starts after it.
      if (done > begin) sleep_until_deadline(done);
    };
    submit(st, std::move(o));
  }

  staging_engine& staging() {
    if (!staging_) {
      staging_options so;
      so.slot_bytes = opt_.staging_slot_bytes;
      so.slots = opt_.staging_slots;
      so.fill_threads = so.drain_threads = opt_.staging_threads > 0 ? opt_.staging_threads : default_staging_threads();
      so.fail_fill = opt_.fail_fill;
      so.fail_drain = opt_.fail_drain;
      staging_ = std::make_unique<staging_engine>(static_cast<staging_port&>(*this), staging_memory(), so);
      staging_->record_spans(recording_, epoch());
    }
    return *staging_;
  }

  // ---- staging_port: the staging engine's view of the streams ----
  void wait_value(stream_id s, const flag_word& w, std::uint32_t v) override {
    if (token t = words_.wait(w, v)) wait_token(find_stream("wait_value", s), std::move(t));
  }
  // Once the stream's earlier work is done, on the thread that finishes it:
  // no engine of its own, whose queue would hold one stream's word behind
  // another stream's work.
  void write_value(stream_id s, flag_word& w, std::uint32_t v, flag_word* failed) override {
    const token done = work_done(s);
    // The continuation holds its token (a cycle broken when it runs): it may
    // run after the thread that completed the token has let go of it.
    done->then([this, &w, v, failed, done] {
      if (failed && done->error()) failed->store(v, std::memory_order_release);
      w.store(v, std::memory_order_release);
      words_.wrote(w);
    });
  }
  void dma(const region& dst, const region& src, phase dir, stream_id s) override {
    dma_op(dst, src, dir, find_stream("dma", s), staged_fault_);
  }
  void fail(stream_id s, std::exception_ptr e) noexcept override {
    try {
      fail_stream(*find_stream("fail", s), std::move(e));
    } catch (...) {  // a stream destroyed meanwhile: nothing left to fail
    }
  }
  void host_wrote(const flag_word& w) noexcept override { words_.wrote(w); }

  void enqueue(op o) override {
    switch (o.what) {
      case phase::h2d: h2d_->push(std::move(o)); return;
      case phase::d2h: d2h_->push(std::move(o)); return;
      case phase::compute: compute_[next_compute_++ % compute_.size()]->push(std::move(o)); return;
      case phase::fill:
      case phase::drain:
      case phase::prefault:
      case phase::pin: break;  // host work of the staging engine, never a stream's op
    }
    std::terminate();
  }

  const emulated_options opt_;
  host_memory_stack memory_;
  std::atomic<std::uint64_t> launches_{0};
  std::atomic<bool> lost_{false};
  mutable std::mutex lost_m_;
  std::string lost_what_;  // the fault that lost the device
  std::atomic<std::uint64_t> copies_{0};
  std::size_t next_compute_ = 0;  // under the submission lock
  link_model link_;
  word_waiters words_;
  mutable std::mutex staging_m_;     // one copy at a time through the staging engine
  std::exception_ptr staged_fault_;  // the fault of the copy being staged (under staging_m_)
  bool recording_ = false;           // the staging engine records its spans (under staging_m_)
  std::unique_ptr<fifo_engine> h2d_;
  std::unique_ptr<fifo_engine> d2h_;
  std::vector<std::unique_ptr<fifo_engine>> compute_;
  std::unique_ptr<staging_engine> staging_;  // made at the first pageable copy
};

}  // namespace
}  // namespace detail

std::unique_ptr<device> make_emulated_device(const emulated_options& opt) {
  OA_EXPECTS(opt.compute_threads >= 1, "make_emulated_device", "opt.compute_threads", "must be >= 1");
  OA_EXPECTS(opt.link_bytes_per_second >= 0 && std::isfinite(opt.link_bytes_per_second), "make_emulated_device",
             "opt.link_bytes_per_second", "must be finite and >= 0 (0: unthrottled)");
  OA_EXPECTS(opt.link_shared_bytes_per_second >= 0 && std::isfinite(opt.link_shared_bytes_per_second),
             "make_emulated_device", "opt.link_shared_bytes_per_second", "must be finite and >= 0 (0: no shared cap)");
  OA_EXPECTS(opt.link_latency_seconds >= 0 && opt.link_latency_seconds <= 1, "make_emulated_device",
             "opt.link_latency_seconds", "must be 0-1 seconds");
  OA_EXPECTS(opt.staging_slot_bytes >= 4096, "make_emulated_device", "opt.staging_slot_bytes", "must be >= 4096");
  OA_EXPECTS(opt.staging_slots >= 1 && opt.staging_slots <= 1024, "make_emulated_device", "opt.staging_slots",
             "must be 1-1024");
  OA_EXPECTS(opt.staging_threads >= 0 && opt.staging_threads <= 64, "make_emulated_device", "opt.staging_threads",
             "must be 0-64 (0: half the cores, 1-4)");
  return std::make_unique<detail::emulated_device>(opt);
}

}  // namespace oa
