#pragma once
// Command-line checks the bench and example programs share: whole numbers
// read exactly (CLI11 saturates an unsigned value past its range and wraps a
// negative one), data sizes the machine can hold, and one exit status (2)
// for arguments they cannot use.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace oa_bench {

/// CLI11 check: decimal digits only, a value from `lo` to `hi`.
inline CLI::Validator whole_number(std::uint64_t lo = 0, std::uint64_t hi = std::numeric_limits<std::uint64_t>::max()) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const char* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data(), end, v);
        const std::string range = "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
        if (s.empty() || s.front() < '0' || s.front() > '9' || p != end) return "'" + s + "' is not " + range;
        if (ec == std::errc::result_out_of_range || v < lo || v > hi) return "'" + s + "' is out of range (" + range + ")";
        return {};
      },
      "UINT", "whole_number");
}

/// Says what CLI11 says of `e` (or prints the help it asks for), and gives
/// the exit status: 0 for the help, 2 for every argument the program cannot
/// use, as for a configuration error (CLI11's own codes run from 100 up).
inline int usage_exit(const CLI::App& app, const CLI::Error& e) { return app.exit(e) == 0 ? 0 : 2; }

/// The machine's physical memory in bytes; the largest size_t when unknown.
inline std::size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

/// Refuses data of `count` items of `item_bytes` each that no allocation
/// here can hold (its size overflows, or exceeds physical memory), naming
/// `option` (std::length_error): a size error is the command line's, found
/// before any run starts. Header-only: programs without oa use it too.
inline void check_data_size(const std::string& option, std::size_t count, std::size_t item_bytes, const std::string& items) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, item_bytes, &bytes))
    throw std::length_error(option + ": " + std::to_string(count) + " " + items + " of " + std::to_string(item_bytes) +
                           " bytes each do not fit in a size_t (2^64 bytes): too large");
  const std::size_t physical = physical_memory_bytes();
  if (bytes > physical)
    throw std::length_error(option + ": " + std::to_string(count) + " " + items + " need " + std::to_string(bytes) +
                           " bytes of data, more than this machine's memory (" + std::to_string(physical) + " bytes)");
}

}  // namespace oa_bench
