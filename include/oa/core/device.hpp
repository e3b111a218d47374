#pragma once
// The device interface: stream-ordered semantics identical to CUDA's.
//
// Work submitted to one stream runs in submission order; work on different
// streams may run concurrently. Events mark a point in a stream; another
// stream can wait for it. Nothing blocks the caller except the synchronize
// calls. An operation that fails on the device puts its stream in an error
// state: later operations on that stream are skipped and events recorded
// after it carry the error, until synchronize(stream) reports and clears it.
// This is how the engine learns which chunk failed and re-runs it on the host.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace oa {

/// A 2-D byte region: `rows` rows of `width` bytes each, `pitch` bytes apart
/// (cudaMemcpy2D's shape). A contiguous block is one row.
struct region {
  std::byte* data = nullptr;
  std::size_t width = 0;
  std::size_t rows = 1;
  std::size_t pitch = 0;

  std::size_t bytes() const noexcept { return width * rows; }
  bool contiguous() const noexcept { return rows <= 1 || pitch == width; }
  /// The same shape packed densely at `dst` (pitch == width).
  region packed_at(void* dst) const noexcept { return {static_cast<std::byte*>(dst), width, rows, width}; }
};

/// Copies a region to another of the same width and rows (host memory only).
void copy_region(const region& dst, const region& src) noexcept;

enum class device_kind { host, emulated, cuda };
const char* to_string(device_kind k) noexcept;

/// What an operation was, for timelines and busy-time accounting: the
/// device's copies and kernels, and the host work of its staging engine
/// (pageable bytes into and out of pinned slots, destinations faulted in
/// ahead of the drains, host memory pinned for direct copies).
enum class phase { h2d, compute, d2h, fill, drain, prefault, pin };
const char* to_string(phase p) noexcept;

/// One operation as the device ran it (seconds on the process clock,
/// oa/core/process_clock.hpp: every device's on one timeline).
struct op_record {
  phase what;
  int stream;
  double begin;
  double end;
  std::size_t bytes;  // bytes copied; 0 for launches
  std::string label;  // launch: kernel name; copy: empty
};

/// What a device's work costs, as the planner's time model counts it when it
/// sizes chunks and tiles. Rates in bytes (or flops) per second; 0 where a
/// resource does not limit (a host-accessible device's link) or is unknown.
/// Estimates for planning only, never reported as measurements.
struct device_rates {
  double h2d = 0;             // pinned host memory to the device, one direction alone
  double d2h = 0;             // and back
  double both_ways = 0;       // both directions at once, together (the link's shared cap)
  double staging = 0;         // pageable host memory through the staging engine, per direction
  double op_latency = 0;      // seconds each copy or launch costs besides its bytes
  double kernel_bytes = 0;    // device memory an element-wise kernel reads and writes
  double gemm_flops[2] = {};  // in-core products: [0] float, [1] double
  /// The product rate's fraction for a step whose extents (m, n or k) are
  /// not all multiples of 8 elements: cuBLAS picks slower kernels for such
  /// leading dimensions (fitted on the H100's DGEMM tiles of 3277 x 1821).
  double gemm_unaligned = 0.85;
  /// The same rates, each rounded down to a step of a fixed ladder (half an
  /// octave: 2^(k/2) bytes or flops per second), so that plans made from
  /// measured rates do not change with a measurement's noise.
  device_rates snapped() const noexcept;
  /// The product rate for `elem_bytes`-byte elements (0: unknown).
  double flops(std::size_t elem_bytes) const noexcept { return gemm_flops[elem_bytes >= 8 ? 1 : 0]; }
};

/// A kernel generated for a stage (see src/core/kernel_source.hpp), for
/// devices that compile kernels at run time.
struct generated_kernel {
  std::string name;                          // extern "C" name; unique per source
  std::shared_ptr<const std::string> source;  // CUDA C++ translation unit
  std::vector<std::uint64_t> args;           // each parameter's bytes, low bytes first
  std::vector<std::uint8_t> arg_sizes;       // each parameter's size in bytes
  std::vector<std::size_t> pointer_args;     // parameters that are device pointers
  unsigned grid = 1;
  unsigned block = 256;
};

class device;
using stream_id = int;

/// A non-owning view of one stream of a device: what a device entry is given.
/// On the CUDA device, oa::cuda::native_stream(view) is its cudaStream_t and
/// oa::cuda::blas_handle(view) a cuBLAS handle bound to it.
struct stream_view {
  device* dev = nullptr;
  stream_id id = -1;
};

