#pragma once
// Host threads that copy between pageable user memory and pinned staging
// buffers. One thread copies at a fraction of what a PCIe or NVLink DMA
// engine moves, so a copy is cut into parts done in parallel.

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "oa/core/device.hpp"

namespace oa::cuda::detail {

class copy_pool {
 public:
  explicit copy_pool(int threads);
  ~copy_pool();
  copy_pool(const copy_pool&) = delete;
  copy_pool& operator=(const copy_pool&) = delete;

  /// Copies src to dst (same width and rows), in parallel; returns when done.
  void copy(const region& dst, const region& src);

 private:
  void run(std::vector<std::function<void()>> parts);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::queue<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace oa::cuda::detail
