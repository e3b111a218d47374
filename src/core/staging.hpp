#pragma once
// The staging engine: pageable host memory crosses the link through a ring of
// pinned slots per direction, filled and drained by the engine's own threads
// ahead of the streams, as a GPU's DMA reads and writes pinned memory only.
//
// Copy in, a piece of up to one slot:  a fill thread copies the host bytes
// into the slot as soon as the slot is free (at submission: the bytes must be
// ready when the copy is asked for, as CUDA reads pageable memory for
// cudaMemcpyAsync), then sets the slot's `ready` word; the stream waits for
// that word, DMAs the slot to the device and sets the slot's `free` word.
// Copy out: the stream waits until the slot's previous drain is done, DMAs
// into it and sets `ready`; a drain thread copies the slot to the host and
// sets `free`. After the copy's last piece the stream waits for every
// piece's `free`, so whatever follows the copy on the stream (an event, a
// synchronize) sees the host bytes, while the pieces of one copy drain on
// several threads at once (waiting after each piece made them one at a
// time: on an H100 the drains of a GEMM's C tiles were its critical path). The
// destination's pages are faulted in at submission by a thread of their own
// (MADV_POPULATE_WRITE: no byte written, so it may race with the drain), so
// that a drain into memory never touched before (a result made for the
// stage) copies at the rate of touched memory, not a tenth of it.
//
// A fill reads the host bytes when it runs, not in stream order: where an
// earlier copy out still has to drain into bytes a copy in reads (a result
// written back, then read again), the fill waits for that drain first.
//
// No host function is on the data path: the stream and the engine's threads
// meet only through the words, which a GPU's stream memory operations wait on
// and write. Each word only grows (one value per use of its slot), so a wait
// is "at least this use".
//
// No deadlock: every wait, a stream's or a thread's, is for work submitted
// before the waiting work; the engine's threads take their queue in
// submission order (fills and drains apart, so that a fill waiting for a slot
// never keeps a drain from running), and the device runs each stream in
// order: the earliest unfinished piece can always proceed.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <thread>
#include <vector>

#include "oa/core/device.hpp"

namespace oa::detail {

/// A word streams and host threads signal each other through: it lives in
/// pinned memory, where a GPU's stream memory operations can wait on it and
/// write it.
using flag_word = std::atomic<std::uint32_t>;

/// Whether `have` has reached `want`, across the 32-bit wrap (as CUDA's
/// CU_STREAM_WAIT_VALUE_GEQ compares).
constexpr bool reached(std::uint32_t have, std::uint32_t want) noexcept {
  return static_cast<std::int32_t>(have - want) >= 0;
}

/// Cuts a copy between a device region and a host region into pieces of at
/// most `cap` bytes: whole rows when they fit, else parts of a row.
/// f(device piece, host piece).
template <class F>
void for_each_piece(const region& dev_side, const region& host_side, std::size_t cap, F&& f) {
  const std::size_t w = host_side.width;
  if (w == 0 || host_side.rows == 0) return;
  if (w <= cap) {
    const std::size_t per = cap / w;
    for (std::size_t r0 = 0; r0 < host_side.rows; r0 += per) {
      const std::size_t n = per < host_side.rows - r0 ? per : host_side.rows - r0;
      f(region{dev_side.data + r0 * dev_side.pitch, w, n, dev_side.pitch},
        region{host_side.data + r0 * host_side.pitch, w, n, host_side.pitch});
    }
    return;
  }
  for (std::size_t r = 0; r < host_side.rows; ++r)
    for (std::size_t b = 0; b < w; b += cap) {
      const std::size_t n = cap < w - b ? cap : w - b;
      f(region{dev_side.data + r * dev_side.pitch + b, n, 1, n}, region{host_side.data + r * host_side.pitch + b, n, 1, n});
    }
}

/// What the engine asks of a device's streams.
class staging_port {
 public:
  /// Stream s's later work waits until `w` has reached `v`.
  virtual void wait_value(stream_id s, const flag_word& w, std::uint32_t v) = 0;
  /// Once stream s's earlier work has run, or failed, `w` = v; when it
  /// failed and `failed` is given, `*failed` = v first (a device that cannot
  /// tell leaves it: its failures are sticky, and abort() follows).
  virtual void write_value(stream_id s, flag_word& w, std::uint32_t v, flag_word* failed = nullptr) = 0;
  /// A direct copy between pinned host memory and device memory, in stream order.
  virtual void dma(const region& dst, const region& src, phase dir, stream_id s) = 0;
  /// A fill or drain of stream s failed: its later work must fail with `e`
  /// (called before the word the stream waits for is set).
  virtual void fail(stream_id s, std::exception_ptr e) noexcept = 0;
  /// A host thread set `w` (a device polling it may wake its waiters).
  virtual void host_wrote(const flag_word& w) noexcept = 0;

