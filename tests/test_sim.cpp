// oa-sim's engine on cases computed by hand: a two-chunk pipeline's
// makespan, the link's both-ways cap, CUDA's one callback thread serialising
// two streams' fills, and per-op latency.

#include <doctest/doctest.h>

#include <stdexcept>

#include "sim/engine.hpp"

namespace {

using oa_sim::graph;
using oa_sim::op;
using oa_sim::simulate;
using oa_sim::stream;

constexpr double eps = 1e-9;

TEST_CASE("sim: a two-chunk pipeline overlaps the second copy-in with the first kernel") {
  graph g;
  const int h2d = g.add_resource({"h2d", 10, 1, -1}), gpu = g.add_resource({"gpu", 5, 1, -1}),
            d2h = g.add_resource({"d2h", 10, 1, -1});
  stream s0(g), s1(g);
  // chunk 0 on stream 0, chunk 1 on stream 1: copy 10 units (1 s), kernel 10 units (2 s), copy back 10 (1 s).
  for (stream* s : {&s0, &s1}) {
    s->add({"in", h2d, 10, 0, 0, {}});
    s->add({"kernel", gpu, 10, 0, 0, {}});
    s->add({"out", d2h, 10, 0, 0, {}});
  }
  // in0 [0,1], k0 [1,3], in1 [1,2], k1 [3,5] (gpu busy), out0 [3,4], out1 [5,6].
  const auto r = simulate(g);
  CHECK(r.makespan == doctest::Approx(6.0).epsilon(eps));
  CHECK(g.at(4).start == doctest::Approx(3.0));  // kernel 1 waits for the GPU
  CHECK(r.busy[static_cast<std::size_t>(gpu)] == doctest::Approx(4.0));
}

TEST_CASE("sim: copies both ways share the link's cap") {
  graph g;
  const int link = g.add_group({"link", 15});
  const int h2d = g.add_resource({"h2d", 10, 1, link}), d2h = g.add_resource({"d2h", 10, 1, link});
  g.add({"in", h2d, 10, 0, 0, {}});
  g.add({"out", d2h, 20, 0, 0, {}});
  // Together 20 > 15: each at 7.5 until "in" ends at 10/7.5 = 1.333 s (out has 10 left), then out alone at 10: +1 s.
  const auto r = simulate(g);
  CHECK(g.at(0).end == doctest::Approx(4.0 / 3.0));
  CHECK(r.makespan == doctest::Approx(4.0 / 3.0 + 1.0));
}

TEST_CASE("sim: a resource in a second cap group runs at the tighter group's scale, by its weight") {
  graph g;
  const int link = g.add_group({"link", 100}), memory = g.add_group({"memory", 30});
  const int h2d = g.add_resource({"h2d", 10, 1, link, {{memory, 1}}});
  const int fill = g.add_resource({"fill", 10, 1, -1, {{memory, 2}}});
  g.add({"dma", h2d, 10, 0, 0, {}});
  g.add({"copy", fill, 10, 0, 0, {}});
  // Memory demand 10 x 1 + 10 x 2 = 30: at the cap, nothing slows; both end at 1 s.
  CHECK(simulate(g).makespan == doctest::Approx(1.0));
  graph tight;
  const int l2 = tight.add_group({"link", 100}), m2 = tight.add_group({"memory", 15});
  const int h = tight.add_resource({"h2d", 10, 1, l2, {{m2, 1}}}), f = tight.add_resource({"fill", 10, 1, -1, {{m2, 2}}});
  tight.add({"dma", h, 10, 0, 0, {}});
  tight.add({"copy", f, 10, 0, 0, {}});
  // Demand 30 against 15: both at half rate (5 units/s) until they end together at 2 s.
  CHECK(simulate(tight).makespan == doctest::Approx(2.0));
  graph bad;
  CHECK_THROWS_WITH_AS(bad.add_resource({"x", 1, 1, -1, {{3, 1}}}),
                       doctest::Contains("shares an unknown cap group"), std::invalid_argument);
}

TEST_CASE("sim: one callback thread serialises two streams' fills, each stream's DMA after its own fill") {
  graph g;
  const int cb = g.add_resource({"callback", 4, 1, -1}), h2d = g.add_resource({"h2d", 8, 1, -1});
  stream a(g), b(g);
  a.add({"fill a", cb, 4, 0, 0, {}});  // [0,1]
  b.add({"fill b", cb, 4, 0, 0, {}});  // [1,2]: waits for the thread, not for stream a
  a.add({"dma a", h2d, 8, 0, 0, {}});  // [1,2]
  b.add({"dma b", h2d, 8, 0, 0, {}});  // [2,3]
  const auto r = simulate(g);
  CHECK(g.at(1).start == doctest::Approx(1.0));
  CHECK(g.at(2).start == doctest::Approx(1.0));
  CHECK(r.makespan == doctest::Approx(3.0));
  // With two callback threads the fills would overlap: 2 s.
  graph g2;
  const int cb2 = g2.add_resource({"callback", 4, 2, -1}), h2d2 = g2.add_resource({"h2d", 8, 1, -1});
  stream a2(g2), b2(g2);
  a2.add({"fill a", cb2, 4, 0, 0, {}});
  b2.add({"fill b", cb2, 4, 0, 0, {}});
  a2.add({"dma a", h2d2, 8, 0, 0, {}});
  b2.add({"dma b", h2d2, 8, 0, 0, {}});
  CHECK(simulate(g2).makespan == doctest::Approx(3.0));  // the DMA engine is now the limit: fills end at 1, DMAs 1-2, 2-3
}

TEST_CASE("sim: latency delays an op after its dependencies without holding its resource") {
  graph g;
  const int r = g.add_resource({"engine", 1, 1, -1});
  const int a = g.add({"a", r, 1, 0, 0.5, {}});       // [0.5, 1.5]
  g.add({"b", r, 1, 0, 0.25, {a}});                   // ready 1.75, [1.75, 2.75]
  g.add({"c", r, 0.5, 0, 0, {}});                     // [0, 0.5]: runs during a's latency
  const auto out = simulate(g);
  CHECK(g.at(2).start == doctest::Approx(0.0));
  CHECK(g.at(0).start == doctest::Approx(0.5));
  CHECK(g.at(1).start == doctest::Approx(1.75));
  CHECK(out.makespan == doctest::Approx(2.75));
}

TEST_CASE("sim: bad graphs are refused naming the op") {
  graph g;
  const int r = g.add_resource({"engine", 0, 1, -1});
  CHECK_THROWS_AS(g.add({"no rate", r, 1, 0, 0, {}}), std::invalid_argument);
  CHECK_THROWS_AS(g.add({"later dep", -1, 0, 0, 0, {3}}), std::invalid_argument);
  CHECK_THROWS_AS(g.add({"unknown resource", 7, 0, 0, 0, {}}), std::invalid_argument);
}

}  // namespace

