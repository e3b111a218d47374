// The emulated device: a GPU's execution model on the host. Memory is a
// capped arena; one host-to-device copy engine, one device-to-host copy engine
// and N compute engines each run their own queue in order (as a GPU's engines
// do), so copies in both directions overlap kernels of other streams. The link
// can be throttled per direction, and the Nth launch or copy can be made to
// fail, to exercise the engine's recovery without a GPU.

#include <chrono>
#include <cstdint>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "host/stream_worker.hpp"
#include "oa/core/error.hpp"

namespace oa {

namespace detail {
namespace {

class emulated_device final : public stream_device {
  // Allocations are aligned and counted in blocks of this size, as a GPU's
  // allocator does.
  static constexpr std::size_t granularity = 256;

 public:
  explicit emulated_device(const emulated_options& opt)
      : stream_device("emulated_device"),
        opt_(opt),
        memory_("emulated", granularity, granularity, opt.memory_budget),
        h2d_(std::make_unique<fifo_engine>([this](op& o) { execute(o); })),
        d2h_(std::make_unique<fifo_engine>([this](op& o) { execute(o); })) {
    for (int i = 0; i < opt.compute_threads; ++i)
      compute_.push_back(std::make_unique<fifo_engine>([this](op& o) { execute(o); }));
  }

  ~emulated_device() override {
    // Each engine drains before the next stops; what an op waits for is either
    // done or queued on an engine still running.
    h2d_.reset();
    d2h_.reset();
    compute_.clear();
  }

  device_kind kind() const noexcept override { return device_kind::emulated; }
  std::string name() const override { return "emulated"; }
  bool host_accessible() const noexcept override { return false; }
  bool runs_device_functions() const noexcept override { return opt_.run_device_functions || opt_.fused_kernels; }
  bool compiles_kernels() const noexcept override { return opt_.fused_kernels; }
  // Three chunks in flight (in, compute, out) plus one of slack, so that a
  // late copy does not stall the other engines.
  int preferred_streams() const noexcept override { return 4; }

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
      o.fault = std::make_exception_ptr(device_fault("oa: emulated device: " + what, opt_.sticky_faults));
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
    throw device_fault("oa: emulated device: lost after an " + lost_what_ + ", which was sticky");
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
    op o;
    o.what = what;
    o.bytes = src.bytes();
    const std::uint64_t n = ++copies_;
    if (n == opt_.fail_copy) {
      const std::string fault = "injected fault in copy #" + std::to_string(n) + " (" + to_string(what) + ", " +
                                std::to_string(o.bytes) + " bytes)";
      o.fault = std::make_exception_ptr(device_fault("oa: emulated device: " + fault, opt_.sticky_faults));
      lose(fault);
    }
    o.body = [dst, src, bw = opt_.link_bytes_per_second] {
      const auto begin = std::chrono::steady_clock::now();
      copy_region(dst, src);
      // Only this direction's engine uses its link, so sleeping here is the
      // link being busy: the next copy in this direction starts after it.
      if (bw > 0) sleep_until_deadline(link_deadline(begin, static_cast<double>(src.bytes()) / bw));
    };
    submit(st, std::move(o));
  }

  void enqueue(op o) override {
    switch (o.what) {
      case phase::h2d: h2d_->push(std::move(o)); return;
      case phase::d2h: d2h_->push(std::move(o)); return;
      case phase::compute: compute_[next_compute_++ % compute_.size()]->push(std::move(o)); return;
    }
  }

  const emulated_options opt_;
  host_memory_stack memory_;
  std::atomic<std::uint64_t> launches_{0};
  std::atomic<bool> lost_{false};
  mutable std::mutex lost_m_;
  std::string lost_what_;  // the fault that lost the device
  std::atomic<std::uint64_t> copies_{0};
  std::size_t next_compute_ = 0;  // under the submission lock
  std::unique_ptr<fifo_engine> h2d_;
  std::unique_ptr<fifo_engine> d2h_;
  std::vector<std::unique_ptr<fifo_engine>> compute_;
};

}  // namespace
}  // namespace detail

std::unique_ptr<device> make_emulated_device(const emulated_options& opt) {
  OA_EXPECTS(opt.compute_threads >= 1, "make_emulated_device", "opt.compute_threads", "must be >= 1");
  OA_EXPECTS(opt.link_bytes_per_second >= 0 && std::isfinite(opt.link_bytes_per_second), "make_emulated_device",
             "opt.link_bytes_per_second", "must be finite and >= 0 (0: unthrottled)");
  return std::make_unique<detail::emulated_device>(opt);
}

}  // namespace oa