/// The work of one launch, over device memory the engine gave it (captured
/// by the callable). Every device takes it the same way, in stream order:
/// devices whose kernels run on the host (host, emulated) call it on the
/// stream's turn and it does the work; the CUDA device calls it at
/// submission and it enqueues its work (kernels, cuBLAS, CUB) on the stream.
/// An exception it throws is the launch's error, reported like a failed kernel.
using device_entry = std::function<void(const stream_view&)>;

/// A kernel launch: an entry, or a kernel generated for a stage (see
/// src/core/kernel_source.hpp) for devices that compile kernels at run time;
/// with a generated kernel, the entry (when set) is its description run on
/// the host, which the emulated device runs in its place.
struct launch {
  std::string name;
  device_entry entry;
  std::shared_ptr<const generated_kernel> kernel;
};

/// Opaque event handle; each device defines its own state behind it.
class event_state {
 public:
  virtual ~event_state() = default;
};
using event = std::shared_ptr<event_state>;

class device {
 public:
  virtual ~device() = default;

  virtual device_kind kind() const noexcept = 0;
  virtual std::string name() const = 0;
  /// Device memory is host memory and kernels run on the host: the engine may
  /// give kernels views of host data directly instead of staging copies.
  virtual bool host_accessible() const noexcept = 0;
  /// Streams the engine should use by default for a pipeline.
  virtual int preferred_streams() const noexcept = 0;
  /// What its copies and kernels cost, for the planner's time model.
  virtual device_rates rates() const noexcept { return {}; }
  /// Runs generated kernels (launch::kernel): stages are fused into one
  /// kernel per chunk, temporaries never take device memory.
  virtual bool compiles_kernels() const noexcept { return false; }
  /// Launches run the calls' device functions (on the emulated device, their
  /// host twins) rather than their CPU functions.
  virtual bool runs_device_functions() const noexcept { return false; }
  /// Gets a generated kernel ready (compiled, loaded) before the first chunk,
  /// so that compiling is not part of the pipeline and its errors come first.
  virtual void prepare(const generated_kernel&) {}
  /// Host memory that a stage copies from or to chunk by chunk; a device may
  /// pin it for direct DMA until host_memory_done. Never throws for a hint
  /// it cannot take.
  /// Bytes this device's copies moved through its staging engine (pageable
  /// host memory: both directions, since it was made); 0 where there is none.
  virtual std::size_t staged_bytes() const noexcept { return 0; }
  virtual void host_memory_use(const void*, std::size_t) noexcept {}
  virtual void host_memory_done(const void*) noexcept {}

  // Memory. allocate throws oa::device_out_of_memory past the budget.
  virtual std::size_t memory_budget() const noexcept = 0;
  virtual std::size_t bytes_in_use() const noexcept = 0;
  virtual std::size_t peak_bytes() const noexcept = 0;
  virtual void reset_peak() noexcept = 0;
  /// Allocations count as their size rounded up to a multiple of this: the
  /// planner counts the same, so a plan that fits never runs out of memory.
  virtual std::size_t allocation_granularity() const noexcept { return 1; }
  virtual void* allocate(std::size_t bytes) = 0;
  /// Memory whose first user is work on stream s: a stream-ordered device
  /// gives it without waiting (usable on s at once, on other streams once s
  /// has run up to here). Freed after every use has finished, as allocate's.
  virtual void* allocate_on(std::size_t bytes, stream_id s) {
    (void)s;
    return allocate(bytes);
  }
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  /// Called, on the allocating thread, when an allocation would exceed the
  /// budget: it frees what it can (the runtime's pager writes back and drops
  /// resident values) and returns whether it freed anything; the allocation
  /// is then tried again. Replaces the previous handler.
  virtual void set_out_of_memory_handler(std::function<bool(std::size_t bytes)> h) = 0;

  // Streams and stream-ordered work.
  virtual stream_id create_stream() = 0;
  virtual void destroy_stream(stream_id s) noexcept = 0;
  virtual void copy_to_device_async(const region& dst, const region& src, stream_id s) = 0;
  virtual void copy_to_host_async(const region& dst, const region& src, stream_id s) = 0;
  virtual void launch_async(launch k, stream_id s) = 0;

  // Events.
  virtual event record_event(stream_id s) = 0;
  virtual void wait_event(stream_id s, const event& e) = 0;
  /// Blocks until the event completes; returns the error of the first failed
  /// operation before it on its stream, or null.
  virtual std::exception_ptr synchronize_event(const event& e) = 0;

  /// Blocks until the stream is idle; rethrows its first error and clears it.
  virtual void synchronize(stream_id s) = 0;
  /// Blocks until every stream is idle (errors stay on their streams).
  virtual void wait_idle() = 0;

  // Timeline of completed operations, for reports and traces.
  virtual void set_recording(bool on) = 0;
  virtual std::vector<op_record> take_records() = 0;
  /// Seconds on the process clock (that of op_record).
  virtual double now() const = 0;
};