// ---- the staging engine being built, as an op graph -------------------------------------

#include <algorithm>

#include "sim/cases.hpp"
#include "sim/profile.hpp"
#include "sim/workloads.hpp"

namespace {

/// A profile whose host never limits: every host rate and thread count far
/// beyond the link's, so only the copy engines and the GPU remain.
oa_sim::profile unlimited_host() {
  oa_sim::profile p;
  p.path = "test";
  for (const auto& k : oa_sim::required_parameters()) p.set(k, 1e6, "assumed", "test");
  p.set("h2d_pinned_gbps", 10, "assumed", "test");
  p.set("d2h_pinned_gbps", 10, "assumed", "test");
  p.set("both_ways_pinned_gbps", 15, "assumed", "test");
  p.set("blackscholes_kernel_ns_per_element", 0.1, "assumed", "test");
  p.set("stage_fixed_seconds", 0, "assumed", "test");
  p.set("op_latency_us", 10, "assumed", "test");
  p.set("new_wait_latency_us", 5, "assumed", "test");
  p.set("new_ring_slots", 8, "assumed", "test");
  p.set("new_slot_mib", 32, "assumed", "test");
  p.set("new_host_threads", 8, "assumed", "test");
  p.set("new_prefault_threads", 4, "assumed", "test");
  p.set("dma_host_memory_weight", 1, "assumed", "test");
  p.set("dma_segment_us", 0, "assumed", "test");  // strided DMAs at the link's rate
  return p;
}

/// 16 chunks of 2^22 units on 4 streams: two 8-byte arrays in, one out.
oa_sim::streaming_case stream_case() {
  oa_sim::streaming_case c;
  c.workload = "test";
  c.chunk_units.assign(16, std::size_t{1} << 22);
  c.units = 16 * c.chunk_units[0];
  c.streams = 4;
  c.in_unit_bytes = {8, 8};
  c.out_unit_bytes = {8};
  c.kernel_seconds_per_unit = 0.1e-9;
  return c;
}

}  // namespace