 protected:
  ~staging_port() = default;
};

struct staging_options {
  std::size_t slot_bytes = std::size_t{32} << 20;
  int slots = 8;          // per direction
  int fill_threads = 2;   // copy-in threads
  int drain_threads = 2;  // copy-out threads
  int prefault_threads = 0;  // threads faulting in drains' destinations ahead of them; 0: half the drain threads
  // Fault injection: the Nth fill or drain (from 1) fails; 0: none.
  std::uint64_t fail_fill = 0;
  std::uint64_t fail_drain = 0;
};

/// What the engine moved, for reports.
struct staging_stats {
  std::size_t bytes_in = 0;   // staged host-to-device
  std::size_t bytes_out = 0;  // staged device-to-host
  double fill_seconds = 0;    // summed over the fill threads
  double drain_seconds = 0;
  double prefault_seconds = 0;  // faulting destinations in, ahead of the drains
};

/// One thread's memcpy rate between touched host buffers (bytes per
/// second, best of three 4 MiB copies): what a fill or drain thread moves,
/// for the planner's time model. Measured once per process; 0 on failure.
double staging_thread_rate() noexcept;

class staging_engine {
 public:
  /// Slots and words come from `pinned` (kept until the engine goes).
  staging_engine(staging_port& port, std::pmr::memory_resource& pinned, const staging_options& opt);
  /// Waits for the queued fills and drains.
  ~staging_engine();
  staging_engine(const staging_engine&) = delete;
  staging_engine& operator=(const staging_engine&) = delete;

  /// Copies host `src` (pageable) to device `dst` on stream s.
  void copy_in(const region& dst, const region& src, stream_id s);
  /// Copies device `src` to host `dst` (pageable) on stream s.
  void copy_out(const region& dst, const region& src, stream_id s);
  /// The device is lost (its streams will never set the words again): the
  /// threads stop waiting, and queued fills and drains end without copying.
  void abort() noexcept;

  staging_stats stats() const;
  const staging_options& options() const noexcept { return opt_; }

  /// From now on, keeps each fill, drain and prefault as a span (seconds
  /// since `epoch`, the device's timeline) until take_spans; off: none.
  void record_spans(bool on, std::chrono::steady_clock::time_point epoch);
  std::vector<op_record> take_spans();

 private:
  struct slot {
    std::byte* data = nullptr;
    flag_word* ready = nullptr;  // in: filled (use); out: landed (use)
    flag_word* free = nullptr;   // in: read by the DMA (use); out: drained (use)
    flag_word* failed = nullptr; // out: the use whose DMA failed or was skipped: nothing to drain
    std::uint32_t uses = 0;      // handed out so far (under m_)
  };
  /// Threads running tasks one at a time each, taken in queue order.
  class workers {
   public:
    explicit workers(int n);
    ~workers();
    void push(std::function<void()> task);

   private:
    void loop();
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
  };

  /// Waits on a host thread until `w` reaches `v`; false when aborted.
  bool wait_for(const flag_word& w, std::uint32_t v) const noexcept;
  /// A slot's use, waited for by a fill reading what its drain writes.
  struct pending_drain {
    const std::byte* begin;
    const std::byte* end;
    const slot* sl;
    std::uint32_t use;
  };
  /// The drains not yet done that write into `host` (under m_).
  std::vector<pending_drain> drains_into(const region& host);
  void forget_drained();
  void fill(const slot& sl, std::uint32_t use, region packed, region host, stream_id s,
            const std::vector<pending_drain>& after);
  void drain(const slot& sl, std::uint32_t use, region host, region packed, stream_id s);
  void skip(workers& w, const slot& sl, std::uint32_t use) noexcept;
  /// Faults [first, end) in unless drain number `last_drain` (the copy's
  /// last) has already run.
  void prefault(std::uintptr_t first, std::uintptr_t end, std::uint64_t last_drain);
  void prefault_ahead(const region& dst, std::uint64_t last_drain);

  staging_port& port_;
  std::pmr::memory_resource& pinned_;
  const staging_options opt_;
  std::byte* memory_ = nullptr;  // every slot, then every word
  std::size_t memory_bytes_ = 0;
  std::vector<slot> in_, out_;
  std::mutex m_;  // submission: slot turns, task order, stats
  std::size_t next_in_ = 0, next_out_ = 0;
  std::vector<pending_drain> draining_;  // copies out submitted, maybe not drained yet
  std::atomic<bool> aborted_{false};
  std::atomic<std::uint64_t> fills_{0}, drains_{0};
  std::uint64_t queued_drains_ = 0;        // drain tasks queued (under m_)
  std::atomic<std::uint64_t> drained_{0};  // drain tasks run
  mutable std::mutex stats_m_;  // stats_, and the spans below
  bool recording_ = false;
  std::chrono::steady_clock::time_point epoch_;
  std::vector<op_record> spans_;
  /// Adds the busy time since t0 to the stats and, while recording, a span
  /// of `bytes` (none when 0: nothing was copied).
  void account(phase what, stream_id s, std::chrono::steady_clock::time_point t0, std::size_t bytes);
  staging_stats stats_;
  // Last: their threads start once everything above exists, and stop first.
  std::unique_ptr<workers> fillers_, drainers_, faulters_;
};

}  // namespace oa::detail
