#pragma once
// oa-bench's multi-kernel workloads, after GrCUDA's: programs whose calls
// form several independent stages, run one stage at a time (mode serial:
// OA_SERIAL_STAGES) and as a DAG, independent stages together on the
// device's streams (mode oa), side by side. Inputs live in oa's pinned
// pool (copied directly); results are the vectors oa makes.
//   dag-image     the planes of a YUV 4:2:0 image (luma of n pixels, two
//                 chroma planes of n/4): luma through contrast and edge
//                 filters (two planes back, and their energy), chroma into
//                 colour statistics
//   dag-ensemble  three models over the same n samples: a linear score
//                 (element-wise), a rank model (a sort of a copy) and a
//                 trend model (a prefix sum), combined on the host
//   dag-union     a union of independent sub-queries over tables of n (two
//                 columns), n/2, n/4 and n/8 rows: three aggregates and
//                 projections (two computed columns of the n/2 table, one of
//                 the n/8)

#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_options.hpp"

namespace oa_bench {

struct dag_options : common_options {
  std::string workload = "dag-union";
  std::size_t elements = 0;
};

/// serial, oa.
const std::vector<std::string>& dag_modes();

/// Runs the modes, prints the table, appends records to `sink`. Returns
/// false when a mode's results differ from mode serial's (they must be
/// bit for bit the same) or a requested mode cannot run.
bool run_dag(const dag_options& opt, json_sink* sink);

}  // namespace oa_bench