TEST_CASE("sim: the new design streams at the link bound plus one chunk's edges when the host does not limit") {
  oa_sim::profile p = unlimited_host();
  const oa_sim::streaming_case c = stream_case();
  const double in = static_cast<double>(c.in_bytes()), out = static_cast<double>(c.out_bytes());
  const double compute = static_cast<double>(c.units) * c.kernel_seconds_per_unit;
  // The edges: the first chunk's copy in runs alone, the last one's kernel and copy back after every copy in.
  const double chunk_in = in / 16 / 10e9, chunk_out = out / 16 / 10e9;
  const double edges = chunk_in + compute / 16 + chunk_out + 1e-3;  // 1 ms of op latencies
  for (const auto how : {oa_sim::staging::pinned_host, oa_sim::staging::pinned_buffers}) {
    CAPTURE(static_cast<int>(how));
    SUBCASE("a link whose both-ways cap never binds (20 GB/s for 10 + 10)") {
      // h2d 1.07 GB at 10 GB/s: 0.107 s; d2h 0.054 s; kernels 6.7 ms.
      p.set("both_ways_pinned_gbps", 20, "assumed", "test");
      const double bound = std::max({in / 10e9, out / 10e9, compute});
      CHECK(bound == doctest::Approx(oa_sim::link_bound_seconds(p, in, out)));
      CHECK(bound == doctest::Approx(oa_sim::shared_link_bound_seconds(p, in, out)));
      oa_sim::graph g = oa_sim::new_streaming(p, c, how);
      const double t = oa_sim::simulate(g).makespan;
      CHECK(t >= bound);
      CHECK(t <= bound + edges);
    }
    SUBCASE("a both-ways cap of 15 GB/s, shared in proportion while both directions run") {
      // Both at 7.5 GB/s while the copies back run (0.054 GB / 7.5 = 71.6 ms), the rest of h2d alone:
      // 0.537 GB at 10 GB/s = 53.7 ms. max(h2d / 10, total / 15) = 107 ms is out of reach.
      const double shared = out / 7.5e9 + (in - out) / 10e9;
      CHECK(shared == doctest::Approx(oa_sim::shared_link_bound_seconds(p, in, out)));
      CHECK(oa_sim::link_bound_seconds(p, in, out) == doctest::Approx(std::max(in / 10e9, (in + out) / 15e9)));
      oa_sim::graph g = oa_sim::new_streaming(p, c, how);
      const double t = oa_sim::simulate(g).makespan;
      CHECK(t >= shared);
      CHECK(t <= shared + edges);
    }
  }
}

TEST_CASE("sim: predicted streaming cases run on the CUDA device's 4 streams unless told otherwise") {
  const oa_sim::profile p = unlimited_host();
  // Black-Scholes at 8x a 4 GiB budget, as the H100 run planned it: 23 chunks on 4 streams.
  const auto c = oa_sim::plan_streaming(p, "blackscholes", 613566756, std::size_t{4} << 30, 0, false, 0);
  CHECK(c.streams == 4);
  CHECK(c.chunk_units.size() == 23);
  const auto s = oa_sim::plan_streaming(p, "blackscholes", 613566756, std::size_t{4} << 30, 0, true, 0);
  CHECK(s.streams == 1);
  CHECK(s.chunk_units.size() == 23);
}

