#include "cuda/kernel_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace oa::cuda {

namespace {

namespace fs = std::filesystem;

constexpr char magic[8] = {'O', 'A', 'C', 'U', 'B', 'I', 'N', '1'};

/// FNV-1a, 64 bits: the entry's file name; the key inside decides.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

fs::path entry_path(const std::string& dir, const std::string& name, const std::string& key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  // Kernel names are identifiers; anything else is kept out of the file name.
  std::string safe = name.substr(0, 64);
  for (char& c : safe)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  return fs::path(dir) / (safe + "-" + hex + ".cubin");
}

bool read_size(std::istream& in, std::uint64_t& n) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&n), sizeof n));
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
                                              const std::string& key) {
  std::ifstream in(entry_path(dir, name, key), std::ios::binary);
  if (!in) return std::nullopt;
  char m[sizeof magic];
  std::uint64_t key_size = 0, cubin_size = 0;
  if (!in.read(m, sizeof m) || std::memcmp(m, magic, sizeof m) != 0 || !read_size(in, key_size) ||
      key_size != key.size())
    return std::nullopt;
  std::string stored(key_size, '\0');
  if (!in.read(stored.data(), static_cast<std::streamsize>(key_size)) || stored != key || !read_size(in, cubin_size))
    return std::nullopt;
  // (A size past what the file holds is a damaged entry, not a request.)
  std::error_code ec;
  const auto file_size = fs::file_size(entry_path(dir, name, key), ec);
  if (ec || cubin_size == 0 || cubin_size > file_size) return std::nullopt;
  std::vector<char> cubin(cubin_size);
  if (!in.read(cubin.data(), static_cast<std::streamsize>(cubin_size)) || in.peek() != std::char_traits<char>::eof())
    return std::nullopt;
  return cubin;
}

bool keep_cubin(const std::string& dir, const std::string& name, const std::string& key,
                const std::vector<char>& cubin, std::string& why) noexcept {
  static std::atomic<unsigned> serial{0};
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      why = "cannot create " + dir + ": " + ec.message();
      return false;
    }
    const fs::path to = entry_path(dir, name, key);
    fs::path tmp = to;
    tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      const std::uint64_t key_size = key.size(), cubin_size = cubin.size();
      out.write(magic, sizeof magic);
      out.write(reinterpret_cast<const char*>(&key_size), sizeof key_size);
      out.write(key.data(), static_cast<std::streamsize>(key.size()));
      out.write(reinterpret_cast<const char*>(&cubin_size), sizeof cubin_size);
      out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
      out.close();
      if (!out) {
        fs::remove(tmp, ec);
        why = "cannot write " + tmp.string();
        return false;
      }
    }
    fs::rename(tmp, to, ec);
    if (ec) {
      why = "cannot rename " + tmp.string() + " to " + to.string() + ": " + ec.message();
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
