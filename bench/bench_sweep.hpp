#pragma once
// What the threshold sweeps (oa-offload-sweep, oa-stdpar-sweep) share: a
// run timed through the engine's runtime, the best of interleaved runs, the
// size from which the engine pays, and how their main() ends.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_table.hpp"
#include "oa/oa.hpp"

namespace oa_bench {

/// Seconds of `run()` with `engine` as the calling thread's runtime (its
/// reports cleared first). Throws when the engine noted a call of `op` it
/// left to the library or Eigen, naming `what` and the reason: the time
/// would not be the engine's.
template <class Run>
double time_through_engine(oa::runtime& engine, const std::string& op, const std::string& what, Run&& run) {
  engine.clear_reports();
  double s;
  {
    oa::runtime::use on(engine);
    const auto t0 = clock_type::now();
    run();
    s = seconds_since(t0);
  }
  for (const auto& d : engine.not_offloaded())
    if (d.op == op)
      throw std::runtime_error(format("the engine did not run %s: %s", what.c_str(), d.reason.c_str()));
  return s;
}

/// The best of `repeat` runs of each way, interleaved, so that both see the
/// same machine state (turbo and caches included): `other()` and `oa()`
/// return a run's seconds.
template <class Other, class Oa>
void best_interleaved(int repeat, double& other_best, double& oa_best, Other&& other, Oa&& oa) {
  for (int r = 0; r < repeat; ++r) {
    other_best = std::min(other_best, other());
    oa_best = std::min(oa_best, oa());
  }
}

/// The crossover of sizes measured in increasing order: the index of the
/// first of the run of them, up to the largest, where the engine is at least
/// as fast (speedup() >= 1); points.size() when it is slower at the largest.
/// The true crossover lies between that size and the one below it, so a
/// threshold set there errs towards the other way.
template <class Point>
std::size_t crossover(const std::vector<Point>& points) {
  std::size_t from = points.size();
  while (from > 0 && points[from - 1].speedup() >= 1) --from;
  return from;
}

/// A sweep's record of one size: the best seconds of `other` (the way the
/// engine is compared with: "eigen", "par") and of oa, their ratio, and
/// where and when they were measured; the caller adds what it measured.
inline nlohmann::json sweep_record(const char* tool, const char* version, const std::string& device,
                                   int repeat, const char* other, double other_seconds, double oa_seconds) {
  nlohmann::json record = {{"tool", tool},
                           {std::string(other) + "_seconds", other_seconds},
                           {"oa_seconds", oa_seconds},
                           {"speedup", other_seconds / oa_seconds},
                           {"device", device},
                           {"repeat", repeat},
                           {"hostname", hostname()},
                           {"timestamp", utc_timestamp()},
                           {"oa_version", version}};
  // Other work on the machine slows both ways, unevenly: the record says how much there was.
  double load[1];
  if (::getloadavg(load, 1) == 1) record["load1"] = load[0];
  return record;
}

/// The options every sweep takes: --repeat and --json (a record per `what`).
inline void add_sweep_options(CLI::App& app, int& repeat, std::string& json, const std::string& what) {
  app.add_option("--repeat", repeat, "timed runs of each, after a warm-up; the fastest counts")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--json", json, "append one JSON object per " + what + " to FILE (JSON Lines)");
}

/// Sizes in increasing order, each once.
template <class N>
void sort_sizes(std::vector<N>& sizes) {
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
}

/// Runs `sweep(sink)`, `sink` appending to the file `json` names (null when
/// it names none); the exit status: 0, 2 on a configuration error (a bad
/// OA_* value, a device that cannot be used, a file that cannot be opened,
/// sizes whose data this machine cannot hold: std::length_error), 1 on any
/// other error, its message on stderr after what was printed so far.
template <class Sweep>
int run_sweep(const char* tool, const std::string& json, Sweep&& sweep) {
  const auto failed = [&](const std::exception& e, int status) {
    std::cout << std::flush;
    std::cerr << tool << ": " << e.what() << '\n';
    return status;
  };
  std::optional<json_sink> sink;
  try {
    if (!json.empty()) sink.emplace(json);
  } catch (const std::exception& e) {
    return failed(e, 2);
  }
  try {
    sweep(sink ? &*sink : nullptr);
    return 0;
  } catch (const oa::config_error& e) {
    return failed(e, 2);
  } catch (const std::length_error& e) {
    return failed(e, 2);
  } catch (const std::exception& e) {
    return failed(e, 1);
  }
}

}  // namespace oa_bench
