#pragma once
// FNV-1a, 64 bits: a short, stable hash for keys that name things (a kernel
// cache entry, a collective's call, a layout) and for checksums against
// damage, never against intent.

#include <cstdint>
#include <string_view>

namespace oa::detail {

inline constexpr std::uint64_t fnv1a_basis = 0xcbf29ce484222325u;
inline constexpr std::uint64_t fnv1a_prime = 0x100000001b3u;

/// `h` with `bytes` folded in, one byte at a time.
constexpr std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = fnv1a_basis) noexcept {
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * fnv1a_prime;
  return h;
}

/// `h` with one word folded in whole (a layout's counts).
constexpr std::uint64_t fnv1a_word(std::uint64_t word, std::uint64_t h) noexcept { return (h ^ word) * fnv1a_prime; }

}  // namespace oa::detail
