// Ranks out of step, run under the MPI launcher on 2 ranks: `late` (rank 1
// arrives after OA_DIST_TIMEOUT: rank 0 says so naming it, and the run is
// aborted), `killed` (rank 1 is killed: the launcher ends the run naming
// it), `order` (the ranks call different collectives: each call fails
// naming the other rank and its call, later calls are refused, and the run
// is aborted at exit), `phase` (one rank gathers to one, the other to all:
// calls of one name, phases apart), `slow` (rank 1's own part of a
// reduction takes longer than the deadline: it arrived, so the sum comes),
// `long` (collectives whose names differ past what a header spells out:
// told apart all the same), `broadcast` (one rank broadcasts, the other
// waits at a barrier: named as `order`, never MPI's own failure).
// ctest matches what they print.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <oa/dist.hpp>
#include <oa/oa.hpp>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "late" && mode != "killed" && mode != "order" && mode != "phase" && mode != "slow" && mode != "long" &&
      mode != "broadcast") {
    std::fprintf(stderr, "usage: dist_faults late|killed|order|phase|slow|long|broadcast\n");
    return 2;
  }
  auto& w = oa::dist::world();
  const auto x = oa::dist::generate<double>(1000, [](std::size_t i) { return static_cast<double>(i); });
  std::fprintf(stderr, "rank %d: first sum %g\n", w.rank(), oa::dist::reduce(x, 0.0));
  if (w.rank() == 1) {
    if (mode == "killed") std::raise(SIGKILL);
    if (mode == "late") std::this_thread::sleep_for(std::chrono::duration<double>(oa::current_config().dist_timeout + 3));
  }
  if (mode == "slow") {
    const double limit = oa::current_config().dist_timeout;
    const int me = w.rank();
    const auto y = oa::dist::transform(x, [limit, me](double v) {
      if (me == 1 && v == 999.0) std::this_thread::sleep_for(std::chrono::duration<double>(limit + 2));
      return v;
    });
    std::fprintf(stderr, "rank %d: slow sum %g\n", me, oa::dist::reduce(y, 0.0));
    return 0;
  }
  if (mode == "phase") {
    try {
      const auto all = w.rank() == 0 ? x.gather(0) : x.gather();
      std::fprintf(stderr, "rank %d: gathered %zu\n", w.rank(), all.size());
    } catch (const oa::dist::error& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
    return 3;
  }
  try {
    if (mode == "long") {
      const std::string name(120, 'x');
      (void)oa::dist::each_rank<int>(w, name + (w.rank() == 1 ? "b" : "a"), [] { return 1; });
    }
    if (mode == "broadcast") {
      std::vector<std::byte> b(64);
      if (w.rank() == 0) w.broadcast("test::broadcast", 0, b)->wait();
      w.barrier("test::barrier");
      if (w.rank() == 1) w.broadcast("test::broadcast", 0, b)->wait();
    }
    if (mode == "order" && w.rank() == 1)
      std::fprintf(stderr, "rank %d: count %lld\n", w.rank(),
                   static_cast<long long>(oa::dist::count_if(x, [](double v) { return v > 10; })));
    std::fprintf(stderr, "rank %d: second sum %g\n", w.rank(), oa::dist::reduce(x, 0.0));
  } catch (const oa::dist::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    try {
      (void)oa::dist::reduce(x, 0.0);
    } catch (const oa::dist::error& later) {
      std::fprintf(stderr, "%s\n", later.what());
    }
    return 3;
  }
  return 0;
}
