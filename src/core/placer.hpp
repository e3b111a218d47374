#pragma once
// Where a stage runs when OA_PLACEMENT=cost: on the device a stage's
// capabilities allow (stage_plan.hpp's place_stage, without a size
// threshold) or on the host, whichever is predicted to finish first. The
// host's time is its model's (perf_model.hpp); the device's is its model of
// what the link did not explain in earlier runs (fixed costs, compute the
// copies did not hide) plus the copies the link model predicts for the
// bytes not already resident there, the busier direction (StarPU's dmda,
// alpha T_exec + beta T_transfer, for two units). A side never measured
// for a kind of stage at about its size runs it there first (calibration:
// twice, perf_model.hpp).

#include <string>
#include <unordered_set>
#include <vector>

#include "core/perf_model.hpp"
#include "core/stage_plan.hpp"

namespace oa::detail {

/// What cost placement knows of a stage before it runs.
struct stage_cost {
  std::string op;        // the model's key: the stage's calls
  double bytes = 0;      // bytes it touches
  double in_bytes = 0;   // to copy to the device: inputs not resident there
  double out_bytes = 0;  // to copy back
};
/// `staged`, when given, is the stage's staged layout (place_stage's).
stage_cost cost_of(const stage& s, const std::vector<call_node>& nodes,
                   const std::unordered_set<const value_state*>& needed_on_host, residency* resident,
                   const stage_layout* staged = nullptr);

/// The devices a stage placed on "the device" runs on: `capable.where`
/// alone, or several sharing its chunks. Several have one model together,
/// under their joined name ("emulated:0 + emulated:1"), and links that add up.
struct device_group {
  std::vector<device*> devices;
  std::string name() const;
  device_rates rates() const;
};

/// `capable` is the placement without a threshold; with its device the
/// host's, returns it. Otherwise the side predicted to finish first (the
/// host, or `group`, whose first device is capable's), its prediction in
/// `predicted_seconds` (0 while calibrating).
placement place_by_cost(const stage_cost& c, const placement& capable, device& host, const perf_models& models,
                        double& predicted_seconds, const device_group& group);

/// The time a model learns from a stage that ran on the host (`group`
/// empty) or on `group`: the wall time on the host, on devices the wall
/// time less the busier copy direction (per device, where several ran it).
void learn(perf_models& models, const stage_cost& c, const device_group& group, const stage_report& rep);

}  // namespace oa::detail
