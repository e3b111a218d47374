#include "cuda/copy_pool.hpp"

#include <algorithm>
#include <cstring>
#include <latch>

namespace oa::cuda::detail {

namespace {
// Below this a copy is not worth splitting.
constexpr std::size_t min_part_bytes = std::size_t{1} << 20;
}  // namespace

copy_pool::copy_pool(int threads) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock lock(mutex_);
          ready_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
          if (stop_ && tasks_.empty()) return;
          task = std::move(tasks_.front());
          tasks_.pop();
        }
        task();
      }
    });
}

copy_pool::~copy_pool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void copy_pool::run(std::vector<std::function<void()>> parts) {
  if (parts.size() <= 1 || threads_.empty()) {
    for (auto& p : parts) p();
    return;
  }
  std::latch done(static_cast<std::ptrdiff_t>(parts.size()));
  {
    std::lock_guard lock(mutex_);
    for (auto& p : parts)
      tasks_.push([&done, p = std::move(p)] {
        p();
        done.count_down();
      });
  }
  ready_.notify_all();
  done.wait();
}

void copy_pool::copy(const region& dst, const region& src) {
  const std::size_t total = src.bytes();
  if (total == 0) return;
  const std::size_t ways =
      std::clamp<std::size_t>(total / min_part_bytes, 1, std::max<std::size_t>(threads_.size(), 1));
  std::vector<std::function<void()>> parts;
  if (src.rows >= ways) {
    // Whole rows per part.
    const std::size_t per = (src.rows + ways - 1) / ways;
    for (std::size_t r0 = 0; r0 < src.rows; r0 += per) {
      const std::size_t n = std::min(per, src.rows - r0);
      parts.push_back([=] {
        copy_region({dst.data + r0 * dst.pitch, dst.width, n, dst.pitch}, {src.data + r0 * src.pitch, src.width, n, src.pitch});
      });
    }
  } else {
    // Few long rows: split each row's bytes.
    const std::size_t per = (src.width + ways - 1) / ways;
    for (std::size_t r = 0; r < src.rows; ++r)
      for (std::size_t b = 0; b < src.width; b += per) {
        const std::size_t n = std::min(per, src.width - b);
        parts.push_back([=] { std::memcpy(dst.data + r * dst.pitch + b, src.data + r * src.pitch + b, n); });
      }
  }
  run(std::move(parts));
}

}  // namespace oa::cuda::detail
