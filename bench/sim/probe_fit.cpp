// The new design's host parameters from a GPU node's bench/staging_probe.cu
// results (staging_probe.json beside the run's records): one thread's memcpy
// into touched pages, the first touch of fresh pages, what all threads
// together copy, the fixed cost of one registration, and cuBLAS by shape. Measured there,
// not assumed.

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sim/replay.hpp"

namespace oa_sim {

namespace {

/// The median GB/s of a host_memcpy measurement ("touched T=1"), or NaN
/// when the probe skipped or failed it.
double median_gbps(const nlohmann::json& memcpy, const std::string& name) {
  const auto it = memcpy.find(name);
  if (it == memcpy.end() || !it->contains("median_gbps") || !(*it)["median_gbps"].is_number()) return NAN;
  return (*it)["median_gbps"].get<double>();
}

/// Seconds of one cudaHostRegister plus cudaHostUnregister of a pinning
/// measurement ({bytes, register, unregister} in seconds per GiB), or NaN.
double register_call_seconds(const nlohmann::json& pin, const std::string& name) {
  const auto it = pin.find(name);
  if (it == pin.end() || !it->contains("bytes")) return NAN;
  double per_gib = 0;
  for (const char* part : {"register", "unregister"}) {
    if (!it->contains(part) || !(*it)[part].contains("median_seconds_per_gib")) return NAN;
    per_gib += (*it)[part]["median_seconds_per_gib"].get<double>();
  }
  return per_gib * (*it)["bytes"].get<double>() / static_cast<double>(std::size_t{1} << 30);
}

/// register_fixed_seconds_per_array: the fixed cost of one registration,
/// from two sizes of touched 4 KiB pages (the line through both, at zero bytes).
void fit_register_call(profile& p, const nlohmann::json& probe, const std::string& file, std::vector<std::string>& lines) {
  if (!probe.contains("pinning")) return;
  const nlohmann::json& pin = probe["pinning"];
  const std::string small = "register touched 4KiB pages, 16 MiB", large = "register touched 4KiB pages";
  const double ts = register_call_seconds(pin, small), tl = register_call_seconds(pin, large);
  if (!std::isfinite(ts) || !std::isfinite(tl)) return;
  const double s = pin[small]["bytes"].get<double>(), l = pin[large]["bytes"].get<double>();
  if (l <= s) return;
  const double fixed = std::max(0.0, ts - (tl - ts) / (l - s) * s);
  p.set("register_fixed_seconds_per_array", fixed, "measured",
        file + " pinning: register and unregister of 16 MiB and of the large size, the line's value at zero bytes");
  lines.push_back("probe: register_fixed_seconds_per_array " + std::to_string(fixed));
}

/// cublas_double_curve_*: cuBLAS's DGEMM by shape as the runtime measures
/// it (a 4096 reference, each extent alone at 64 ... 2048, all one less),
/// from the probe's gemm section, each as a fraction of the reference.
void fit_gemm_curve(profile& p, const nlohmann::json& probe, const std::string& file, std::vector<std::string>& lines) {
  if (!probe.contains("gemm")) return;
  const nlohmann::json& g = probe["gemm"];
  const auto tflops = [&](std::size_t m, std::size_t n, std::size_t k) {
    const std::string name = "double " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " alone";
    const auto it = g.find(name);
    return it != g.end() && it->contains("median_tflops") ? (*it)["median_tflops"].get<double>() : NAN;
  };
  constexpr std::size_t ref = 4096;
  const double r = tflops(ref, ref, ref), odd = tflops(ref - 1, ref - 1, ref - 1);
  if (!std::isfinite(r) || r <= 0 || !std::isfinite(odd)) return;
  const std::string src = file + " gemm: median TFLOP/s of cuBLAS DGEMM by shape (alone)";
  p.set("cublas_double_curve_reference", ref, "measured", src);
  p.set("cublas_double_curve_tflops", r, "measured", src + ", 4096 cubed");
  p.set("cublas_double_curve_unaligned", std::min(1.0, odd / r), "measured", src + ", 4095 cubed over 4096 cubed");
  const char* axes[3] = {"m", "n", "k"};
  int points = 0;
  for (std::size_t axis = 0; axis < 3; ++axis)
    for (std::size_t e = 64; e < ref; e *= 2) {
      std::array<std::size_t, 3> x{ref, ref, ref};
      x[axis] = e;
      const double t = tflops(x[0], x[1], x[2]);
      if (!std::isfinite(t)) continue;
      p.set(std::string("cublas_double_curve_") + axes[axis] + "_" + std::to_string(e), std::min(1.0, t / r),
            "measured", src + ", over 4096 cubed");
      ++points;
    }
  lines.push_back("probe: cublas_double_curve " + std::to_string(r) + " TFLOP/s at 4096 cubed, " +
                  std::to_string(points) + " extents");
}

}  // namespace

std::vector<std::string> fit_probe(profile& p, const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder) / "staging_probe.json";
  std::ifstream f(path);
  if (!f) return {};
  nlohmann::json probe;
  try {
    probe = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("oa_sim::fit_probe: " + path.string() + ": " + e.what());
  }
  std::vector<std::string> lines;
  fit_register_call(p, probe, path.filename().string(), lines);
  fit_gemm_curve(p, probe, path.filename().string(), lines);
  if (!probe.contains("host_memcpy")) return lines;
  const nlohmann::json& m = probe["host_memcpy"];
  const double touched = median_gbps(m, "touched T=1"), fresh = median_gbps(m, "untouched T=1");
  const std::string src = path.filename().string() + " host_memcpy";
  if (std::isfinite(touched) && touched > 0) {
    p.set("new_memcpy_gbps_per_thread", touched, "measured", src + ": median of 'touched T=1'");
    lines.push_back("probe: new_memcpy_gbps_per_thread " + std::to_string(touched));
  }
  if (std::isfinite(touched) && std::isfinite(fresh) && fresh > 0 && fresh < touched) {
    // A copy into fresh pages pays the first touch on top of the copy.
    const double touch = 1 / (1 / fresh - 1 / touched);
    p.set("new_prefault_gbps_per_thread", touch, "measured",
          src + ": first touch per thread, 1 / (1 / 'untouched T=1' - 1 / 'touched T=1')");
    p.set("untouched_memcpy_ratio", fresh / touched, "measured", src + ": 'untouched T=1' over 'touched T=1'");
    lines.push_back("probe: new_prefault_gbps_per_thread " + std::to_string(touch));
  }
  const double fresh_huge = median_gbps(m, "untouched MADV_HUGEPAGE T=1");
  if (std::isfinite(touched) && std::isfinite(fresh_huge) && fresh_huge > 0 && fresh_huge < touched) {
    const double touch = 1 / (1 / fresh_huge - 1 / touched);
    p.set("new_prefault_huge_gbps_per_thread", touch, "measured",
          src + ": first touch of huge pages per thread, 1 / (1 / 'untouched MADV_HUGEPAGE T=1' - 1 / 'touched T=1')");
    lines.push_back("probe: new_prefault_huge_gbps_per_thread " + std::to_string(touch));
  }
  // Faulting in as the engine does it (MADV_POPULATE_WRITE), where the probe measured it.
  for (const auto& [name, key] : {std::pair<std::string, std::string>{"populate T=1", "new_prefault_gbps_per_thread"},
                                  {"populate MADV_HUGEPAGE T=1", "new_prefault_huge_gbps_per_thread"}}) {
    const double rate = median_gbps(m, name);
    if (!std::isfinite(rate) || rate <= 0) continue;
    p.set(key, rate, "measured", src + ": median of '" + name + "'");
    lines.push_back("probe: " + key + " " + std::to_string(rate));
  }
  // One staging thread's copy as the engine does it (the probe's ring of
  // pinned slots, one thread, host to device): slower than a plain memcpy
  // between pageable buffers (the DMA reads the slots as they are filled).
  if (probe.contains("staging") && probe["staging"].contains("runs")) {
    std::vector<double> one;
    for (const auto& [name, r] : probe["staging"]["runs"].items())
      if (name.rfind("h2d ", 0) == 0 && name.find(" T=1 touched wait_value") != std::string::npos &&
          r.contains("median_gbps") && r["median_gbps"].is_number())
        one.push_back(r["median_gbps"].get<double>());
    if (!one.empty()) {
      std::sort(one.begin(), one.end());
      const double v = one[one.size() / 2];
      p.set("new_memcpy_gbps_per_thread", v, "measured",
            path.filename().string() + " staging: median over ring shapes of 'h2d ... T=1 touched wait_value'");
      lines.push_back("probe: new_memcpy_gbps_per_thread " + std::to_string(v) + " (staging, one thread)");
    }
  }
  double most = 0;
  std::string at;
  for (const auto& [name, r] : m.items())
    if (name.rfind("touched T=", 0) == 0 && r.contains("median_gbps") && r["median_gbps"].get<double>() > most)
      most = r["median_gbps"].get<double>(), at = name;
  if (most > 0) {
    p.set("host_memcpy_cap_gbps", most, "measured", src + ": the most any thread count copied ('" + at + "')");
    lines.push_back("probe: host_memcpy_cap_gbps " + std::to_string(most));
  }
  return lines;
}

}  // namespace oa_sim
