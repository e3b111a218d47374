#pragma once
// Replaying a committed GPU run: its cases, the calibration of a profile on
// them (measured values from the records, fitted ones on a fit set), and
// the old design's prediction of each case.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/profile.hpp"

namespace oa_sim {

struct replay_case {
  std::string file, workload, mode, staging, type;
  std::size_t elements = 0, n = 0, budget = 0, data_bytes = 0;
  double measured = 0, predicted = 0;
  bool fit = false;  // in the fit set (else held out)
  nlohmann::json record;
};

/// The pinned and pageable link rates and device memory's copy rate from the
/// folder's bandwidth.jsonl (oa-bandwidth). Throws naming a missing file.
void measure_links(profile& p, const std::string& folder);

/// The records of a run of the staging engine: the folder's bench.jsonl, a
/// record without host_memory taken as pageable (oa-bench's default). Throws
/// naming a missing file.
std::vector<nlohmann::json> load_engine_records(const std::string& folder);

/// Every oa and sequential record of the folder's streaming and GEMM files.
/// Files named *staging_pinned* / *staging-pinned* ran pinned staging; the
/// others registered (that run's default). Throws naming a missing file.
std::vector<replay_case> load_cases(const std::string& folder);

/// The old design's simulated seconds for one case.
double predict_case(const profile& p, const replay_case& c);

/// Sets the measured and fitted parameters of `p` from the folder and its
/// cases (marking the fit set); returns lines describing each fit.
std::vector<std::string> calibrate(profile& p, const std::string& folder, std::vector<replay_case>& cases);

/// The new design's host parameters (memcpy per thread into touched pages,
/// first touch per thread, all threads' copy rate) from the folder's
/// staging_probe.json, when there is one with host_memcpy results; one line
/// per parameter set. Throws naming the file when it is not JSON.
std::vector<std::string> fit_probe(profile& p, const std::string& folder);

/// Marks the fit set: streaming register records at 1/4x, 1x and 4x the
/// budget, and the streaming pinned-staging record; the rest is held out.
void mark_fit_set(std::vector<replay_case>& cases);

}  // namespace oa_sim
