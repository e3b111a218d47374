#pragma once
// Fingerprints of host memory: how the engine knows that bytes it copied to a
// device earlier are still what the host holds, without copying them again.
// Reading the host's bytes once at memory speed costs less than moving them
// over the link.

#include <cstdint>

#include "oa/core/device.hpp"

namespace oa::detail {

/// 128 bits of a region's bytes (and its shape). Four multiply-xor chains over
/// interleaved 8-byte words, each step a bijection of the chain's state: a
/// change confined to one word always changes the fingerprint; other changes
/// go unnoticed with a probability of about 2^-64.
struct fingerprint {
  std::uint64_t lo = 0, hi = 0;
  friend bool operator==(const fingerprint& a, const fingerprint& b) noexcept { return a.lo == b.lo && a.hi == b.hi; }
  friend bool operator!=(const fingerprint& a, const fingerprint& b) noexcept { return !(a == b); }
};

fingerprint fingerprint_of(const region& r) noexcept;

}  // namespace oa::detail
