#!/bin/bash
# oa-bench under mpirun on this machine's ranks: weak scaling of
# Black-Scholes (a fixed block of 2Mi elements per rank, each rank's
# emulated device with its own 0.5 GB/s link, so the ranks do not compete
# for the cores), strong scaling of the distributed reduction, scan and sort
# (16Mi int64 in all, host devices) and of a 1536^3 product (SUMMA over the
# grid nearest square), and a sort of 2^26 int64 over 4 ranks
# checked against std::sort of the gathered data. Every run --verify'd.
#   bench/dist_scaling.sh OUT_DIR [OA_BENCH]
# Appends the tables to OUT_DIR/dist-scaling.log, writes the JSON lines to
# OUT_DIR/dist-scaling.jsonl and the efficiencies to the log's end.
# Emulated timings: not GPU timings.
set -euo pipefail
out=${1:?usage: bench/dist_scaling.sh OUT_DIR [OA_BENCH]}
bench=${2:-./build/release/bench/oa-bench}
mkdir -p "$out"
json=$out/dist-scaling.jsonl
rm -f "$json"
launch=(mpirun --oversubscribe)
if ((EUID == 0)); then launch+=(--allow-run-as-root); fi
# Open MPI's shared memory moves large messages with one copy (cross-memory
# attach) where the machine allows it; where it does not, run this with
# OMPI_MCA_btl_vader_single_copy_mechanism=none (about 5x slower exchanges).
run() {
  local np=$1
  shift
  echo "\$ mpirun -np $np oa-bench $*"
  "${launch[@]}" -np "$np" "$bench" "$@" --verify --json "$json" 2>/dev/null | tail -1
}
{
  echo "oa-bench under mpirun, $(nproc) cores; $(mpirun --version | head -n 1)"
  for np in 1 2 4; do
    run $np --workload blackscholes --elements 2Mi --per-rank --device emulated --device-memory 8MiB \
      --link-gbps 0.5 --host-memory pinned --repeat 3
  done
  for w in transform_reduce scan sort; do
    for np in 1 2 4; do
      run $np --workload $w --type int64 --elements 16Mi --device host --repeat 3
    done
  done
  for np in 1 2 4; do
    run $np --workload gemm --n 1536 --device host --repeat 3
  done
  run 4 --workload sort --type int64 --elements 2^26 --device host
} | tee -a "$out/dist-scaling.log"
python3 - "$json" <<'PY' | tee -a "$out/dist-scaling.log"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def base(r):
    for b in rows:
        if b["workload"] == r["workload"] and b["ranks"] == 1 and b["per_rank"] == r["per_rank"]:
            return b
print("\nscaling efficiency against 1 rank (weak: per-rank throughput; strong: throughput / ranks)")
for r in rows:
    b = base(r)
    if not b or r["ranks"] == 1 or r["elements"] != b["elements"] * (r["ranks"] if r["per_rank"] else 1):
        continue
    kind = "weak" if r["per_rank"] else "strong"
    rate = "gflops_per_rank" if r["workload"] == "gemm" else "elements_per_second_per_rank"
    eff = r[rate] / b[rate]
    print(f'{r["workload"]:<17} {kind:<6} {r["ranks"]} ranks: {eff:.2f}')
PY
