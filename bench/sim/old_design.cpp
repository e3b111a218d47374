// The design measured on the H100 at b10d541 (src/cuda/cuda_device.cpp,
// src/core/executor.cpp and contraction.cpp of that commit):
// - registered: every host array of the stage is pinned (cudaHostRegister)
//   on the issuing thread before the first chunk, and unpinned after its
//   last, in every mode and every repeat; then copies are direct DMAs. The
//   results are created uninitialised just before (fresh pages every run),
//   so pinning them is their first touch: a fault and a zeroed page per
//   4 KiB, far dearer than pinning the inputs' resident pages;
// - pinned_buffers: each stream owns one 32 MiB pinned buffer; a copy is cut
//   into pieces, each a host function (the copy pool's memcpy) and its DMA in
//   stream order. CUDA runs host functions on one thread for all streams.
// Chunk i runs on slot i % streams; the host waits for chunk i - streams
// before issuing chunk i (same stream: stream order already implies it).

#include <algorithm>

#include "sim/cases.hpp"
#include "sim/machine.hpp"

namespace oa_sim {

namespace {

constexpr std::size_t staging_cap = std::size_t{32} << 20;  // cuda::options::staging_bytes

/// A region of `rows` rows of `width` bytes cut as for_each_piece cuts it.
std::vector<std::size_t> region_pieces(std::size_t width, std::size_t rows, std::size_t cap) {
  if (width <= cap) {
    const std::size_t per = std::max<std::size_t>(cap / width, 1);
    std::vector<std::size_t> out;
    for (std::size_t r = 0; r < rows; r += per) out.push_back(std::min(per, rows - r) * width);
    return out;
  }
  std::vector<std::size_t> out;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t b : pieces(width, cap)) out.push_back(b);
  return out;
}

struct old_copies {
  const profile& p;
  machine& m;
  staging how;
  bool strided;  // 2D copies of a product's tiles (registered: cudaMemcpy2DAsync)

  void in(stream& s, std::size_t width, std::size_t rows, const std::string& what) {
    const double lat = p["op_latency_us"] * m.us;
    if (how != staging::pinned_buffers) {  // registered, or the caller's pinned memory: direct DMA
      const double rate = how == staging::pinned_host ? 0 : p[strided ? "h2d_registered_2d_gbps" : "h2d_registered_gbps"] * gb;
      s.add({"h2d " + what, m.h2d, static_cast<double>(width * rows), rate, lat, {}});
      return;
    }
    for (std::size_t b : region_pieces(width, rows, staging_cap)) {
      s.add({"fill " + what, m.callback, static_cast<double>(b), p["staging_fill_gbps"] * gb, lat, {}});
      s.add({"h2d " + what, m.h2d, static_cast<double>(b), 0, p["host_function_resume_us"] * m.us, {}});
    }
  }

  void out(stream& s, std::size_t width, std::size_t rows, const std::string& what) {
    const double lat = p["op_latency_us"] * m.us;
    if (how != staging::pinned_buffers) {
      const double rate = how == staging::pinned_host ? 0 : p[strided ? "d2h_registered_2d_gbps" : "d2h_registered_gbps"] * gb;
      s.add({"d2h " + what, m.d2h, static_cast<double>(width * rows), rate, lat, {}});
      return;
    }
    // Drains write pages of the result never touched before: first-touch faults.
    const double drain = p["staging_fill_gbps"] * p["untouched_memcpy_ratio"] * gb;
    for (std::size_t b : region_pieces(width, rows, staging_cap)) {
      s.add({"d2h " + what, m.d2h, static_cast<double>(b), 0, lat, {}});
      s.add({"drain " + what, m.callback, static_cast<double>(b), drain, lat, {}});
    }
  }
};

/// The op every chunk follows: setup, then, registered, the pinning of the
/// inputs' `in_bytes` (resident) and the results' `out_bytes` (first touched).
int prologue(const profile& p, machine& m, staging how, double in_bytes, double out_bytes, int arrays) {
  const int setup = m.setup(p);
  if (how != staging::registered) return setup;
  const int in = m.g.add({"cudaHostRegister inputs", m.host, in_bytes, gib / p["register_touched_seconds_per_gib"],
                          arrays * p["register_fixed_seconds_per_array"], {setup}});
  return m.g.add({"cudaHostRegister results", m.host, out_bytes, gib / p["register_untouched_seconds_per_gib"], 0, {in}});
}

}  // namespace