TEST_CASE("sim: the new design's GEMM loads run the plan's lookahead steps ahead, each step timed by oa's step model") {
  oa_sim::profile p = unlimited_host();
  p.set("cublas_double_tflops", 50, "assumed", "test");
  p.set("cublas_float_tflops", 50, "assumed", "test");
  p.set("device_memory_gbps", 3000, "assumed", "test");
  p.set("gemm_unaligned_factor", 0.8, "assumed", "test");
  const oa::device_rates rates = oa_sim::profile_rates(p);
  oa_sim::gemm_case c = oa_sim::plan_gemm(2000, 8, std::size_t{24} << 20, false, 0, rates);
  CAPTURE(c.plan.describe());
  REQUIRE(c.plan.predicted_seconds > 0);  // planned by the time model
  std::vector<oa_sim::gemm_step> steps;
  oa_sim::for_each_gemm_step(c, [&](const oa_sim::gemm_step& st) { steps.push_back(st); }, [](const oa_sim::gemm_step&) {});
  REQUIRE(steps.size() > 6);
  for (int lookahead : {c.plan.lookahead, 2, 5}) {
    CAPTURE(lookahead);
    c.plan.lookahead = lookahead;
    const oa_sim::graph g = oa_sim::new_gemm(p, c, oa_sim::staging::pinned_host);
    std::vector<int> gemms, submits;  // each step's product and its loads' submission, in step order
    for (int i = 0; i < static_cast<int>(g.size()); ++i) {
      if (g.at(i).label.rfind("gemm tile ", 0) == 0) gemms.push_back(i);
      if (g.at(i).label.rfind("submit tile ", 0) == 0) submits.push_back(i);
    }
    REQUIRE(gemms.size() == steps.size());
    REQUIRE(submits.size() == steps.size());
    const auto waits_for = [&](std::size_t s, int id) {
      const auto& d = g.at(submits[s]).deps;
      return std::find(d.begin(), d.end(), id) != d.end();
    };
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const auto la = static_cast<std::size_t>(lookahead);
      if (s >= la) CHECK(waits_for(s, gemms[s - la]));
      if (s + 1 >= la && s >= 1) CHECK_FALSE(waits_for(s, gemms[s + 1 - la]));
      const auto& st = steps[s];
      CHECK(g.at(gemms[s]).work ==
            doctest::Approx(oa::detail::predicted_step_seconds(rates, 8, st.mi, st.nj, st.kl, st.kk > 0)));
    }
  }
}

