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
