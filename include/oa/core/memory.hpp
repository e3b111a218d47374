#pragma once
// Where device memory comes from: a small resource interface and adaptors
// that each add one concern, stacked by a device:
//
//   retry_on_failure   on out-of-memory, asks a handler (the pager) to free
//     |                memory, and tries again while it frees some
//   statistics         bytes in use and the peak
//     |
//   limit              refuses past a budget, counting each allocation
//     |                rounded up to a granularity (as the planner counts)
//   host_memory        aligned host memory (the host and emulated devices)
//
// Allocations are for work on a stream (stream-ordered resources may use
// it; these do not need to). Every resource is thread-safe.

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "oa/core/device.hpp"

namespace oa {

class memory_resource {
 public:
  virtual ~memory_resource() = default;
  /// Memory for work on stream s; throws oa::device_out_of_memory.
  virtual void* allocate(std::size_t bytes, stream_id s) = 0;
  /// Gives back what allocate(bytes, s') returned; null is ignored.
  virtual void deallocate(void* p, std::size_t bytes, stream_id s) noexcept = 0;
};

/// Aligned host memory, with a record of what is live (for checks).
class host_memory final : public memory_resource {
 public:
  explicit host_memory(std::size_t alignment) : alignment_(alignment) {}
  ~host_memory() override;
  void* allocate(std::size_t bytes, stream_id s) override;
  void deallocate(void* p, std::size_t bytes, stream_id s) noexcept override;
  /// Whether p lies in a live allocation.
  bool contains(const void* p) const noexcept;
  /// The size p was allocated with; false when p is not a live allocation.
  bool size_of(const void* p, std::size_t& bytes) const noexcept;

 private:
  const std::size_t alignment_;
  mutable std::mutex m_;
  std::unordered_map<void*, std::size_t> live_;
};

/// Refuses allocations past a budget; each counts its size rounded up to the granularity.
class limit_resource final : public memory_resource {
 public:
  /// `device`: names the device in out-of-memory errors.
  limit_resource(memory_resource& upstream, std::size_t budget, std::size_t granularity, std::string device);
  void* allocate(std::size_t bytes, stream_id s) override;
  void deallocate(void* p, std::size_t bytes, stream_id s) noexcept override;
  std::size_t budget() const noexcept { return budget_; }
  std::size_t granularity() const noexcept { return granularity_; }
  std::size_t counted(std::size_t bytes) const noexcept;
  std::size_t in_use() const noexcept;

 private:
  memory_resource& up_;
  const std::size_t budget_;
  const std::size_t granularity_;
  const std::string device_;
  mutable std::mutex m_;
  std::size_t in_use_ = 0;
};

/// Bytes in use (as the resource below counts them when it is a limit) and the peak.
class statistics_resource final : public memory_resource {
 public:
  explicit statistics_resource(memory_resource& upstream, const limit_resource* counting = nullptr)
      : up_(upstream), counting_(counting) {}
  void* allocate(std::size_t bytes, stream_id s) override;
  void deallocate(void* p, std::size_t bytes, stream_id s) noexcept override;
  std::size_t in_use() const noexcept;
  std::size_t peak() const noexcept;
  std::size_t allocations() const noexcept;  // live
  void reset_peak() noexcept;

 private:
  std::size_t count(std::size_t bytes) const noexcept { return counting_ ? counting_->counted(bytes) : bytes; }
  memory_resource& up_;
  const limit_resource* counting_;
  mutable std::mutex m_;
  std::size_t in_use_ = 0, peak_ = 0, live_ = 0;
};

/// On out-of-memory, calls the handler with the bytes wanted; while it says
/// it freed something, tries again. The handler runs on the allocating thread.
class retry_on_failure final : public memory_resource {
 public:
  using handler = std::function<bool(std::size_t bytes)>;
  explicit retry_on_failure(memory_resource& upstream) : up_(upstream) {}
  void* allocate(std::size_t bytes, stream_id s) override;
  void deallocate(void* p, std::size_t bytes, stream_id s) noexcept override { up_.deallocate(p, bytes, s); }
  void set_handler(handler h);

 private:
  memory_resource& up_;
  std::mutex m_;
  handler handler_;
};

}  // namespace oa
