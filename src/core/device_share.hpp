#pragma once
// A share of one device, for a stage that runs beside others on it (the DAG
// on streams): the stage sees a device with a budget of its own, its own
// streams, and its own records, while every copy and kernel goes to the
// whole device. Stages given shares of one device run side by side on its
// streams and its link, each planned for the memory its share holds.

#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "oa/core/device.hpp"

namespace oa::detail {

/// What the shares of one device have in common: its recording (begun by the
/// first share, the records sorted to each by stream) and the host memory
/// the shares ask it to pin (pinned until every share has ended: this
/// object goes after them).
class shared_device {
 public:
  explicit shared_device(device& whole) : whole_(whole) {}
  shared_device(const shared_device&) = delete;
  shared_device& operator=(const shared_device&) = delete;
  ~shared_device();
  device& whole() noexcept { return whole_; }

  void begin_recording();
  /// The records of `streams` since recording began (those on no stream go
  /// to the first share that asks).
  std::vector<op_record> take(const std::set<stream_id>& streams);
  void end_recording() noexcept;

  void use_host_memory(const void* p, std::size_t bytes) noexcept;
  void host_memory_done(const void* p) noexcept;

 private:
  device& whole_;
  std::mutex mutex_;
  int recording_ = 0;                // shares recording now
  std::vector<op_record> pending_;   // taken from the device, not yet by their share
  std::unordered_set<const void*> pins_;
};

class device_share final : public device {
 public:
  device_share(shared_device& shared, std::size_t budget) : shared_(shared), whole_(shared.whole()), budget_(budget) {}
  ~device_share() override;

  device_kind kind() const noexcept override { return whole_.kind(); }
  std::string name() const override { return whole_.name(); }
  bool host_accessible() const noexcept override { return whole_.host_accessible(); }
  int preferred_streams() const noexcept override { return whole_.preferred_streams(); }
  device_rates rates() const noexcept override { return whole_.rates(); }
  bool compiles_kernels() const noexcept override { return whole_.compiles_kernels(); }
  bool runs_device_functions() const noexcept override { return whole_.runs_device_functions(); }
  void prepare(const generated_kernel& k) override { whole_.prepare(k); }
  std::size_t staged_bytes() const noexcept override { return whole_.staged_bytes(); }
  void host_memory_use(const void* p, std::size_t bytes) noexcept override { shared_.use_host_memory(p, bytes); }
  void host_memory_done(const void* p) noexcept override { shared_.host_memory_done(p); }

  /// The share's budget; its allocations are counted against it (and go to
  /// the whole device, whose budget holds every share).
  std::size_t memory_budget() const noexcept override { return budget_; }
  std::size_t bytes_in_use() const noexcept override;
  std::size_t peak_bytes() const noexcept override;
  void reset_peak() noexcept override;
  std::size_t allocation_granularity() const noexcept override { return whole_.allocation_granularity(); }
  void* allocate(std::size_t bytes) override;
  void* allocate_on(std::size_t bytes, stream_id s) override;
  void deallocate(void* p, std::size_t bytes) noexcept override;
  /// A share has no pager of its own: past its budget its stage takes
  /// smaller chunks, as on a device whose memory is full (the whole
  /// device's pager is paused while shares run: residency::paused_pager).
  void set_out_of_memory_handler(std::function<bool(std::size_t)>) override {}

  stream_id create_stream() override;
  void destroy_stream(stream_id s) noexcept override;
  void copy_to_device_async(const region& dst, const region& src, stream_id s) override {
    whole_.copy_to_device_async(dst, src, s);
  }
  void copy_to_host_async(const region& dst, const region& src, stream_id s) override {
    whole_.copy_to_host_async(dst, src, s);
  }
  void launch_async(launch k, stream_id s) override { whole_.launch_async(std::move(k), s); }
  event record_event(stream_id s) override { return whole_.record_event(s); }
  void wait_event(stream_id s, const event& e) override { whole_.wait_event(s, e); }
  std::exception_ptr synchronize_event(const event& e) override { return whole_.synchronize_event(e); }
  void synchronize(stream_id s) override { whole_.synchronize(s); }
  /// Waits for the share's own streams (the others' stages go on).
  void wait_idle() override;

  void set_recording(bool on) override;
  std::vector<op_record> take_records() override;
  double now() const override { return whole_.now(); }

 private:
  std::size_t charge(std::size_t bytes) const noexcept;
  void reserve(std::size_t bytes);

  shared_device& shared_;
  device& whole_;
  const std::size_t budget_;
  mutable std::mutex mutex_;
  std::size_t in_use_ = 0, peak_ = 0;
  std::set<stream_id> streams_;  // live streams
  // Records of streams destroyed since the last take: taken from the device
  // before it may give the stream's id to another share.
  std::vector<op_record> records_;
  bool recording_ = false;
};

}  // namespace oa::detail
