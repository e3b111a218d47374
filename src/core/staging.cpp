#include "core/staging.hpp"

#include "oa/core/host_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "oa/core/backoff.hpp"
#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

constexpr std::size_t slot_alignment = 4096;  // page-aligned: what DMA engines copy fastest

/// Publishes `use` in `w` after the bytes a copy wrote: large memcpys use
/// non-temporal stores, which a release store does not order on x86 (a full
/// fence does), and a GPU reading the slot must see them.
void publish(flag_word& w, std::uint32_t use) noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  w.store(use, std::memory_order_release);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// --- workers ------------------------------------------------------------------

staging_engine::workers::workers(int n) {
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
}

staging_engine::workers::~workers() {
  {
    std::lock_guard lock(m_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void staging_engine::workers::push(std::function<void()> task) {
  {
    std::lock_guard lock(m_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void staging_engine::workers::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

// --- staging_engine -------------------------------------------------------------

staging_engine::staging_engine(staging_port& port, std::pmr::memory_resource& pinned, const staging_options& opt)
    : port_(port), pinned_(pinned), opt_(opt) {
  OA_EXPECTS(opt.slot_bytes >= 4096, "staging_engine", "opt.slot_bytes", "must be at least 4096");
  OA_EXPECTS(opt.slots >= 1 && opt.slots <= 1024, "staging_engine", "opt.slots", "must be 1-1024");
  OA_EXPECTS(opt.fill_threads >= 1 && opt.fill_threads <= 64, "staging_engine", "opt.fill_threads", "must be 1-64");
  OA_EXPECTS(opt.drain_threads >= 1 && opt.drain_threads <= 64, "staging_engine", "opt.drain_threads",
             "must be 1-64");
  const std::size_t slot_bytes = (opt.slot_bytes + slot_alignment - 1) / slot_alignment * slot_alignment;
  const std::size_t nslots = 2 * static_cast<std::size_t>(opt.slots);
  // Each word on a line of its own: a GPU writes them while threads poll others.
  const std::size_t words = 3 * nslots;
  memory_bytes_ = nslots * slot_bytes + words * 64;
  memory_ = static_cast<std::byte*>(pinned_.allocate(memory_bytes_, slot_alignment));
  std::byte* word_area = memory_ + nslots * slot_bytes;
  std::size_t w = 0;
  auto next_word = [&] { return new (word_area + 64 * w++) flag_word(0); };
  for (std::size_t i = 0; i < nslots; ++i) {
    slot sl;
    sl.data = memory_ + i * slot_bytes;
    sl.ready = next_word();
    sl.free = next_word();
    sl.failed = next_word();
    (i < nslots / 2 ? in_ : out_).push_back(sl);
  }
  fillers_ = std::make_unique<workers>(opt.fill_threads);
  drainers_ = std::make_unique<workers>(opt.drain_threads);
  faulters_ = std::make_unique<workers>(opt.prefault_threads > 0 ? opt.prefault_threads
                                                                 : std::max(1, opt.drain_threads / 2));
}

staging_engine::~staging_engine() {
  // Queued fills wait for slots that only the device frees: whoever destroys
  // the engine has waited for the device's streams (or the device is lost).
  faulters_.reset();
  drainers_.reset();
  fillers_.reset();
  pinned_.deallocate(memory_, memory_bytes_, slot_alignment);
}

bool staging_engine::wait_for(const flag_word& w, std::uint32_t v) const noexcept {
  // A slot usually frees within microseconds of its DMA: spin briefly, then
  // back off to sleeps of at most 100 us.
  backoff wait({.spins = 64, .yields = 64, .first = std::chrono::microseconds(2), .most = std::chrono::microseconds(100)});
  while (!reached(w.load(std::memory_order_acquire), v)) {
    if (aborted_.load(std::memory_order_relaxed)) return false;
    wait.pause();
  }
  return true;
}

namespace {
const std::byte* end_of(const region& r) noexcept {
  return r.rows == 0 || r.width == 0 ? r.data : r.data + (r.rows - 1) * r.pitch + r.width;
}
}  // namespace

void staging_engine::forget_drained() {
  std::erase_if(draining_, [](const pending_drain& d) { return reached(d.sl->free->load(std::memory_order_acquire), d.use); });
}

std::vector<staging_engine::pending_drain> staging_engine::drains_into(const region& host) {
  forget_drained();
  std::vector<pending_drain> overlapping;
  const std::byte *begin = host.data, *end = end_of(host);
  for (const auto& d : draining_)
    if (d.begin < end && begin < d.end) overlapping.push_back(d);
  return overlapping;
}

void staging_engine::fill(const slot& sl, std::uint32_t use, region packed, region host, stream_id s,
                          const std::vector<pending_drain>& after) {
  bool free = true;
  for (const auto& d : after) free = free && wait_for(*d.sl->free, d.use);
  free = free && wait_for(*sl.free, use - 1);
  const auto t0 = std::chrono::steady_clock::now();
  if (free) {
    if (fills_.fetch_add(1) + 1 == opt_.fail_fill)
      port_.fail(s, std::make_exception_ptr(device_fault(
                        "oa: staging engine: injected fault in fill #" + std::to_string(opt_.fail_fill), false)));
    else
      copy_region(packed, host);
  }
  account(phase::fill, s, t0, free ? host.bytes() : 0);  // before the stream can see it done
  publish(*sl.ready, use);
  port_.host_wrote(*sl.ready);
}

void staging_engine::drain(const slot& sl, std::uint32_t use, region host, region packed, stream_id s) {
  // A DMA that failed (or was skipped after an earlier failure of its
  // stream) left nothing to drain: the host's bytes stay as they were.
  const bool landed = wait_for(*sl.ready, use) && sl.failed->load(std::memory_order_acquire) != use;
  const auto t0 = std::chrono::steady_clock::now();
  if (landed) {
    if (drains_.fetch_add(1) + 1 == opt_.fail_drain)
      port_.fail(s, std::make_exception_ptr(device_fault(
                        "oa: staging engine: injected fault in drain #" + std::to_string(opt_.fail_drain), false)));
    else
      copy_region(host, packed);
  }
  account(phase::drain, s, t0, landed ? host.bytes() : 0);  // before the stream can see it done
  drained_.fetch_add(1, std::memory_order_release);
  publish(*sl.free, use);
  port_.host_wrote(*sl.free);
}

void staging_engine::account(phase what, stream_id s, std::chrono::steady_clock::time_point t0, std::size_t bytes) {
  const double busy = seconds_since(t0);
  std::lock_guard lock(stats_m_);
  (what == phase::fill ? stats_.fill_seconds : what == phase::drain ? stats_.drain_seconds : stats_.prefault_seconds) +=
      busy;
  if (!recording_ || bytes == 0) return;
  const double begin = std::chrono::duration<double>(t0 - epoch_).count();
  spans_.push_back({what, s, begin, begin + busy, bytes, {}});
}

void staging_engine::record_spans(bool on, std::chrono::steady_clock::time_point epoch) {
  std::lock_guard lock(stats_m_);
  recording_ = on;
  epoch_ = epoch;
}

std::vector<op_record> staging_engine::take_spans() {
  std::lock_guard lock(stats_m_);
  return std::exchange(spans_, {});
}

void staging_engine::skip(workers& w, const slot& sl, std::uint32_t use) noexcept {
  // A use whose submission failed part way: its words still advance, after
  // the slot's previous use, so that neither a stream nor a later use of the
  // slot waits for it forever.
  try {
    w.push([this, &sl, use] {
      (void)wait_for(*sl.free, use - 1);
      sl.ready->store(use, std::memory_order_release);
      sl.free->store(use, std::memory_order_release);
      port_.host_wrote(*sl.ready);
      port_.host_wrote(*sl.free);
    });
  } catch (...) {
    // Out of memory queueing it: the words advance here, out of order at worst.
    sl.ready->store(use, std::memory_order_release);
    sl.free->store(use, std::memory_order_release);
  }
}

void staging_engine::copy_in(const region& dst, const region& src, stream_id s) {
  std::lock_guard lock(m_);
  for_each_piece(dst, src, opt_.slot_bytes, [&](const region& d, const region& h) {
    slot& sl = in_[next_in_++ % in_.size()];
    const std::uint32_t use = ++sl.uses;
    const region packed = h.packed_at(sl.data);
    try {
      port_.wait_value(s, *sl.ready, use);
      port_.dma(d, packed, phase::h2d, s);
      port_.write_value(s, *sl.free, use);
    } catch (...) {
      skip(*fillers_, sl, use);
      throw;
    }
    fillers_->push([this, &sl, use, packed, h, s, after = drains_into(h)] { fill(sl, use, packed, h, s, after); });
  });
  std::lock_guard slock(stats_m_);
  stats_.bytes_in += src.bytes();
}

double staging_thread_rate() noexcept {
  static const double rate = [] {
    try {
      constexpr std::size_t bytes = std::size_t{4} << 20;
      std::vector<std::byte> from(bytes, std::byte{1}), to(bytes, std::byte{0});
      double best = 0;
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(to.data(), from.data(), bytes);
        const double s = seconds_since(t0);
        if (s > 0) best = std::max(best, static_cast<double>(bytes) / s);
      }
      return best;
    } catch (...) {
      return 0.0;
    }
  }();
  return rate;
}

void staging_engine::prefault(std::uintptr_t first, std::uintptr_t end, std::uint64_t last_drain) {
  // Once the copy's drains have run (and the stage may have ended and freed
  // the memory), faulting it in helps nobody.
  if (drained_.load(std::memory_order_acquire) >= last_drain) return;
  const auto t0 = std::chrono::steady_clock::now();
  // Best effort: a kernel without MADV_POPULATE_WRITE leaves the faults to
  // the drain. Pages already there (written, or faulted in) are left as
  // they are: no byte changes.
  (void)madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE);
  account(phase::prefault, -1, t0, end - first);
}

void staging_engine::prefault_ahead(const region& dst, std::uint64_t last_drain) {
  // Small destinations fault in as fast as the drain would; large ones go to
  // the faulting threads in pieces, in drain order, so several work at once.
  constexpr std::uintptr_t piece = std::uintptr_t{8} << 20;
  if (dst.bytes() < (std::size_t{1} << 20)) return;
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(dst.data) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(dst.data) + (dst.rows - 1) * dst.pitch + dst.width;
  // Fresh pages as transparent huge pages where the system grants them on
  // request (THP "madvise", the common default): one fault per 2 MiB,
  // populated about twice as fast per thread (H100 node, staging probe:
  // 3.5 against 1.7 GB/s) and freed ten times faster. Asked once, here,
  // while the destination is surely the caller's, and only for the whole
  // 2 MiB blocks inside it: no byte outside is committed, and its mapping
  // splits at two places at most.
  advise_huge_pages(first, end);
  for (std::uintptr_t a = first; a < end; a += piece)
    faulters_->push([this, a, b = std::min(end, a + piece), last_drain] { prefault(a, b, last_drain); });
}

void staging_engine::copy_out(const region& dst, const region& src, stream_id s) {
  std::lock_guard lock(m_);
  forget_drained();
  // The stream waits for the pieces' drains once, after the last DMA: a
  // piece's DMA waits only for its own slot, so the drains of one copy run
  // on several threads at once while later pieces cross the link.
  std::vector<std::pair<slot*, std::uint32_t>> queued;
  const auto wait_drained = [&] {
    for (const auto& [sl, use] : queued) port_.wait_value(s, *sl->free, use);  // later work sees the host bytes
  };
  try {
    for_each_piece(src, dst, opt_.slot_bytes, [&](const region& d, const region& h) {
      slot& sl = out_[next_out_++ % out_.size()];
      const std::uint32_t use = ++sl.uses;
      const region packed = h.packed_at(sl.data);
      try {
        port_.wait_value(s, *sl.free, use - 1);  // the slot's previous drain is done
        port_.dma(packed, d, phase::d2h, s);
        port_.write_value(s, *sl.ready, use, sl.failed);
      } catch (...) {
        skip(*drainers_, sl, use);
        throw;
      }
      queued.emplace_back(&sl, use);  // first: a drain queued is always waited for
      try {
        drainers_->push([this, &sl, use, h, packed, s] { drain(sl, use, h, packed, s); });
      } catch (...) {
        queued.pop_back();
        skip(*drainers_, sl, use);  // the slot's words still advance: no later use waits forever
        throw;
      }
      ++queued_drains_;
      draining_.push_back({h.data, end_of(h), &sl, use});
    });
  } catch (...) {
    // The pieces queued before the failure still drain: the stream's later
    // work (a synchronize before the caller frees anything) waits for them.
    try {
      wait_drained();
    } catch (...) {
    }
    throw;
  }
  wait_drained();
  prefault_ahead(dst, queued_drains_);
  std::lock_guard slock(stats_m_);
  stats_.bytes_out += src.bytes();
}

void staging_engine::abort() noexcept { aborted_.store(true); }

staging_stats staging_engine::stats() const {
  std::lock_guard lock(stats_m_);
  return stats_;
}

}  // namespace oa::detail
