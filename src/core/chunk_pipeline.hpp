#pragma once
// The chunk pipeline: one stage's chunks over a device's streams. Each slot
// (a stream and the device memory its chunks use) takes chunks in turn;
// for each, the copies in, the launch and the copies out are queued on the
// slot's stream, and the slot's previous chunk is checked before it is used
// again. What the chunks came to is an outcome value: chunks the device
// faulted on (to run again on the host), a call's error (the stage fails),
// or the device lost.

#include <cstddef>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/chunk_feed.hpp"
#include "core/executor.hpp"
#include "core/stage_plan.hpp"
#include "core/undo_log.hpp"
#include "oa/core/device.hpp"
#include "oa/core/memory.hpp"

namespace oa::detail {

/// One pipeline slot: its stream and the device memory its chunks use. The
/// stream is declared last, so it goes first, after its work: the memory is
/// freed only once nothing queued can touch it.
struct slot {
  std::vector<device_buffer> memory;  // the layout's buffers, then the reduction partials
  std::vector<std::byte*> buffers;    // their addresses, per layout buffer
  std::byte* partials = nullptr;
  oa::stream stream;

  void release() noexcept {
    stream.reset();
    buffers.clear();
    partials = nullptr;
    memory.clear();
  }
};

/// The slots of a stage, released on every path (each after its work).
struct slots_guard {
  std::vector<slot> slots;
  void assign(std::size_t n) {
    slots.clear();
    slots.resize(n);
  }
};

/// Host memory offered to the device for a stage, handed back at its end.
struct host_memory_guard {
  device& dev;
  std::vector<const void*> used;
  ~host_memory_guard() {
    for (const void* p : used) dev.host_memory_done(p);
  }
};

/// A slot's stream, then its memory, allocated in that stream's order.
void allocate_slot(device& dev, slot& s, const stage_layout& L, std::size_t chunk_units,
                   std::size_t device_partial_bytes);

/// What a stage's chunks came to on its device.
struct pipeline_outcome {
  std::vector<std::size_t> faulted;  // chunks to run again on the host, in any order
  std::exception_ptr stage_error;    // an error of a call: the stage fails
  std::exception_ptr lost;           // the device refused work: it is lost, later stages run on the host
  std::size_t completed = 0;         // chunks the device ran
};

/// A stage's whole copies (stage_plan::whole): per value, its device copy
/// (empty where none) and the host storage it copies.
struct whole_copies {
  std::vector<device_buffer> copies;
  std::vector<region> host;
};

class chunk_pipeline {
 public:
  /// `updates`: (old, new) value indices of in-place updates, in call order.
  chunk_pipeline(const stage& s, const std::vector<call_node>& nodes, const stage_plan& plan, device& dev,
                 const run_options& opt, whole_copies& whole,
                 const std::vector<std::pair<std::size_t, std::size_t>>& updates, undo_log& undo);
  chunk_pipeline(const chunk_pipeline&) = delete;
  chunk_pipeline& operator=(const chunk_pipeline&) = delete;

  /// Allocates the slots: while the device runs out of memory, smaller
  /// chunks then fewer slots, or with `fixed_chunks` (chunks shared with
  /// other devices) fewer slots only. Throws oa::plan_error when not even
  /// one slot fits; a device fault loses the device (`out.lost`).
  void allocate(pipeline_outcome& out, bool fixed_chunks);
  /// Queues the chunks `feed` gives device `d` and waits for them.
  /// Afterwards the device is idle and the slots' memory is back; `rep` has
  /// the bytes read from resident copies and the device's peak.
  void run(chunk_feed& feed, int d, pipeline_outcome& out, stage_report& rep);

  std::size_t chunk_units() const noexcept { return chunks_.chunk_units; }
  int slots() const noexcept { return allocated_; }  // slots the stage ran on

 private:
  void submit(chunk_feed& feed, std::size_t i, std::size_t on, stage_report& rep);
  void check(chunk_feed& feed, int d, std::size_t j, pipeline_outcome& out);
  region in_whole(std::size_t k, const region& host_chunk) const;

  const stage& s_;
  const std::vector<call_node>& nodes_;
  const stage_plan& plan_;
  device& dev_;
  const run_options& opt_;
  whole_copies& whole_;
  const std::vector<std::pair<std::size_t, std::size_t>>& updates_;
  undo_log& undo_;
  chunk_plan chunks_;  // smaller than planned when the device runs out of memory
  int nslots_;
  int allocated_ = 0;
  std::string launch_name_;
  // Everything queued work may touch is declared before the slots, whose
  // destruction waits for their streams: on every path, errors included, it
  // is freed only after the device is done with it.
  std::deque<std::pair<std::size_t, event>> queued_;  // chunks queued and not yet checked, oldest first
  std::vector<event> checked_;                         // kept until the pipeline ends
  std::vector<std::size_t> slot_of_;                    // per chunk of the stage
  host_memory_guard pinned_;  // outlives the slots: unpinned after their work is done
  slots_guard guard_;
};

}  // namespace oa::detail