/// A stream with one owner: its work is waited for (errors dropped: they
/// were the work's to report) and the stream destroyed with this object.
class stream {
 public:
  stream() = default;
  explicit stream(device& d) : dev_(&d), id_(d.create_stream()) {}
  stream(stream&& o) noexcept : dev_(o.dev_), id_(o.id_) { o.id_ = -1; }
  stream& operator=(stream&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_, id_ = o.id_;
      o.id_ = -1;
    }
    return *this;
  }
  ~stream() { reset(); }

  void reset() noexcept {
    if (id_ < 0) return;
    try {
      dev_->synchronize(id_);
    } catch (...) {
    }
    dev_->destroy_stream(id_);
    id_ = -1;
  }
  stream_id id() const noexcept { return id_; }
  stream_view view() const noexcept { return {dev_, id_}; }
  explicit operator bool() const noexcept { return id_ >= 0; }

 private:
  device* dev_ = nullptr;
  stream_id id_ = -1;
};

/// Device memory with one owner, given back to its device when destroyed or
/// reset. Work queued on it must be finished by then: declare the buffer
/// before whatever waits for that work.
class device_buffer {
 public:
  device_buffer() = default;
  /// Throws oa::device_out_of_memory past the device's budget. With a
  /// stream: allocated in its order, for work on it (device::allocate_on).
  device_buffer(device& d, std::size_t bytes)
      : dev_(&d), bytes_(bytes), data_(static_cast<std::byte*>(d.allocate(bytes))) {}
  device_buffer(device& d, std::size_t bytes, stream_id s)
      : dev_(&d), bytes_(bytes), data_(static_cast<std::byte*>(d.allocate_on(bytes, s))) {}
  device_buffer(device_buffer&& o) noexcept : dev_(o.dev_), bytes_(o.bytes_), data_(o.data_) { o.data_ = nullptr; }
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_, bytes_ = o.bytes_, data_ = o.data_;
      o.data_ = nullptr;
    }
    return *this;
  }
  ~device_buffer() { reset(); }

  void reset() noexcept {
    if (data_) dev_->deallocate(data_, bytes_);
    data_ = nullptr;
  }
  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return data_ ? bytes_ : 0; }

 private:
  device* dev_ = nullptr;
  std::size_t bytes_ = 0;
  std::byte* data_ = nullptr;
};

/// Settings for the emulated device.
struct emulated_options {
  std::string name = "emulated";  // as reports name it ("emulated:1" among several)
  std::size_t memory_budget = std::size_t{256} << 20;
  double link_bytes_per_second = 0;  // 0: unthrottled; per direction
  // Both directions at once share this rate (a GPU's link: 54.7 GB/s each
  // way, 88.4 both ways on an H100); 0: no shared cap.
  double link_shared_bytes_per_second = 0;
  double link_latency_seconds = 0;  // per copy, before its bytes move
  // As a GPU's DMA: only pinned host memory (oa::is_pinned) is copied
  // directly; pageable memory goes through the staging engine's pinned
  // slots, filled and drained by its threads. False: every copy is direct.
  bool pinned_only_dma = true;
  std::size_t staging_slot_bytes = std::size_t{4} << 20;
  int staging_slots = 4;    // per direction
  int staging_threads = 0;  // fill threads and drain threads each; 0: half the cores, 1-4
  // Fault injection in the staging engine: the Nth fill / drain fails.
  std::uint64_t fail_fill = 0;
  std::uint64_t fail_drain = 0;
  // Fault injection: the Nth (1-based) launch / copy submitted fails on the
  // device with oa::device_fault. 0 disables.
  std::uint64_t fail_launch = 0;
  std::uint64_t fail_copy = 0;
  // The injected fault is sticky: afterwards every submission fails at once
  // (as a CUDA context does after a kernel fault), so the runtime must give
  // up on the device.
  bool sticky_faults = false;
  int compute_threads = 1;
  // Run the calls' device functions (their host twins) instead of the CPU
  // functions. Off by default: results then match the CPU path bit for bit.
  bool run_device_functions = false;
  // Take stages as one generated kernel per chunk, as a GPU does: launches
  // carry the kernel (whose pointer arguments must lie in this device's
  // memory) and, as their entry, its description run on the host (the
  // device functions' host twins). Implies run_device_functions.
  bool fused_kernels = false;
};

/// Settings for the host device.
struct host_options {
  std::size_t memory_budget = 0;  // 0: a cache-sized working set per stream, see planner
  int threads = 0;                // 0: hardware concurrency
};

std::unique_ptr<device> make_host_device(const host_options& opt = {});
std::unique_ptr<device> make_emulated_device(const emulated_options& opt);

}  // namespace oa
