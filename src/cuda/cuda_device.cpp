// The CUDA device. Stream-ordered like every oa device; what is particular:
// - memory comes from the GPU's stream-ordered pool, kept (release threshold
//   at its maximum) so chunks and evaluations reuse it, under the budget;
// - the user's pageable data moves through the staging engine
//   (src/core/staging.hpp), the host code the emulated device runs too: a
//   ring of pinned slots per direction filled and drained by its threads
//   ahead of the streams, each DMA waiting for its fill through a stream
//   memory operation (cuStreamWaitValue32, from the driver's entry points:
//   nothing links libcuda). Where the driver has no stream memory operations,
//   host functions on the stream fill a buffer per stream before the DMA and
//   drain it after. Memory that is pinned (oa's pool, registered, or the
//   caller's cudaHostAlloc) is copied directly;
// - launches are the stage kernels the engine generates, compiled once per
//   source with NVRTC for this GPU and cached, or entries that enqueue their
//   own work (cuBLAS with a handle per stream, kernels built with nvcc);
// - NVTX ranges name every submission, CUDA events time every operation.

#include "oa/cuda/device.hpp"

#include <cuda.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/pinned_backend.hpp"
#include "core/staging.hpp"
#include "cuda/copy_pool.hpp"
#include "cuda/cuda_rates.hpp"
#include "cuda/nvrtc_compiler.hpp"
#include "oa/core/pinned.hpp"
#include "oa/core/process_clock.hpp"
#include "oa/cuda/error.hpp"