graph old_streaming(const profile& p, const streaming_case& c, staging how) {
  machine m(p);
  const int first = prologue(p, m, how, static_cast<double>(c.in_bytes()), static_cast<double>(c.out_bytes()),
                             static_cast<int>(c.in_unit_bytes.size() + c.out_unit_bytes.size()));
  old_copies copies{p, m, how, false};
  std::vector<stream> streams(static_cast<std::size_t>(std::max(c.streams, 1)), stream(m.g));
  const double lat = p["op_latency_us"] * m.us;
  for (std::size_t i = 0; i < c.chunk_units.size(); ++i) {
    stream& s = streams[i % streams.size()];
    const std::size_t u = c.chunk_units[i];
    const std::string tag = "chunk " + std::to_string(i);
    s.add({tag + " issued", -1, 0, 0, 0, {first}});
    for (std::size_t b : c.in_unit_bytes) copies.in(s, b * u, 1, tag);
    s.add({"kernel " + tag, m.gpu, static_cast<double>(u), 1.0 / c.kernel_seconds_per_unit, lat, {}});
    for (std::size_t b : c.out_unit_bytes) copies.out(s, b * u, 1, tag);
  }
  return std::move(m.g);
}

graph old_gemm(const profile& p, const gemm_case& c, staging how) {
  machine m(p);
  const auto& pl = c.plan;
  const std::size_t eb = c.elem_bytes, n = c.n;
  const double operand = static_cast<double>(n * n * eb);
  const int first = prologue(p, m, how, 2 * operand, operand, 3);  // A and B read, C created by the product
  old_copies copies{p, m, how, true};
  stream in(m.g), run_s(m.g), out_s(m.g);
  stream& run = c.sequential ? in : run_s;
  stream& out = c.sequential ? in : out_s;
  in.add({"issued", -1, 0, 0, 0, {first}});
  const double lat = p["op_latency_us"] * m.us;
  std::vector<int> done, c_free;
  held_panels held(pl);
  const std::size_t cb = static_cast<std::size_t>(std::max(pl.c_buffers, 0));
  for_each_gemm_step(
      c,
      [&](const gemm_step& st) {
        std::vector<int> waits;
        if (st.s >= 2) waits.push_back(done[st.s - 2]);
        held.add_waits(st, waits);
        in.add({"wait " + st.tag, -1, 0, 0, 0, waits});
        // Column-major operands: A's piece is kl columns of mi elements, B's nj columns of kl.
        if (st.load_a) copies.in(in, st.mi * eb, st.kl, "A " + st.tag);
        if (st.load_b) copies.in(in, st.kl * eb, st.nj, "B " + st.tag);
        std::vector<int> rw{in.last()};
        if (st.kk == 0 && cb > 0 && st.t >= cb) rw.push_back(c_free[st.t - cb]);  // the tile's C buffer is free
        run.add({"wait " + st.tag, -1, 0, 0, 0, rw});
        done.push_back(run.add({"gemm " + st.tag, m.gpu, gemm_step_seconds(p, eb, st.mi, st.nj, st.kl), 1.0, lat, {}}));
        held.read_by(st, done.back());
      },
      [&](const gemm_step& st) {
        out.add({"wait " + st.tag, -1, 0, 0, 0, {done.back()}});
        copies.out(out, st.mi * eb, st.nj, "C " + st.tag);
        c_free.push_back(out.last());
      });
  return std::move(m.g);
}

}  // namespace oa_sim
