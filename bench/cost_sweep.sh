#!/bin/bash
# Placement by cost against the two forced placements: Black-Scholes from
# 2^10 to 2^24 elements on the host and on a device, best of 5 each (of 25
# up to 2^16 elements, where a run takes well under a millisecond and a
# thread's wake-up is a large part of it). The device: an emulated one (64
# MiB, a 16 GB/s link per direction; the default) or the GPU (`cuda`, a 4
# GiB budget). Cost placement sets no threshold: its models
# (OA_PERF_MODELS, one file for the whole sweep) are calibrated by a first
# run of 4 at each size, then the measured run reads them. Prints, per
# size, where cost placement put the stage and its time against the better
# forced placement (the bar: at most 1.10).
#   bench/cost_sweep.sh OUT_DIR [OA_BENCH [emulated|cuda]]
# Appends the table to OUT_DIR/cost-sweep.log and writes the JSON lines to
# OUT_DIR/cost-sweep.jsonl. Emulated timings are not GPU timings.
set -euo pipefail
out=${1:?usage: bench/cost_sweep.sh OUT_DIR [OA_BENCH [emulated|cuda]]}
bench=${2:-./build/release/bench/oa-bench}
device=${3:-emulated}
mkdir -p "$out"
json=$out/cost-sweep.jsonl
models=$(mktemp)
trap 'rm -f "$models" "$models.warm"' EXIT
rm -f "$json" "$models"
case $device in
  emulated) common=(--workload blackscholes --mode oa --device-memory 64MiB --link-gbps 16)
    what="emulated device 64 MiB at 16 GB/s per direction" ;;
  cuda) common=(--workload blackscholes --mode oa --device-memory 4GiB)
    what="GPU, a 4 GiB budget" ;;
  *) echo "bench/cost_sweep.sh: the device is emulated or cuda, not '$device'" >&2; exit 2 ;;
esac
for k in 10 12 14 16 18 20 22 24; do
  echo "2^$k" >&2
  reps=$((k <= 16 ? 25 : 5))
  OA_PLACEMENT=threshold OA_HOST_THRESHOLD=0 \
    "$bench" "${common[@]}" --elements "2^$k" --device host --repeat $reps --json "$json" >/dev/null 2>&1
  OA_HOST_THRESHOLD=0 \
    "$bench" "${common[@]}" --elements "2^$k" --device "$device" --placement threshold --repeat $reps --json "$json" \
    >/dev/null 2>&1
  OA_PERF_MODELS=$models "$bench" "${common[@]}" --elements "2^$k" --device "$device" --placement cost --repeat 4 \
    --json "$models.warm" >/dev/null 2>&1
  OA_PERF_MODELS=$models "$bench" "${common[@]}" --elements "2^$k" --device "$device" --placement cost --repeat $reps \
    --json "$json" >/dev/null 2>&1
done
python3 - "$json" "$what" <<'PY' | tee -a "$out/cost-sweep.log"
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault(r["elements"], []).append(r)
where = sys.argv[2]
print(f"Black-Scholes, {where}, best of 5 (25 up to 2^16)" + ("; emulated: not GPU timings" if "emulated" in where else ""))
print(f"{'elements':>10} {'host s':>10} {'device s':>10} {'cost s':>10} {'cost ran on':>16} {'cost / best':>12}")
worst = 0.0
for n in sorted(rows):
    host, dev, cost = rows[n]
    best = min(host["seconds"], dev["seconds"])
    ratio = cost["seconds"] / best
    worst = max(worst, ratio)
    print(f"{n:>10} {host['seconds']:>10.6f} {dev['seconds']:>10.6f} {cost['seconds']:>10.6f} "
          f"{cost['device']:>16} {ratio:>12.2f}")
print(f"worst cost / best forced: {worst:.2f} (bar: at most 1.10)")
PY
