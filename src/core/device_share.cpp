#include "core/device_share.hpp"

#include <algorithm>

#include "oa/core/error.hpp"

namespace oa::detail {

void shared_device::begin_recording() {
  std::lock_guard lock(mutex_);
  // The first share starts the device's timeline; later ones join it (its
  // epoch stays, so every share's records are on one clock).
  if (recording_++ > 0) return;
  whole_.set_recording(true);
  (void)whole_.take_records();
  pending_.clear();
}

std::vector<op_record> shared_device::take(const std::set<stream_id>& streams) {
  std::lock_guard lock(mutex_);
  if (recording_ == 0) return {};
  std::vector<op_record> now = whole_.take_records();
  pending_.insert(pending_.end(), std::make_move_iterator(now.begin()), std::make_move_iterator(now.end()));
  std::vector<op_record> mine;
  const auto it = std::stable_partition(pending_.begin(), pending_.end(), [&](const op_record& r) {
    return !(r.stream < 0 || streams.count(r.stream) > 0);
  });
  mine.assign(std::make_move_iterator(it), std::make_move_iterator(pending_.end()));
  pending_.erase(it, pending_.end());
  return mine;
}

void shared_device::end_recording() noexcept {
  std::lock_guard lock(mutex_);
  if (recording_ == 0 || --recording_ > 0) return;
  pending_.clear();
  whole_.set_recording(false);
}

void shared_device::use_host_memory(const void* p, std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  if (pins_.insert(p).second) whole_.host_memory_use(p, bytes);
}

void shared_device::host_memory_done(const void*) noexcept {
  // Nothing is unpinned while shares run: another's copies may use the same
  // memory through a pointer of its own (an overlapping block).
}

shared_device::~shared_device() {
  for (const void* p : pins_) whole_.host_memory_done(p);
}

device_share::~device_share() {
  if (recording_) shared_.end_recording();
}

std::size_t device_share::charge(std::size_t bytes) const noexcept {
  const std::size_t g = std::max<std::size_t>(1, whole_.allocation_granularity());
  return bytes / g * g + (bytes % g ? g : 0);
}

std::size_t device_share::bytes_in_use() const noexcept {
  std::lock_guard lock(mutex_);
  return in_use_;
}

std::size_t device_share::peak_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return peak_;
}

void device_share::reset_peak() noexcept {
  std::lock_guard lock(mutex_);
  peak_ = in_use_;
}

void device_share::reserve(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t c = charge(bytes);
  if (c > budget_ - std::min(in_use_, budget_)) throw device_out_of_memory(name(), bytes, in_use_, budget_);
  in_use_ += c;
  peak_ = std::max(peak_, in_use_);
}

void* device_share::allocate(std::size_t bytes) {
  reserve(bytes);
  try {
    return whole_.allocate(bytes);
  } catch (...) {
    deallocate(nullptr, bytes);
    throw;
  }
}

void* device_share::allocate_on(std::size_t bytes, stream_id s) {
  reserve(bytes);
  try {
    return whole_.allocate_on(bytes, s);
  } catch (...) {
    deallocate(nullptr, bytes);
    throw;
  }
}

void device_share::deallocate(void* p, std::size_t bytes) noexcept {
  if (p) whole_.deallocate(p, bytes);
  std::lock_guard lock(mutex_);
  in_use_ -= std::min(in_use_, charge(bytes));
}

stream_id device_share::create_stream() {
  const stream_id s = whole_.create_stream();
  std::lock_guard lock(mutex_);
  streams_.insert(s);
  return s;
}

void device_share::destroy_stream(stream_id s) noexcept {
  {
    std::lock_guard lock(mutex_);
    streams_.erase(s);
    if (recording_) {
      try {
        std::vector<op_record> r = shared_.take({s});
        records_.insert(records_.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
      } catch (...) {
        // Records are for the report; the stream goes all the same.
      }
    }
  }
  whole_.destroy_stream(s);
}

void device_share::wait_idle() {
  std::set<stream_id> mine;
  {
    std::lock_guard lock(mutex_);
    mine = streams_;
  }
  // Errors stay on their streams, as the whole device's wait_idle leaves
  // them, and nothing throws: a device that cannot record an event (lost)
  // is waited for whole, so that no memory queued work may touch is freed.
  try {
    for (stream_id s : mine) (void)whole_.synchronize_event(whole_.record_event(s));
  } catch (...) {
    try {
      whole_.wait_idle();
    } catch (...) {
    }
  }
}

void device_share::set_recording(bool on) {
  std::lock_guard lock(mutex_);
  if (on == recording_) return;
  records_.clear();
  if (on)
    shared_.begin_recording();  // first: when it throws, this share is not counted as recording
  else
    shared_.end_recording();
  recording_ = on;
}

std::vector<op_record> device_share::take_records() {
  std::lock_guard lock(mutex_);
  std::vector<op_record> out = std::move(records_);
  records_.clear();
  std::vector<op_record> now = shared_.take(streams_);
  out.insert(out.end(), std::make_move_iterator(now.begin()), std::make_move_iterator(now.end()));
  return out;
}

}  // namespace oa::detail
