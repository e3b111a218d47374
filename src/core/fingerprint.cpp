#include "core/fingerprint.hpp"

#include <cstring>

namespace oa::detail {

namespace {

// Odd constants (bijective multiplications), from the fractional digits of
// irrational numbers so that the lanes share no structure.
constexpr std::uint64_t k0 = 0x9E3779B97F4A7C15ull, k1 = 0xC2B2AE3D27D4EB4Full, k2 = 0x165667B19E3779F9ull,
                        k3 = 0xD6E8FEB86659FD93ull;

std::uint64_t rotl(std::uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }

// One word into a lane: a bijection of the lane given the word and of the
// word given the lane (so that a change in one word always shows). The
// rotation brings the high bits down: with only xor and multiplication a
// bit reaches none below it, and the top bits of a lane (the signs of
// doubles) would only count their changes modulo 2.
std::uint64_t mix(std::uint64_t h, std::uint64_t w, std::uint64_t k, std::uint64_t kw) noexcept {
  return rotl(h + w * kw, 31) * k;
}

struct lanes {
  std::uint64_t h[4] = {k1, k2, k3, k0};

  void add(const std::byte* p, std::size_t n) noexcept {
    std::uint64_t w[4];
    for (; n >= sizeof w; n -= sizeof w, p += sizeof w) {
      std::memcpy(w, p, sizeof w);
      h[0] = mix(h[0], w[0], k0, k1);
      h[1] = mix(h[1], w[1], k1, k2);
      h[2] = mix(h[2], w[2], k2, k3);
      h[3] = mix(h[3], w[3], k3, k0);
    }
    if (n == 0) return;
    // The tail, zero-padded; its length is in the final mix.
    std::uint64_t t[4] = {0, 0, 0, 0};
    std::memcpy(t, p, n);
    h[0] = mix(h[0], t[0], k0, k1);
    h[1] = mix(h[1], t[1], k1, k2);
    h[2] = mix(h[2], t[2], k2, k3);
    h[3] = mix(h[3], t[3], k3, k0);
  }
};

}  // namespace

fingerprint fingerprint_of(const region& r) noexcept {
  lanes l;
  for (std::size_t row = 0; row < r.rows; ++row) l.add(r.data + row * r.pitch, r.width);
  // Each output word is a bijection of one lane given the other: a change in
  // one lane always shows.
  const std::uint64_t shape = (r.width * 0x100000001B3ull) ^ r.rows;
  return {(l.h[0] ^ shape) * k2 + rotl(l.h[1], 31), (l.h[2] ^ shape) * k3 + rotl(l.h[3], 29)};
}

}  // namespace oa::detail
