// The host threads that fill and drain the CUDA device's pinned staging
// buffers: a parallel copy must equal a plain one for every region shape.

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda/copy_pool.hpp"

TEST_CASE("parallel copies of contiguous and pitched regions equal plain copies") {
  oa::cuda::detail::copy_pool pool(4);
  std::mt19937_64 g(7);
  struct shape {
    std::size_t width, rows, src_pad, dst_pad;
  };
  const std::vector<shape> shapes = {{0, 0, 0, 0},         {1, 1, 0, 0},          {8 << 20, 1, 0, 0},
                                     {(8 << 20) + 3, 1, 0, 0}, {24, 300000, 8, 0},  {4096, 3000, 0, 64},
                                     {3 << 20, 3, 5, 11},  {100, 7, 3, 1}};
  for (const shape& s : shapes) {
    CAPTURE(s.width);
    CAPTURE(s.rows);
    const std::size_t sp = s.width + s.src_pad, dp = s.width + s.dst_pad;
    std::vector<std::byte> src(sp * s.rows + 1), dst(dp * s.rows + 1, std::byte{0xEE}), ref = dst;
    for (auto& b : src) b = static_cast<std::byte>(g());
    const oa::region from{src.data(), s.width, s.rows, sp};
    pool.copy({dst.data(), s.width, s.rows, dp}, from);
    oa::copy_region({ref.data(), s.width, s.rows, dp}, from);
    CHECK(dst == ref);  // the padding between rows untouched too
  }
}

TEST_CASE("a pool without threads copies on the caller's thread") {
  oa::cuda::detail::copy_pool pool(0);
  std::vector<int> a(1 << 20, 3), b(1 << 20, 0);
  const std::size_t bytes = a.size() * sizeof(int);
  pool.copy({reinterpret_cast<std::byte*>(b.data()), bytes, 1, bytes},
            {reinterpret_cast<std::byte*>(a.data()), bytes, 1, bytes});
  CHECK(b == a);
}