namespace oa::cuda {

namespace detail {

std::string describe(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

bool is_sticky(cudaError_t e) noexcept {
  switch (e) {
    // Faults of a kernel: the context is corrupted for good.
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    // The device or the runtime is gone.
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    case cudaErrorCudartUnloading:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

bool is_sticky(cublasStatus_t s) noexcept { return s == CUBLAS_STATUS_EXECUTION_FAILED; }

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls do not report it again
  const std::string what = std::string("oa: ") + file + ":" + std::to_string(line) + ": " + call + " failed: " + describe(e);
  if (is_sticky(e)) throw cuda_fault(what + " (the device cannot be used any more)", static_cast<int>(e));
  throw cuda_error(what, static_cast<int>(e));
}

void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  const std::string what = std::string("oa: ") + file + ":" + std::to_string(line) + ": " + call + " failed: " +
                           cublasGetStatusName(s) + ": " + cublasGetStatusString(s);
  if (is_sticky(s)) throw cuda_fault(what, static_cast<int>(s));
  throw cuda_error(what, static_cast<int>(s));
}

namespace {

class nvtx_range {
 public:
  explicit nvtx_range(const char* name) { nvtxRangePushA(name); }
  ~nvtx_range() { nvtxRangePop(); }
};

/// CUDA events made once and reused: a stage records several per chunk.
/// Shared by the device and its events, so an event outliving the device
/// still has somewhere to go back to.
class event_pool {
 public:
  explicit event_pool(unsigned flags) : flags_(flags) {}
  ~event_pool() {
    for (cudaEvent_t e : free_) OA_CUDA_TRY_NOTHROW(cudaEventDestroy(e));
  }
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  cudaEvent_t take() {
    {
      std::lock_guard lock(m_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    OA_CUDA_TRY(cudaEventCreateWithFlags(&e, flags_));
    return e;
  }
  /// Back for reuse: a later record replaces whatever it marked.
  void give(cudaEvent_t e) noexcept {
    if (!e) return;
    try {
      std::lock_guard lock(m_);
      free_.push_back(e);
    } catch (...) {
      OA_CUDA_TRY_NOTHROW(cudaEventDestroy(e));
    }
  }

 private:
  const unsigned flags_;
  std::mutex m_;
  std::vector<cudaEvent_t> free_;
};

struct cuda_event final : event_state {
  cudaEvent_t e = nullptr;
  stream_id stream = -1;  // where it was recorded: a fill or drain of that stream may have failed
  std::shared_ptr<event_pool> pool;
  ~cuda_event() override { pool->give(e); }
};

struct stream_state {
  cudaStream_t stream = nullptr;
  std::byte* pinned = nullptr;
  cublasHandle_t blas = nullptr;
  bool in_use = false;
  std::exception_ptr host_error;  // a failed fill or drain, until synchronize reports it
};

/// The driver's stream memory operations, through cudart's entry points so
/// that nothing links libcuda; null where the driver lacks them.
struct stream_memops {
  using value32_fn = CUresult(CUDAAPI*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  value32_fn wait = nullptr;
  value32_fn write = nullptr;

  static stream_memops load() {
    stream_memops m;
    m.wait = reinterpret_cast<value32_fn>(symbol("cuStreamWaitValue32"));
    m.write = reinterpret_cast<value32_fn>(symbol("cuStreamWriteValue32"));
    if (!m.wait || !m.write) m = {};
    return m;
  }
  bool usable() const noexcept { return wait && write; }

 private:
  static void* symbol(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return fn;
  }
};

struct timed_op {
  phase what;
  int stream;
  cudaEvent_t begin, end;
  std::size_t bytes;
  std::string label;
};

/// A host function's work: copy between pinned staging and user memory.
struct staging_task {
  copy_pool* pool;
  region dst, src;
  static void CUDART_CB run(void* p) {
    auto* t = static_cast<staging_task*>(p);
    t->pool->copy(t->dst, t->src);
    delete t;
  }
};

/// Host threads copying between pageable memory and pinned staging.
int copy_threads(const options& opt) {
  return opt.copy_threads > 0 ? opt.copy_threads
                              : static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u));
}

class cuda_device final : public device, private oa::detail::staging_port {
  // Allocations are counted (and made) in blocks of this size, the
  // alignment cudaMalloc gives: the budget holds what the device does, and
  // plans see the blocks, as on the emulated device.
  static constexpr std::size_t granularity = 256;

 public:
  explicit cuda_device(const options& opt)
      : opt_(opt),
        pool_(copy_threads(opt)),
        epoch_host_(process_epoch()) {
    OA_CUDA_TRY(cudaSetDevice(opt.ordinal));
    OA_CUDA_TRY(cudaGetDeviceProperties(&props_, opt.ordinal));
    std::size_t free = 0, total = 0;
    OA_CUDA_TRY(cudaMemGetInfo(&free, &total));
    budget_ = opt.memory_budget ? opt.memory_budget : free / 10 * 8;
    // A pool of our own: it keeps its memory between chunks and evaluations
    // (release threshold at its maximum) and gives it all back when the
    // device goes, without touching the process's default pool.
    cudaMemPoolProps pp{};
    pp.allocType = cudaMemAllocationTypePinned;
    pp.location.type = cudaMemLocationTypeDevice;
    pp.location.id = opt.ordinal;
    OA_CUDA_TRY(cudaMemPoolCreate(&mem_pool_, &pp));
    std::uint64_t keep = UINT64_MAX;
    OA_CUDA_TRY(cudaMemPoolSetAttribute(mem_pool_, cudaMemPoolAttrReleaseThreshold, &keep));
    OA_CUDA_TRY(cudaStreamCreateWithFlags(&alloc_stream_, cudaStreamNonBlocking));
    OA_CUDA_TRY(cudaEventCreate(&epoch_));
    OA_CUDA_TRY(cudaEventRecord(epoch_, alloc_stream_));
    OA_CUDA_TRY(cudaEventSynchronize(epoch_));
  }

  ~cuda_device() override {
    // This device's own streams, not the whole GPU: other users of the GPU
    // in the process (another runtime's device) keep running. A stream that
    // failed for good sets no word again: the staging engine stops waiting.
    bool lost = false;
    for (auto& s : streams_)
      if (s.stream && cudaStreamSynchronize(s.stream) != cudaSuccess) lost = true;
    if (staging_) {
      if (lost) staging_->abort();
      staging_.reset();
    }
    (void)cudaGetLastError();
    OA_CUDA_TRY_NOTHROW(cudaStreamSynchronize(alloc_stream_));
    for (auto& op : ops_) release(op);
    for (auto& [p, bytes] : allocations_) OA_CUDA_TRY_NOTHROW(cudaFreeAsync(p, alloc_stream_));
    for (auto& s : streams_) {
      if (s.blas) cublasDestroy(s.blas);
      OA_CUDA_TRY_NOTHROW(cudaFreeHost(s.pinned));
      OA_CUDA_TRY_NOTHROW(cudaStreamDestroy(s.stream));
    }
    for (auto& [name, lib] : libraries_) OA_CUDA_TRY_NOTHROW(cudaLibraryUnload(lib));
    for (const void* p : registered_) OA_CUDA_TRY_NOTHROW(cudaHostUnregister(const_cast<void*>(p)));
    OA_CUDA_TRY_NOTHROW(cudaStreamSynchronize(alloc_stream_));
    OA_CUDA_TRY_NOTHROW(cudaMemPoolDestroy(mem_pool_));
    OA_CUDA_TRY_NOTHROW(cudaStreamDestroy(alloc_stream_));
    OA_CUDA_TRY_NOTHROW(cudaEventDestroy(epoch_));
  }

  device_kind kind() const noexcept override { return device_kind::cuda; }
  std::string name() const override {
    return (opt_.ordinal == 0 ? std::string("cuda (") : "cuda:" + std::to_string(opt_.ordinal) + " (") + props_.name + ")";
  }
  bool host_accessible() const noexcept override { return false; }
  int preferred_streams() const noexcept override { return 4; }
  // Measured once, when the first stage is planned.
  device_rates rates() const noexcept override {
    std::call_once(rates_once_, [this] { rates_ = detail::measure_rates(opt_.ordinal, copy_threads(opt_)); });
    return rates_;
  }
  bool compiles_kernels() const noexcept override { return true; }
  bool runs_device_functions() const noexcept override { return true; }

  std::size_t staged_bytes() const noexcept override {
    std::lock_guard lock(staging_mutex_);
    if (!staging_) return 0;
    const auto st = staging_->stats();
    return st.bytes_in + st.bytes_out;
  }

  // ---- memory ---------------------------------------------------------------
  std::size_t memory_budget() const noexcept override { return budget_; }
  std::size_t allocation_granularity() const noexcept override { return granularity; }
  std::size_t bytes_in_use() const noexcept override {
    std::lock_guard lock(mutex_);
    return in_use_;
  }
  std::size_t peak_bytes() const noexcept override {
    std::lock_guard lock(mutex_);
    return peak_;
  }
  void reset_peak() noexcept override {
    std::lock_guard lock(mutex_);
    peak_ = in_use_;
  }

  void* allocate(std::size_t bytes) override { return allocate_on(bytes, -1); }

  // Past the budget, the handler (the runtime's pager) frees what it can and
  // the allocation is tried again while it frees something.
  void* allocate_on(std::size_t bytes, stream_id s) override {
    for (;;) {
      try {
        return allocate_once(bytes, s);
      } catch (const device_out_of_memory&) {
        std::function<bool(std::size_t)> h;
        {
          std::lock_guard lock(mutex_);
          h = oom_handler_;
        }
        if (!h || !h(bytes)) throw;
      }
    }
  }

  void set_out_of_memory_handler(std::function<bool(std::size_t)> h) override {
    std::lock_guard lock(mutex_);
    oom_handler_ = std::move(h);
  }

  // On stream s the memory is ordered before the stream's later work, with
  // no wait; memory for no stream in particular is allocated on the
  // allocation stream and waited for, so that every stream may use it.
  void* allocate_once(std::size_t requested, stream_id s) {
    OA_CUDA_TRY(cudaSetDevice(opt_.ordinal));
    if (requested > budget_) throw device_out_of_memory(name(), requested, bytes_in_use(), budget_);
    const std::size_t bytes = (std::max<std::size_t>(requested, 1) + granularity - 1) / granularity * granularity;
    const cudaStream_t on = s >= 0 ? native(s, "allocate_on") : alloc_stream_;
    std::lock_guard lock(mutex_);
    if (in_use_ + bytes > budget_) throw device_out_of_memory(name(), bytes, in_use_, budget_);
    void* p = nullptr;
    const cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, mem_pool_, on);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw device_out_of_memory(name(), bytes, in_use_, budget_);
    }
    OA_CUDA_TRY(e);
    if (s < 0) OA_CUDA_TRY(cudaStreamSynchronize(alloc_stream_));
    allocations_.emplace(p, bytes);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
  }

  void deallocate(void* p, std::size_t) noexcept override {
    std::lock_guard lock(mutex_);
    auto it = allocations_.find(p);
    if (it == allocations_.end()) return;
    // The engine frees only after the work using it is done.
    OA_CUDA_TRY_NOTHROW(cudaFreeAsync(p, alloc_stream_));
    in_use_ -= it->second;
    allocations_.erase(it);
  }

  // ---- streams ----------------------------------------------------------------
  stream_id create_stream() override {
    OA_CUDA_TRY(cudaSetDevice(opt_.ordinal));
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < streams_.size(); ++i)
      if (!streams_[i].in_use) {
        streams_[i].in_use = true;
        return static_cast<stream_id>(i);
      }
    stream_state s;
    OA_CUDA_TRY(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    void* pinned = nullptr;
    const cudaError_t e = cudaHostAlloc(&pinned, opt_.staging_bytes, cudaHostAllocDefault);
    s.pinned = static_cast<std::byte*>(pinned);
    if (e != cudaSuccess) {
      OA_CUDA_TRY_NOTHROW(cudaStreamDestroy(s.stream));
      OA_CUDA_TRY(e);
    }
    s.in_use = true;
    streams_.push_back(s);
    const std::string label = "oa stream " + std::to_string(streams_.size() - 1);
    nvtxNameCudaStreamA(s.stream, label.c_str());
    return static_cast<stream_id>(streams_.size() - 1);
  }

  void destroy_stream(stream_id s) noexcept override {
    std::lock_guard lock(mutex_);
    if (s < 0 || static_cast<std::size_t>(s) >= streams_.size()) return;
    OA_CUDA_TRY_NOTHROW(cudaStreamSynchronize(streams_[static_cast<std::size_t>(s)].stream));
    streams_[static_cast<std::size_t>(s)].in_use = false;  // kept, with its staging buffer, for the next stage
  }

  /// A stream's pinned staging buffer (read under the lock: another thread
  /// may be adding streams).
  std::byte* stream_staging(stream_id s) const {
    std::lock_guard lock(mutex_);
    return streams_[static_cast<std::size_t>(s)].pinned;
  }

  cudaStream_t native(stream_id s, const char* fn) const {
    OA_CUDA_TRY(cudaSetDevice(opt_.ordinal));  // the current device is per thread
    std::lock_guard lock(mutex_);
    if (s < 0 || static_cast<std::size_t>(s) >= streams_.size() || !streams_[static_cast<std::size_t>(s)].in_use)
      throw invalid_argument(std::string("cuda_device::") + fn, "stream", "unknown stream " + std::to_string(s));
    return streams_[static_cast<std::size_t>(s)].stream;
  }

  cublasHandle_t blas(stream_id s) {
    const cudaStream_t cs = native(s, "blas_handle");
    std::lock_guard lock(mutex_);
    auto& st = streams_[static_cast<std::size_t>(s)];
    if (!st.blas) {
      OA_CUBLAS_TRY(cublasCreate(&st.blas));
      OA_CUBLAS_TRY(cublasSetStream(st.blas, cs));
    }
    return st.blas;
  }

  // ---- copies -------------------------------------------------------------------
  void copy_to_device_async(const region& dst, const region& src, stream_id s) override {
    check_shapes("copy_to_device_async", dst, src);
    const cudaStream_t cs = native(s, "copy_to_device_async");
    nvtx_range range("oa h2d");
    if (pinned(src))
      return timed(phase::h2d, s, cs, src.bytes(), {}, [&] { dma(dst, src, cudaMemcpyHostToDevice, cs); });
    if (staging_usable()) return staging().copy_in(dst, src, s);
    // Pageable: a host function fills the stream's staging buffer, then the
    // DMA; only the DMA is timed as a copy.
    std::byte* staging = stream_staging(s);
    oa::detail::for_each_piece(dst, src, opt_.staging_bytes, [&](const region& d, const region& h) {
      const region packed = h.packed_at(staging);
      OA_CUDA_TRY(cudaLaunchHostFunc(cs, &staging_task::run, new staging_task{&pool_, packed, h}));
      timed(phase::h2d, s, cs, h.bytes(), {}, [&] { dma(d, packed, cudaMemcpyHostToDevice, cs); });
    });
  }

  void copy_to_host_async(const region& dst, const region& src, stream_id s) override {
    check_shapes("copy_to_host_async", dst, src);
    const cudaStream_t cs = native(s, "copy_to_host_async");
    nvtx_range range("oa d2h");
    if (pinned(dst))
      return timed(phase::d2h, s, cs, src.bytes(), {}, [&] { dma(dst, src, cudaMemcpyDeviceToHost, cs); });
    if (staging_usable()) return staging().copy_out(dst, src, s);
    std::byte* staging = stream_staging(s);
    oa::detail::for_each_piece(src, dst, opt_.staging_bytes, [&](const region& d, const region& h) {
      const region packed = h.packed_at(staging);
      timed(phase::d2h, s, cs, h.bytes(), {}, [&] { dma(packed, d, cudaMemcpyDeviceToHost, cs); });
      OA_CUDA_TRY(cudaLaunchHostFunc(cs, &staging_task::run, new staging_task{&pool_, h, packed}));
    });
  }

  // ---- launches ------------------------------------------------------------------
  void launch_async(launch k, stream_id s) override {
    const cudaStream_t cs = native(s, "launch_async");
    nvtx_range range(k.name.c_str());
    if (!k.kernel) {
      if (!k.entry) throw invalid_argument("cuda_device::launch_async", "k", "launch '" + k.name + "' has no entry");
      // The entry enqueues its work on the stream (kernels, cuBLAS): timed
      // around what it enqueued.
      timed(phase::compute, s, cs, 0, k.name, [&] { k.entry(stream_view{this, s}); });
      return;
    }
    const cudaKernel_t fn = kernel(*k.kernel);
    std::vector<void*> args;
    std::vector<std::uint64_t> values = k.kernel->args;  // launch copies the values; keep them alive until then
    for (auto& v : values) args.push_back(&v);
    timed(phase::compute, s, cs, 0, k.name, [&] {
      OA_CUDA_TRY(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(k.kernel->grid), dim3(k.kernel->block),
                                   args.data(), 0, cs));
      OA_CUDA_TRY(cudaPeekAtLastError());
    });
  }

  // ---- events and synchronisation ------------------------------------------------
  event record_event(stream_id s) override {
    const cudaStream_t cs = native(s, "record_event");
    auto e = std::make_shared<cuda_event>();
    e->stream = s;
    e->pool = sync_events_;
    e->e = sync_events_->take();
    OA_CUDA_TRY(cudaEventRecord(e->e, cs));
    return e;
  }

  void wait_event(stream_id s, const event& e) override {
    const cudaStream_t cs = native(s, "wait_event");
    OA_CUDA_TRY(cudaStreamWaitEvent(cs, as_cuda(e, "wait_event")->e, 0));
  }

  std::exception_ptr synchronize_event(const event& e) override {
    const cuda_event* ce = as_cuda(e, "synchronize_event");
    const cudaError_t r = cudaEventSynchronize(ce->e);
    if (r == cudaSuccess) return host_error(ce->stream, false);
    try {
      throw_cuda(r, "cudaEventSynchronize", __FILE__, __LINE__);
    } catch (const cuda_fault&) {
      lost();
      return std::current_exception();
    } catch (...) {
      return std::current_exception();
    }
  }

  void synchronize(stream_id s) override {
    const cudaError_t r = cudaStreamSynchronize(native(s, "synchronize"));
    if (r != cudaSuccess && is_sticky(r)) lost();
    OA_CUDA_TRY(r);
    if (std::exception_ptr e = host_error(s, true)) std::rethrow_exception(e);
  }

  void wait_idle() override {
    std::vector<cudaStream_t> all;
    {
      std::lock_guard lock(mutex_);
      for (const auto& st : streams_) all.push_back(st.stream);
    }
    for (cudaStream_t cs : all) OA_CUDA_TRY_NOTHROW(cudaStreamSynchronize(cs));
  }

  // ---- timeline ----------------------------------------------------------------------
  void set_recording(bool on) override {
    if (on) {
      // A fresh epoch: event times are float milliseconds since it (close
      // to it, for their precision), placed on the process clock at the
      // moment the host saw it complete.
      OA_CUDA_TRY(cudaEventRecord(epoch_, alloc_stream_));
      OA_CUDA_TRY(cudaEventSynchronize(epoch_));
    }
    const double seen = process_seconds(std::chrono::steady_clock::now());
    {
      std::lock_guard lock(mutex_);
      recording_ = on;
      if (on) epoch_seconds_ = seen;
    }
    std::lock_guard lock(staging_mutex_);
    if (staging_) staging_->record_spans(on, epoch_host_);
  }

  void prepare(const generated_kernel& k) override { (void)kernel(k); }

  // Pinning the stage's host arrays lets every chunk's copy be a direct DMA
  // at pinned speed, with no staging memcpy; memory the caller pinned stays
  // as it is. When pinning fails, copies go through the staging buffers.
  void host_memory_use(const void* p, std::size_t bytes) noexcept override {
    if (!opt_.register_host_memory || !p || bytes == 0 || pinned(region{static_cast<std::byte*>(const_cast<void*>(p)), bytes, 1, bytes})) return;
    const auto t0 = std::chrono::steady_clock::now();
    if (cudaHostRegister(const_cast<void*>(p), bytes, cudaHostRegisterDefault) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    const auto t1 = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    registered_.push_back(p);
    if (recording_) {
      pins_.push_back({phase::pin, -1, process_seconds(t0), process_seconds(t1), bytes, {}});
    }
  }
  void host_memory_done(const void* p) noexcept override {
    std::lock_guard lock(mutex_);
    auto it = std::find(registered_.begin(), registered_.end(), p);
    if (it == registered_.end()) return;
    OA_CUDA_TRY_NOTHROW(cudaHostUnregister(const_cast<void*>(p)));
    registered_.erase(it);
  }

  std::vector<op_record> take_records() override {
    std::vector<timed_op> ops;
    std::vector<op_record> out;
    double epoch_seconds = 0;
    {
      std::lock_guard lock(mutex_);
      ops.swap(ops_);
      out.swap(pins_);
      epoch_seconds = epoch_seconds_;
    }
    {
      std::lock_guard lock(staging_mutex_);
      if (staging_)
        for (op_record& r : staging_->take_spans()) out.push_back(std::move(r));
    }
    for (auto& op : ops) {
      float b = 0, e = 0;
      if (cudaEventSynchronize(op.end) == cudaSuccess && cudaEventElapsedTime(&b, epoch_, op.begin) == cudaSuccess &&
          cudaEventElapsedTime(&e, epoch_, op.end) == cudaSuccess)
        out.push_back({op.what, op.stream, epoch_seconds + b / 1e3, epoch_seconds + e / 1e3, op.bytes, op.label});
      release(op);
    }
    (void)cudaGetLastError();
    return out;
  }

  double now() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_host_).count();
  }

