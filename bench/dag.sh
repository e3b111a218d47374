#!/bin/bash
# The multi-kernel workloads on one emulated device, one stage at a time
# (serial) against independent stages together (oa): 4Mi elements through a
# 16 MiB budget, links of 0.5 and 2 GB/s per direction, best of 5.
#   bench/dag.sh OUT_DIR [OA_BENCH]
# Appends the tables to OUT_DIR/dag.log and writes the JSON lines to
# OUT_DIR/dag.jsonl. Emulated timings: not GPU timings.
set -euo pipefail
out=${1:?usage: bench/dag.sh OUT_DIR [OA_BENCH]}
bench=${2:-./build/release/bench/oa-bench}
mkdir -p "$out"
json=$out/dag.jsonl
rm -f "$json"
{
  for gb in 0.5 2; do
    for w in dag-image dag-ensemble dag-union; do
      echo "\$ oa-bench --workload $w --elements 4Mi --device emulated --device-memory 16MiB --link-gbps $gb --repeat 5"
      "$bench" --workload $w --elements 4Mi --device emulated --device-memory 16MiB --link-gbps $gb --repeat 5 \
        --json "$json" 2>/dev/null | tail -4
    done
  done
} | tee -a "$out/dag.log"
