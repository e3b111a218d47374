#include "cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "cuda/kernel_cache.hpp"
#include "oa/core/error.hpp"

#ifndef OA_CUDA_INCLUDE_DIRS
#define OA_CUDA_INCLUDE_DIRS ""
#endif

namespace oa::cuda {

namespace {
void check(nvrtcResult r, const char* call, const std::string& log = {}) {
  if (r != NVRTC_SUCCESS)
    throw error(std::string("oa: NVRTC ") + call + " failed: " + nvrtcGetErrorString(r) + (log.empty() ? "" : "\n" + log));
}

std::vector<std::string> split_dirs(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string d; std::getline(in, d, ':');)
    if (!d.empty()) out.push_back(d);
  return out;
}
}  // namespace

std::vector<std::string> kernel_include_dirs() {
  if (const char* e = std::getenv("OA_CUDA_INCLUDE"); e && *e) return split_dirs(e);
  return split_dirs(OA_CUDA_INCLUDE_DIRS);
}

namespace {

/// A file as the key knows it: its path, size and time of change (an update
/// of the toolkit within a version, a CCCL replaced in place).
std::string identity(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return path + " (none)";
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

/// What a CUBIN depends on: the compiler (its version and library file), its
/// options, the CUB headers its include folders hold, and the kernel.
std::string cache_key(const oa::detail::kernel_source& k, const std::vector<std::string>& opts) {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::string key = "nvrtc " + std::to_string(major) + "." + std::to_string(minor) + "\n";
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname)
    key += "library " + identity(info.dli_fname) + "\n";
  for (const auto& o : opts) {
    key += o + "\n";
    if (o.rfind("-I", 0) == 0) key += "cub " + identity(o.substr(2) + "/cub/version.cuh") + "\n";
  }
  return key + k.name + "\n" + k.code;
}

compiled_kernel compile_now(const oa::detail::kernel_source& k, const std::vector<std::string>& opts);

}  // namespace

compiled_kernel compile(const oa::detail::kernel_source& k, int major, int minor, kernel_cache_use use) {
  // No fast math: results stay comparable with the CPU path.
  std::vector<std::string> opts = {"--gpu-architecture=sm_" + std::to_string(major * 10 + minor), "--std=c++17",
                                   "-default-device"};
  for (const auto& d : kernel_include_dirs()) opts.push_back("-I" + d);
  const std::optional<std::string> dir = kernel_cache_dir();
  if (!dir) return compile_now(k, opts);
  const std::string key = cache_key(k, opts);
  if (use == kernel_cache_use::read_write)
    if (auto cubin = cached_cubin(*dir, k.name, key)) return {k.name, std::move(*cubin), {}, true};
  compiled_kernel out = compile_now(k, opts);
  std::string why;
  static std::atomic<bool> said{false};
  if (!keep_cubin(*dir, k.name, key, out.cubin, why) && !said.exchange(true))
    std::fprintf(stderr, "oa: kernels are compiled anew each run: the kernel cache cannot be kept (%s; "
                 "OA_KERNEL_CACHE names another folder, or off)\n", why.c_str());
  return out;
}

namespace {

compiled_kernel compile_now(const oa::detail::kernel_source& k, const std::vector<std::string>& opts) {
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, k.code.c_str(), (k.name + ".cu").c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });

  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());

  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  check(r, ("nvrtcCompileProgram(" + k.name + ")").c_str(), log);

  compiled_kernel out{k.name, {}, log};
  std::size_t size = 0;
  check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  out.cubin.resize(size);
  check(nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");
  return out;
}

}  // namespace

}  // namespace oa::cuda
