#!/usr/bin/env bash
# Runs a workload on the emulated device at every budget in a range and checks
# that each run either gives the exact result (the host path with Eigen's own
# math, so element-wise results match the reference bit for bit; a sum over
# chunks may differ from the one-pass sum by rounding: --tolerance) or stops
# at planning with oa::plan_error naming the smallest budget that runs it:
# never an out-of-memory abort, never a wrong result.
#
#   bench/budget_sweep.sh [--workload W] [--elements N] [--from B] [--to B] [--step S]
#                         [--tolerance E] [--bench PATH]
set -euo pipefail

workload=blackscholes elements=2000 from=64 to=8192 step=1 tolerance=0
bench=build/release/bench/oa-bench
while (($#)); do
  case $1 in
    --workload) workload=$2; shift 2 ;;
    --elements) elements=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    --to) to=$2; shift 2 ;;
    --step) step=$2; shift 2 ;;
    --tolerance) tolerance=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    *) echo "budget_sweep: unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x $bench ]] || { echo "budget_sweep: no oa-bench at $bench (build first, or pass --bench)" >&2; exit 2; }

exact=0 refused=0 bad=0 named=
for ((b = from; b <= to; b += step)); do
  set +e
  out=$(OA_HOST_THRESHOLD=0 OA_HOST_MATH=eigen OA_PROGRESS=0 "$bench" --workload "$workload" --elements "$elements" \
        --device emulated --device-memory "$b" --mode oa --verify 2>&1)
  rc=$?
  set -e
  err=$(awk '$1 == "oa" {print $NF}' <<<"$out")
  if ((rc == 0)) && [[ -n $err ]] && awk -v e="$err" -v t="$tolerance" 'BEGIN {exit !(e + 0 <= t + 0)}'; then
    exact=$((exact + 1))
  elif ((rc == 2)) && n=$(grep -o 'the smallest budget that runs it is [0-9]* bytes' <<<"$out"); then
    refused=$((refused + 1))
    named=${n//[!0-9]/}
  else
    bad=$((bad + 1))
    echo "budget $b: status $rc"
    tail -3 <<<"$out"
  fi
  if (((b - from) % (step * 512) == 0)); then echo "  ... budget $b: exact $exact, plan_error $refused, other $bad"; fi
done
echo "$workload, $elements elements, budgets $from..$to step $step: exact (error <= $tolerance) $exact, plan_error $refused${named:+ (naming $named bytes)}, other $bad"
((bad == 0))