TEST_CASE("sim: with one C buffer the new design's GEMM writes C back in blocks, as run_tiled does") {
  oa_sim::profile p = unlimited_host();
  p.set("cublas_double_tflops", 2, "assumed", "test");  // compute-bound: the write-back idles the GPU
  p.set("device_memory_gbps", 3000, "assumed", "test");
  const oa::device_rates rates = oa_sim::profile_rates(p);
  oa_sim::gemm_case c = oa_sim::plan_gemm(2000, 8, std::size_t{24} << 20, false, 0, rates);
  c.plan.c_buffers = 1;
  c.plan.hold = oa::detail::held_panel::none;
  const std::size_t KS = c.plan.steps_k(), tiles = c.plan.tiles_m() * c.plan.tiles_n();
  REQUIRE(KS >= 2);
  REQUIRE(tiles >= 3);
  const auto bl = oa::detail::c_write_blocks(c.plan.nt, c.plan.mt, 8);
  REQUIRE(bl.size() > 2);
  CAPTURE(c.plan.describe());
  const auto makespan = [&](int blocks) {
    c.plan.c_blocks = blocks;
    oa_sim::graph g = oa_sim::new_gemm(p, c, oa_sim::staging::pinned_host);
    return oa_sim::simulate(g).makespan;
  };
  const double whole = makespan(1), blocked = makespan(8);
  CHECK(blocked < whole);
  const oa_sim::graph g = oa_sim::new_gemm(p, c, oa_sim::staging::pinned_host);
  const auto id = [&](const std::string& label) {  // the latest op so labelled
    for (int i = static_cast<int>(g.size()) - 1; i >= 0; --i)
      if (g.at(i).label == label) return i;
    return -1;
  };
  const auto count = [&](const std::string& prefix) {
    int n = 0;
    for (int i = 0; i < static_cast<int>(g.size()); ++i) n += g.at(i).label.rfind(prefix, 0) == 0;
    return n;
  };
  const auto has = [](const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  const auto name = [](std::size_t j, std::size_t t) { return "block " + std::to_string(j) + " of tile " + std::to_string(t); };
  // Tile 0: its first and last steps per block, the steps between whole.
  CHECK(count("gemm tile 0") == static_cast<int>(KS - 2));
  CHECK(count("gemm " + name(0, 0)) == 2);
  for (std::size_t j = 0; j < bl.size(); ++j) {
    CAPTURE(j);
    const int back = id("d2h C " + name(j, 0));
    REQUIRE(back >= 0);
    // The block goes back once its product is done, not the whole tile's.
    const auto& w = g.at(back - 1);
    CHECK(w.label == "wait " + name(j, 0));
    CHECK(has(w.deps, id("gemm " + name(j, 0))));
    if (j + 1 < bl.size()) CHECK_FALSE(has(w.deps, id("gemm " + name(j + 1, 0))));
    // Tile 1's block waits for tile 0's block j only (same shape: the same bytes).
    const int wait = id("wait C " + name(j, 1));
    REQUIRE(wait >= 0);
    CHECK(has(g.at(wait).deps, back));
    if (j + 1 < bl.size()) CHECK_FALSE(has(g.at(wait).deps, id("d2h C " + name(j + 1, 0))));
  }
}

#include <filesystem>
#include <fstream>

#include "sim/replay.hpp"

TEST_CASE("sim: calibrate takes the new design's host rates from a GPU node's staging probe") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "oa_sim_probe_fit";
  std::filesystem::create_directories(dir);
  oa_sim::profile p = unlimited_host();
  SUBCASE("no probe file: nothing set") {
    std::filesystem::remove(dir / "staging_probe.json");
    CHECK(oa_sim::fit_probe(p, dir.string()).empty());
    CHECK(p["new_memcpy_gbps_per_thread"] == 1e6);
  }
  SUBCASE("host_memcpy results: measured parameters") {
    std::ofstream(dir / "staging_probe.json") << R"({"host_memcpy": {
        "setup": {"bytes": 1073741824},
        "touched T=1": {"median_gbps": 10.0, "best_gbps": 11.0},
        "touched T=8": {"median_gbps": 48.0},
        "touched T=16": {"median_gbps": 40.0},
        "untouched T=1": {"median_gbps": 2.5},
        "untouched T=4": {"skipped": "time limit"}}})";
    const auto lines = oa_sim::fit_probe(p, dir.string());
    CHECK(lines.size() == 3);
    CHECK(p["new_memcpy_gbps_per_thread"] == 10.0);  // no staging runs: the plain memcpy
    CHECK(p["new_prefault_gbps_per_thread"] == doctest::Approx(1 / (1 / 2.5 - 1 / 10.0)));
    CHECK(p["untouched_memcpy_ratio"] == doctest::Approx(0.25));
    CHECK(p["host_memcpy_cap_gbps"] == 48.0);
    CHECK(p.params.at("host_memcpy_cap_gbps").provenance == "measured");
  }
  SUBCASE("staging runs and populate: one staging thread's rate and faulting in as measured") {
    std::ofstream(dir / "staging_probe.json") << R"({"host_memcpy": {
        "touched T=1": {"median_gbps": 10.0},
        "populate T=1": {"median_gbps": 2.2},
        "populate MADV_HUGEPAGE T=1": {"median_gbps": 6.0}},
      "staging": {"runs": {
        "h2d 32MiBx8 T=1 touched wait_value": {"median_gbps": 6.5},
        "h2d 8MiBx16 T=1 touched wait_value": {"median_gbps": 7.5},
        "d2h 32MiBx8 T=1 touched wait_value": {"median_gbps": 1.0},
        "h2d 32MiBx8 T=4 touched wait_value": {"median_gbps": 20.0}}}})";
    (void)oa_sim::fit_probe(p, dir.string());
    CHECK(p["new_memcpy_gbps_per_thread"] == 7.5);  // the median of the two one-thread h2d runs (upper)
    CHECK(p["new_prefault_gbps_per_thread"] == 2.2);
    CHECK(p["new_prefault_huge_gbps_per_thread"] == 6.0);
  }
  SUBCASE("two sizes of registration: the fixed cost of one, measured") {
    // 16 MiB in 5 ms and 1 GiB in 68 ms (register and unregister): 1 ms per call.
    const double gib = 1 << 30, small = 16.0 * (1 << 20);
    const double small_per_gib = 0.005 * gib / small, large_per_gib = 0.068;
    std::ofstream(dir / "staging_probe.json") << nlohmann::json{
        {"pinning",
         {{"register touched 4KiB pages, 16 MiB",
           {{"bytes", small},
            {"register", {{"median_seconds_per_gib", 0.8 * small_per_gib}}},
            {"unregister", {{"median_seconds_per_gib", 0.2 * small_per_gib}}}}},
          {"register touched 4KiB pages",
           {{"bytes", gib},
            {"register", {{"median_seconds_per_gib", 0.05}}},
            {"unregister", {{"median_seconds_per_gib", large_per_gib - 0.05}}}}}}}};
    CHECK(oa_sim::fit_probe(p, dir.string()).size() == 1);
    CHECK(p["register_fixed_seconds_per_array"] == doctest::Approx(0.005 - (0.068 - 0.005) / (gib - small) * small));
    CHECK(p.params.at("register_fixed_seconds_per_array").provenance == "measured");
  }
  SUBCASE("cuBLAS by shape: the runtime's curve, and the steps the new design times with it") {
    nlohmann::json g;
    const auto add = [&](int m, int n, int k, double tflops) {
      g["double " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " alone"] = {
          {"median_tflops", tflops}};
    };
    add(4096, 4096, 4096, 50);
    add(4095, 4095, 4095, 40);
    for (int e = 64; e < 4096; e *= 2) {
      add(e, 4096, 4096, 45);
      add(4096, e, 4096, 45);
      add(4096, 4096, e, e < 512 ? 20 : 45);
    }
    std::ofstream(dir / "staging_probe.json") << nlohmann::json{{"gemm", g}};
    CHECK_FALSE(oa_sim::profile_shapes(p, 8));
    CHECK(oa_sim::fit_probe(p, dir.string()).size() == 1);
    const auto c = oa_sim::profile_shapes(p, 8);
    REQUIRE(c);
    CHECK(c->flops == doctest::Approx(50e12));
    CHECK(c->unaligned == doctest::Approx(0.8));
    CHECK(c->fraction[2].size() == 6);
    CHECK(c->rate(4096, 4096, 128) == doctest::Approx(20e12));
    CHECK_FALSE(oa_sim::profile_shapes(p, 4));  // no float curve measured
    CHECK(oa_sim::new_gemm_step_seconds(p, 8, 4096, 4096, 128, false) >
          oa_sim::new_gemm_step_seconds(p, 8, 4096, 4096, 1024, false) / 8 * 2);
  }
  SUBCASE("not JSON: an error naming the file") {
    std::ofstream(dir / "staging_probe.json") << "{ not json";
    CHECK_THROWS_WITH_AS(oa_sim::fit_probe(p, dir.string()), doctest::Contains("staging_probe.json"), std::runtime_error);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("sim: a product replayed as its record ran: the tiling text read back, a bad one refused naming it") {
  // Two records of the H100 run of 2026-11-26: n=16384 in 384 MiB, then in 1536 MiB.
  nlohmann::json r{{"workload", "gemm"}, {"mode", "oa"}, {"n", 16384}, {"type", "double"},
                   {"device_memory_budget", std::size_t{384} << 20},
                   {"tiling", "C tiles 8192x4096 (2x4), k steps of 640 (26), 1 C tile in flight, loads 2 steps ahead, "
                              "copy/compute 1.20 (predicted), C written back in 8 blocks"}};
  const std::size_t whole = std::size_t{16384} * 16384 * 8;
  oa_sim::gemm_case c = oa_sim::recorded_gemm(r);
  CHECK(c.n == 16384);
  CHECK(c.elem_bytes == 8);
  CHECK_FALSE(c.sequential);
  CHECK(c.plan.mt == 8192);
  CHECK(c.plan.nt == 4096);
  CHECK(c.plan.kt == 640);
  CHECK(c.plan.steps_k() == 26);
  CHECK(c.plan.hold == oa::detail::held_panel::none);
  CHECK(c.plan.c_buffers == 1);
  CHECK(c.plan.lookahead == 2);
  CHECK(c.plan.c_blocks == 8);
  CHECK(c.plan.bytes_moved == whole * (4 + 2 + 1));  // A once per column of tiles, B once per row, C once
  r["device_memory_budget"] = std::size_t{1536} << 20;
  r["tiling"] = "C tiles 8192x4096 (2x4), k steps of 4096 (4), A row panels held, 1 C tile in flight, loads 2 steps "
                "ahead, copy/compute 0.88 (predicted)";
  c = oa_sim::recorded_gemm(r);
  CHECK(c.plan.hold == oa::detail::held_panel::a_rows);
  CHECK(c.plan.c_blocks == 1);
  CHECK(c.plan.bytes_moved == whole * (1 + 2 + 1));  // A's row panels held: A once
  r["tiling"] = "C tiles 4096x4096 (4x4), k steps of 4096 (4), B column panels held, 2 C tiles in flight, loads 3 "
                "steps ahead";
  c = oa_sim::recorded_gemm(r);
  CHECK(c.plan.hold == oa::detail::held_panel::b_cols);
  CHECK(c.plan.c_buffers == 2);
  CHECK(c.plan.lookahead == 3);
  CHECK(c.plan.bytes_moved == whole * (4 + 1 + 1));
  r["tiling"] = "tiles of some size";
  CHECK_THROWS_WITH_AS(oa_sim::recorded_gemm(r), doctest::Contains("'tiles of some size'"), std::runtime_error);
  r["tiling"] = "C tiles 8192x4096 (2x4), k steps of 640 (25)";  // the counts of another n
  CHECK_THROWS_WITH_AS(oa_sim::recorded_gemm(r), doctest::Contains("does not fit n=16384"), std::runtime_error);
  r["tiling"] = "C tiles 32768x4096 (1x4), k steps of 640 (26)";
  CHECK_THROWS_WITH_AS(oa_sim::recorded_gemm(r), doctest::Contains("does not fit n=16384"), std::runtime_error);
  r["device_memory_budget"] = std::size_t{384} << 20;  // a held panel of 1 GiB in 384 MiB
  r["tiling"] = "C tiles 8192x4096 (2x4), k steps of 640 (26), A row panels held, 1 C tile in flight";
  CHECK_THROWS_WITH_AS(oa_sim::recorded_gemm(r), doctest::Contains("does not fit the record's budget"),
                       std::runtime_error);
}

TEST_CASE("sim: a strided DMA from the caller's pinned memory pays dma_segment_us per contiguous run; a slot's does not") {
  oa_sim::profile p = unlimited_host();
  p.set("cublas_double_tflops", 50, "assumed", "test");
  p.set("device_memory_gbps", 3000, "assumed", "test");
  p.set("dma_segment_us", 1, "assumed", "test");
  nlohmann::json r{{"workload", "gemm"}, {"mode", "oa"}, {"n", 2000}, {"type", "double"},
                   {"device_memory_budget", std::size_t{1} << 30},
                   {"tiling", "C tiles 1000x1000 (2x2), k steps of 500 (4), 1 C tile in flight"}};
  const oa_sim::gemm_case c = oa_sim::recorded_gemm(r);
  const auto first = [](const oa_sim::graph& g, const std::string& label) -> const oa_sim::op& {
    for (int i = 0; i < static_cast<int>(g.size()); ++i)
      if (g.at(i).label == label) return g.at(i);
    throw std::logic_error("no op '" + label + "'");
  };
  const oa_sim::graph direct = oa_sim::new_gemm(p, c, oa_sim::staging::pinned_host);
  // A's piece: 1000 rows of 500 columns, one run per column; B's: 500 of 1000 columns.
  const double a = 1000.0 * 500 * 8, b = 500.0 * 1000 * 8;
  CHECK(first(direct, "h2d A tile 0").rate == doctest::Approx(a / (a / 10e9 + 500 * 1e-6)));
  CHECK(first(direct, "h2d B tile 0").rate == doctest::Approx(b / (b / 10e9 + 1000 * 1e-6)));
  const oa_sim::graph staged = oa_sim::new_gemm(p, c, oa_sim::staging::pinned_buffers);
  CHECK(first(staged, "h2d A tile 0").rate == 0);  // the resource's rate: slots are contiguous
  oa_sim::graph strided = direct;
  const double with_runs = oa_sim::simulate(strided).makespan;
  p.set("dma_segment_us", 0, "assumed", "test");
  oa_sim::graph plain = oa_sim::new_gemm(p, c, oa_sim::staging::pinned_host);
  CHECK(first(plain, "h2d A tile 0").rate == 0);
  CHECK(with_runs > oa_sim::simulate(plain).makespan);
}
