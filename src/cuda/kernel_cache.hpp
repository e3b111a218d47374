#pragma once
// A cache on disk of the CUBINs NVRTC compiled, so that a program's kernels
// are compiled once per machine rather than once per run (NVRTC takes a
// second or more for a kernel that includes CUB). Each entry holds the
// whole key it was made for (the compiler's version, its options, the
// kernel's name and source) and is used only when that matches exactly; a
// file that is unreadable, truncated or another key's is compiled afresh and
// replaced. Entries are written to a temporary file and renamed, so that
// processes sharing the folder never read half of one. Where the folder
// cannot be written, kernels are compiled every run (said once).
//
// OA_KERNEL_CACHE: the folder (default $XDG_CACHE_HOME/oa/kernels, else
// $HOME/.cache/oa/kernels); "off" (or "0") compiles every run.

#include <optional>
#include <string>
#include <vector>

namespace oa::cuda {

/// The folder OA_KERNEL_CACHE names, or nothing when caching is off (or no
/// home folder is known).
std::optional<std::string> kernel_cache_dir();

/// The CUBIN cached for `key` in `dir`, if an entry for exactly that key is
/// there and whole.
std::optional<std::vector<char>> cached_cubin(const std::string& dir, const std::string& name,
                                              const std::string& key) noexcept;

/// Keeps `cubin` for `key`; false (with the reason in `why`) when it could
/// not be written. Never throws: a cache that fails costs a compile.
bool keep_cubin(const std::string& dir, const std::string& name, const std::string& key,
                const std::vector<char>& cubin, std::string& why) noexcept;

}  // namespace oa::cuda