 private:
  static void check_shapes(const char* fn, const region& dst, const region& src) {
    if (dst.width != src.width || dst.rows != src.rows)
      throw invalid_argument(std::string("cuda_device::") + fn, "src",
                             "region of " + std::to_string(src.rows) + " x " + std::to_string(src.width) +
                                 " bytes copied to one of " + std::to_string(dst.rows) + " x " + std::to_string(dst.width));
  }

  // oa's pool or registered memory, else whatever the caller pinned with CUDA.
  static bool pinned(const region& r) {
    const std::size_t span = r.rows == 0 || r.width == 0 ? 0 : (r.rows - 1) * r.pitch + r.width;
    if (is_pinned(r.data, span)) return true;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, r.data) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return a.type == cudaMemoryTypeHost;
  }

  // ---- the staging engine's view of the streams ----------------------------------
  // Stream memory operations, and a pinned pool this GPU can address (its
  // words are waited on by the GPU): decided once; else host functions stage.
  bool staging_usable() {
    std::call_once(staging_checked_, [this] {
      if (!memops_.usable()) return;
      void* probe = nullptr;
      try {
        probe = oa::detail::staging_memory().allocate(64, 64);
      } catch (const std::bad_alloc&) {
        return;
      }
      void* d = nullptr;
      staging_usable_ = cudaHostGetDevicePointer(&d, probe, 0) == cudaSuccess;
      (void)cudaGetLastError();
      oa::detail::staging_memory().deallocate(probe, 64, 64);
    });
    return staging_usable_;
  }

