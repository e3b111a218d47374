#include "cuda/kernel_cache.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "oa/core/fnv1a.hpp"

namespace oa::cuda {

namespace {

namespace fs = std::filesystem;

constexpr char magic[8] = {'O', 'A', 'C', 'U', 'B', 'I', 'N', '2'};

/// FNV-1a: the entry's file name (the key inside decides) and the CUBIN's
/// checksum (a body damaged after it was written is not loaded).
std::uint64_t fnv1a(const char* p, std::size_t n) { return oa::detail::fnv1a(std::string_view(p, n)); }

fs::path entry_path(const std::string& dir, const std::string& name, const std::string& key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key.data(), key.size())));
  // Kernel names are identifiers; anything else is kept out of the file name.
  std::string safe = name.substr(0, 64);
  for (char& c : safe)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  return fs::path(dir) / (safe + "-" + hex + ".cubin");
}

bool read_u64(std::istream& in, std::uint64_t& n) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&n), sizeof n));
}

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w, n -= static_cast<std::size_t>(w);
  }
  return true;
}

/// Layout: magic, key size, key, CUBIN size, CUBIN checksum, CUBIN.
std::optional<std::vector<char>> read_entry(const fs::path& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::error_code ec;
  const auto file_size = fs::file_size(path, ec);
  if (ec) return std::nullopt;
  char m[sizeof magic];
  std::uint64_t key_size = 0, cubin_size = 0, sum = 0;
  if (!in.read(m, sizeof m) || std::memcmp(m, magic, sizeof m) != 0 || !read_u64(in, key_size) ||
      key_size != key.size())
    return std::nullopt;
  std::string stored(key_size, '\0');
  if (!in.read(stored.data(), static_cast<std::streamsize>(key_size)) || stored != key || !read_u64(in, cubin_size) ||
      !read_u64(in, sum))
    return std::nullopt;
  // Exactly the rest of the file (a size field past it is damage, not a request).
  if (cubin_size == 0 || cubin_size != file_size - static_cast<std::uint64_t>(in.tellg())) return std::nullopt;
  std::vector<char> cubin(cubin_size);
  if (!in.read(cubin.data(), static_cast<std::streamsize>(cubin_size)) || fnv1a(cubin.data(), cubin.size()) != sum)
    return std::nullopt;
  return cubin;
}

}  // namespace

std::optional<std::string> kernel_cache_dir() {
  if (const char* e = std::getenv("OA_KERNEL_CACHE"); e && *e) {
    const std::string v = e;
    if (v == "off" || v == "0") return std::nullopt;
    return v;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "oa" / "kernels").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "oa" / "kernels").string();
  return std::nullopt;
}

std::optional<std::vector<char>> cached_cubin(const std::string& dir, const std::string& name,
                                              const std::string& key) noexcept {
  try {
    return read_entry(entry_path(dir, name, key), key);
  } catch (...) {
    return std::nullopt;  // (memory for a damaged size, a file system's error: a miss)
  }
}

bool keep_cubin(const std::string& dir, const std::string& name, const std::string& key,
                const std::vector<char>& cubin, std::string& why) noexcept {
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      why = "cannot create " + dir + ": " + ec.message();
      return false;
    }
    const fs::path to = entry_path(dir, name, key);
    // A temporary file of our own (mkstemp: created, never an existing one
    // or a link; readable by the user alone), renamed over the entry once whole.
    std::string tmp = to.string() + ".tmp.XXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) {
      why = "cannot create a file in " + dir + ": " + std::strerror(errno);
      return false;
    }
    const std::uint64_t key_size = key.size(), cubin_size = cubin.size(),
                        sum = fnv1a(cubin.data(), cubin.size());
    const bool written = write_all(fd, magic, sizeof magic) && write_all(fd, &key_size, sizeof key_size) &&
                         write_all(fd, key.data(), key.size()) && write_all(fd, &cubin_size, sizeof cubin_size) &&
                         write_all(fd, &sum, sizeof sum) && write_all(fd, cubin.data(), cubin.size());
    const int err = written ? 0 : errno;
    if (::close(fd) != 0 || !written) {
      fs::remove(tmp, ec);
      why = "cannot write " + tmp + (err ? std::string(": ") + std::strerror(err) : std::string());
      return false;
    }
    fs::rename(tmp, to, ec);
    if (ec) {
      why = "cannot rename " + tmp + " to " + to.string() + ": " + ec.message();
      fs::remove(tmp, ec);
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    why = e.what();
    return false;
  }
}

}  // namespace oa::cuda
