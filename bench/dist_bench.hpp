#pragma once
// oa-bench under an MPI launcher (mpirun -np N oa-bench ...): the workload
// on distributed values, each rank running its block through its own oa
// runtime and devices. --elements is the total, cut evenly over the ranks
// (or with --per-rank each rank's block); rank 0 prints the table and
// writes the records, which add the ranks, the elements per rank, the bytes
// that crossed between ranks and the largest peak host memory of a rank.
//   blackscholes, haversine, crime
//                     the paging workloads over oa::dist::array (each rank
//                     its block: no bytes between ranks but crime's sum
//                     and the checks)
//   transform_reduce  sum((a + b) * c) over oa::dist vectors
//   scan              oa::dist::inclusive_scan
//   sort              oa::dist::sort (a sample sort)

#include <cstddef>
#include <string>

#include "bench_json.hpp"
#include "bench_options.hpp"

namespace oa_bench {

struct dist_options : common_options {
  std::string workload;
  std::size_t elements = 0;  // in all, or per rank with per_rank
  bool per_rank = false;
  std::string type = "double";  // transform_reduce, scan, sort: int32, int64, float, double
};

/// Whether this process was started by an MPI launcher (Open MPI, MPICH,
/// Slurm's PMI or PMIx set these in every rank's environment).
bool under_mpi_launcher();

/// Runs the workload on every rank; rank 0 prints and writes `sink`'s
/// records (others pass nullptr). False when --verify finds an error.
bool run_dist(const dist_options& opt, json_sink* sink);

}  // namespace oa_bench