  oa::detail::staging_engine& staging() {
    std::lock_guard lock(staging_mutex_);
    if (!staging_) {
      oa::detail::staging_options so;
      so.slot_bytes = opt_.staging_bytes;
      so.slots = 16;  // two in flight per thread (options::staging_bytes says why)
      so.fill_threads = so.drain_threads = copy_threads(opt_);
      staging_ = std::make_unique<oa::detail::staging_engine>(static_cast<staging_port&>(*this),
                                                                  oa::detail::staging_memory(), so);
      std::lock_guard rlock(mutex_);
      staging_->record_spans(recording_, epoch_host_);
    }
    return *staging_;
  }

  CUdeviceptr word_address(const oa::detail::flag_word& w) {
    void* d = nullptr;
    OA_CUDA_TRY(cudaHostGetDevicePointer(&d, const_cast<oa::detail::flag_word*>(&w), 0));
    return reinterpret_cast<CUdeviceptr>(d);
  }

  void check_memop(CUresult r, const char* call) {
    if (r == CUDA_SUCCESS) return;
    throw cuda_error(std::string("oa: ") + call + " failed: CUresult " + std::to_string(static_cast<int>(r)),
                     static_cast<int>(r));
  }

  void wait_value(stream_id s, const oa::detail::flag_word& w, std::uint32_t v) override {
    const auto cs = reinterpret_cast<CUstream>(native(s, "wait_value"));
    check_memop(memops_.wait(cs, word_address(w), v, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
  }
  // A CUDA stream stops at a failure for good: `failed` stays, and the
  // device aborts the staging engine when it sees the failure.
  void write_value(stream_id s, oa::detail::flag_word& w, std::uint32_t v, oa::detail::flag_word*) override {
    const auto cs = reinterpret_cast<CUstream>(native(s, "write_value"));
    check_memop(memops_.write(cs, word_address(w), v, 0), "cuStreamWriteValue32");
  }
  void dma(const region& dst, const region& src, phase dir, stream_id s) override {
    const cudaStream_t cs = native(s, "dma");
    const cudaMemcpyKind kind = dir == phase::h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    timed(dir, s, cs, src.bytes(), {}, [&] { dma(dst, src, kind, cs); });
  }
  void fail(stream_id s, std::exception_ptr e) noexcept override {
    std::lock_guard lock(mutex_);
    if (s >= 0 && static_cast<std::size_t>(s) < streams_.size() && !streams_[static_cast<std::size_t>(s)].host_error)
      streams_[static_cast<std::size_t>(s)].host_error = std::move(e);
  }
  void host_wrote(const oa::detail::flag_word&) noexcept override {}

  /// A failed fill or drain of stream s (taken when `take`).
  std::exception_ptr host_error(stream_id s, bool take) {
    std::lock_guard lock(mutex_);
    if (s < 0 || static_cast<std::size_t>(s) >= streams_.size()) return nullptr;
    auto& e = streams_[static_cast<std::size_t>(s)].host_error;
    return take ? std::exchange(e, nullptr) : e;
  }

  /// The context failed for good: its streams will set no word again.
  void lost() noexcept {
    std::lock_guard lock(staging_mutex_);
    if (staging_) staging_->abort();
  }

  static void dma(const region& dst, const region& src, cudaMemcpyKind kind, cudaStream_t cs) {
    if (dst.contiguous() && src.contiguous())
      OA_CUDA_TRY(cudaMemcpyAsync(dst.data, src.data, src.bytes(), kind, cs));
    else
      OA_CUDA_TRY(cudaMemcpy2DAsync(dst.data, dst.pitch, src.data, src.pitch, src.width, src.rows, kind, cs));
  }

  // Submits `work` on the stream, bracketed by timing events when recording.
  template <class F>
  void timed(phase what, stream_id s, cudaStream_t cs, std::size_t bytes, std::string label, F&& work) {
    bool rec;
    {
      std::lock_guard lock(mutex_);
      rec = recording_;
    }
    if (!rec) return work();
    timed_op op{what, s, timing_events_->take(), nullptr, bytes, std::move(label)};
    try {
      op.end = timing_events_->take();
    } catch (...) {
      timing_events_->give(op.begin);
      throw;
    }
    try {
      OA_CUDA_TRY(cudaEventRecord(op.begin, cs));
      work();  // an entry's error (a user's GPU function) gives the events back too
      OA_CUDA_TRY(cudaEventRecord(op.end, cs));
    } catch (...) {
      release(op);
      throw;
    }
    std::lock_guard lock(mutex_);
    ops_.push_back(std::move(op));
  }

  void release(timed_op& op) noexcept {
    timing_events_->give(op.begin);
    timing_events_->give(op.end);
  }

  static cuda_event* as_cuda(const event& e, const char* fn) {
    auto* c = dynamic_cast<cuda_event*>(e.get());
    if (!c) throw invalid_argument(std::string("cuda_device::") + fn, "e", "not an event of a CUDA device");
    return c;
  }

  // The compiled kernel for a generated source, compiled on first use.
  cudaKernel_t kernel(const generated_kernel& k) {
    std::lock_guard lock(compile_mutex_);
    if (auto it = kernels_.find(k.name); it != kernels_.end()) return it->second;
    oa::detail::kernel_source src;
    src.name = k.name;
    src.code = *k.source;
    compiled_kernel c = compile(src, props_.major, props_.minor);
    cudaLibrary_t lib = nullptr;
    // A cached CUBIN the driver refuses is compiled again and replaced.
    if (c.from_cache &&
        cudaLibraryLoadData(&lib, c.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      lib = nullptr;
      c = compile(src, props_.major, props_.minor, kernel_cache_use::refresh);
    }
    if (!lib) {
      OA_CUDA_TRY(cudaLibraryLoadData(&lib, c.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    }
    cudaKernel_t fn = nullptr;
    OA_CUDA_TRY(cudaLibraryGetKernel(&fn, lib, k.name.c_str()));
    libraries_.emplace(k.name, lib);
    kernels_.emplace(k.name, fn);
    return fn;
  }

  const options opt_;
  mutable std::once_flag rates_once_;
  mutable device_rates rates_;
  const stream_memops memops_ = stream_memops::load();
  cudaDeviceProp props_{};
  std::size_t budget_ = 0;
  cudaMemPool_t mem_pool_ = nullptr;
  cudaStream_t alloc_stream_ = nullptr;
  cudaEvent_t epoch_ = nullptr;
  detail::copy_pool pool_;
  std::chrono::steady_clock::time_point epoch_host_;

  mutable std::mutex mutex_;
  std::unordered_map<void*, std::size_t> allocations_;
  std::size_t in_use_ = 0, peak_ = 0;
  std::shared_ptr<event_pool> sync_events_ = std::make_shared<event_pool>(cudaEventDisableTiming);
  std::shared_ptr<event_pool> timing_events_ = std::make_shared<event_pool>(cudaEventDefault);
  std::function<bool(std::size_t)> oom_handler_;  // under mutex_
  std::vector<stream_state> streams_;
  bool recording_ = false;
  double epoch_seconds_ = 0;  // the epoch event on the process clock (under mutex_)
  std::vector<op_record> pins_;  // host memory pinned while recording (under mutex_)
  std::vector<timed_op> ops_;
  std::vector<const void*> registered_;

  std::once_flag staging_checked_;
  bool staging_usable_ = false;
  mutable std::mutex staging_mutex_;
  std::unique_ptr<oa::detail::staging_engine> staging_;  // made at the first pageable copy

  std::mutex compile_mutex_;
  std::map<std::string, cudaLibrary_t> libraries_;
  std::map<std::string, cudaKernel_t> kernels_;
};

cuda_device& as_cuda_device(device& dev, const char* fn) {
  auto* c = dynamic_cast<cuda_device*>(&dev);
  if (!c) throw invalid_argument(std::string("oa::cuda::") + fn, "dev", "not a CUDA device");
  return *c;
}

}  // namespace
}  // namespace detail

int usable_devices(std::string* why) {
  int n = 0;  // left untouched by cudaGetDeviceCount when there is no driver
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = detail::describe(e);
    (void)cudaGetLastError();
    return 0;
  }
  if (n <= 0 && why) *why = "no CUDA device";
  return std::max(n, 0);
}

std::unique_ptr<device> make_device(const options& opt) {
  std::string why;
  const int n = usable_devices(&why);
  if (n == 0) throw config_error("oa: device 'cuda': no usable GPU (" + why + ")");
  if (opt.ordinal < 0 || opt.ordinal >= n)
    throw config_error("oa: device 'cuda': GPU " + std::to_string(opt.ordinal) + " does not exist (" + std::to_string(n) +
                       " usable)");
  return std::make_unique<detail::cuda_device>(opt);
}

cublasHandle_t blas_handle(device& dev, stream_id s) { return detail::as_cuda_device(dev, "blas_handle").blas(s); }

cudaStream_t native_stream(device& dev, stream_id s) {
  return detail::as_cuda_device(dev, "native_stream").native(s, "native_stream");
}

cublasHandle_t blas_handle(const stream_view& s) {
  if (!s.dev) throw invalid_argument("oa::cuda::blas_handle", "s", "an empty stream view");
  return blas_handle(*s.dev, s.id);
}

cudaStream_t native_stream(const stream_view& s) {
  if (!s.dev) throw invalid_argument("oa::cuda::native_stream", "s", "an empty stream view");
  return native_stream(*s.dev, s.id);
}

}  // namespace oa::cuda
