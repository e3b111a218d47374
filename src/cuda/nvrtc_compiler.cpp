#include "cuda/nvrtc_compiler.hpp"

#include <nvrtc.h>

#include <cstdlib>
#include <memory>
#include <sstream>

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

compiled_kernel compile(const oa::detail::kernel_source& k, int major, int minor) {
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, k.code.c_str(), (k.name + ".cu").c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });

  // No fast math: results stay comparable with the CPU path.
  std::vector<std::string> opts = {"--gpu-architecture=sm_" + std::to_string(major * 10 + minor), "--std=c++17",
                                   "-default-device"};
  for (const auto& d : kernel_include_dirs()) opts.push_back("-I" + d);
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

}  // namespace oa::cuda
