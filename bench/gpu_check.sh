#!/usr/bin/env bash
# The one script to run on a GPU machine: builds oa with CUDA, runs every
# test, the GPU tests under compute-sanitizer (memcheck, racecheck), measures
# the copy bandwidths, benchmarks the paging workloads on the GPU at data 1/4x
# to 8x a 4 GiB budget, and prints a summary. Everything lands in one folder:
# $OUT when set, else bench/results/<date>-<gpu>/.
#
# A failing step is recorded and the next one runs anyway, so one call gives
# the whole picture; the exit status is 1 when any step failed.
#
#   bench/gpu_check.sh              the full check
#   bench/gpu_check.sh --summary D  only the summary of results folder D (no GPU needed)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

budget=$((4 * 1024 ** 3))  # the device budget of the oa-bench runs: 4 GiB
budget_text=4GiB
bench_repeat=3             # best of 3: a stage's first run also compiles its kernel
build=build/gpu

# Prints, per workload and size, the seconds of each mode, oa's overlap and
# speedups, and oa's copy-in throughput against the measured pinned peak.
summarize() {
  local dir=$1 bench=$1/bench.jsonl bandwidth=$1/bandwidth.jsonl
  echo
  echo "== summary of $dir"
  if [[ ! -s "$bench" ]]; then
    echo "no benchmark records in $bench"
    return 0
  fi
  [[ -f "$bandwidth" ]] || bandwidth=/dev/null
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$bench" "$bandwidth" "$budget" <<'PY'
import json, sys

bench_path, bandwidth_path, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])

def records(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out

peak = None
for r in records(bandwidth_path):  # the last measurement wins
    peak = r.get("results", {}).get("h2d_pinned", {}).get("best_gbps", peak)

runs = {}  # (workload, elements) -> mode -> record; later records replace earlier ones
for r in records(bench_path):
    runs.setdefault((r["workload"], r["elements"]), {})[r["mode"]] = r

def secs(r):
    if r is None:
        return "-"
    if r.get("error"):
        return "failed"
    return "%.3f" % r["seconds"] if r.get("seconds") is not None else "-"

def ratio(a, b):
    if not a or not b or a.get("seconds") is None or b.get("seconds") is None or a.get("error") or b.get("error"):
        return "-"
    return "%.2fx" % (b["seconds"] / a["seconds"])

header = ["workload", "elements", "data/budget", "cpu s", "sequential s", "whole s", "oa s", "oa overlap",
          "oa vs cpu", "oa vs seq", "oa h2d GB/s", "of pinned peak"]
rows = []
for (workload, elements), modes in sorted(runs.items()):
    oa = modes.get("oa")
    any_rec = next(iter(modes.values()))
    overlap = h2d = share = "-"
    if oa and not oa.get("error"):
        if oa.get("overlap_efficiency") is not None:
            overlap = "%.2f" % oa["overlap_efficiency"]
        if oa.get("h2d_seconds"):
            gbps = oa["h2d_bytes"] / oa["h2d_seconds"] / 1e9
            h2d = "%.2f" % gbps
            if peak:
                share = "%.0f%%" % (100 * gbps / peak)
    rows.append([workload, str(elements), "%.3gx" % (any_rec["data_bytes"] / budget), secs(modes.get("cpu")),
                 secs(modes.get("sequential")), secs(modes.get("whole")), secs(oa), overlap,
                 ratio(oa, modes.get("cpu")), ratio(oa, modes.get("sequential")), h2d, share])

width = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
for n, r in enumerate([header] + rows):
    print("  ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(r)).rstrip())
    if n == 0:
        print("-" * (sum(width) + 2 * (len(width) - 1)))
print("pinned host-to-device peak (oa-bandwidth, best): " + ("%.2f GB/s" % peak if peak else "not measured"))
PY
  elif command -v jq >/dev/null 2>&1; then
    local peak
    peak=$(jq -s '[.[] | .results.h2d_pinned.best_gbps? // empty] | last // null' "$bandwidth")
    printf 'workload\telements\tdata/budget\tcpu s\tsequential s\twhole s\toa s\toa overlap\toa vs cpu\toa vs seq\toa h2d GB/s\tof pinned peak\n'
    jq -rs --argjson peak "$peak" --argjson budget "$budget" '
      def r3: if . == null then "-" else ((. * 1000 | round) / 1000 | tostring) end;
      def secs: if . == null then "-" elif .error then "failed" else (.seconds | r3) end;
      def ratio($a; $b):
        if $a == null or $b == null or $a.error or $b.error or $a.seconds == null or $b.seconds == null then "-"
        else ($b.seconds / $a.seconds | r3) + "x" end;
      group_by([.workload, .elements])[]
      | (map({key: .mode, value: .}) | from_entries) as $m
      | $m.oa as $oa
      | (if $oa != null and ($oa.error | not) and (($oa.h2d_seconds // 0) > 0)
           then $oa.h2d_bytes / $oa.h2d_seconds / 1e9 else null end) as $gbps
      | [.[0].workload, (.[0].elements | tostring), ((.[0].data_bytes / $budget | r3 | tostring) + "x"),
         ($m.cpu | secs), ($m.sequential | secs), ($m.whole | secs), ($oa | secs),
         (if $oa == null or $oa.error then "-" else ($oa.overlap_efficiency | r3) end),
         ratio($oa; $m.cpu), ratio($oa; $m.sequential), ($gbps | r3),
         (if $gbps != null and $peak != null then ((100 * $gbps / $peak | round | tostring) + "%") else "-" end)]
      | @tsv' "$bench"
    echo "pinned host-to-device peak (oa-bandwidth, best): ${peak} GB/s"
  else
    echo "neither python3 nor jq is installed: no summary (the records are in $bench and $bandwidth)"
  fi
}

if [[ "${1:-}" == "--summary" ]]; then
  [[ $# -eq 2 && -d "$2" ]] || { echo "usage: $0 [--summary RESULTS_DIR]" >&2; exit 2; }
  summarize "$2"
  exit 0
fi
if [[ $# -ne 0 ]]; then
  echo "usage: $0 [--summary RESULTS_DIR]" >&2
  exit 2
fi

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: nvidia-smi not found: this script is for a machine with an NVIDIA GPU and its driver" >&2
  exit 2
fi
if ! gpu_names=$(nvidia-smi --query-gpu=name --format=csv,noheader); then
  echo "gpu_check: nvidia-smi cannot query the GPU (is the driver loaded?)" >&2
  exit 2
fi
gpu_name=${gpu_names%%$'\n'*}
slug=$(printf '%s' "$gpu_name" | tr '[:upper:] ' '[:lower:]-' | tr -cd 'a-z0-9._-')

dir=${OUT:-bench/results/$(date -u +%Y-%m-%d)-${slug:-gpu}}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
exec > >(tee -a "$dir/gpu_check.log") 2>&1

failures=()

# step NAME COMMAND...: runs a step, records its failure and goes on.
step() {
  local name=$1 rc=0
  shift
  echo
  echo "== $name"
  if [[ "$1" == logged ]]; then
    echo "\$ ${*:3}    (output also in $2)"
  else
    echo "\$ $*"
  fi
  "$@" || rc=$?
  if ((rc != 0)); then
    echo "gpu_check: FAILED (exit $rc): $name"
    failures+=("$name (exit $rc)")
  fi
  return 0
}

# logged FILE COMMAND...: runs the command with its output also saved to FILE.
logged() {
  local file=$1
  shift
  "$@" 2>&1 | tee "$file"
}

# needs FILE NAME: a step whose binary was not built fails without running.
needs() {
  if [[ ! -x "$1" ]]; then
    echo
    echo "== $2"
    echo "gpu_check: FAILED: $1 was not built"
    failures+=("$2 (not built)")
    return 1
  fi
}

echo "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), results in $dir"
echo "gpu_check: oa at $(git rev-parse --short HEAD 2>/dev/null || echo 'unknown commit')"
step "nvidia-smi" logged "$dir/nvidia-smi.txt" nvidia-smi

step "dependencies" bash .ci/deps.sh
step "configure" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOA_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="80;90"
step "build" cmake --build "$build" -j "$(nproc)"

step "tests" logged "$dir/ctest.log" env OA_TEST_REQUIRE_GPU=1 ctest --test-dir "$build" --output-on-failure -j4

# The GPU tests under compute-sanitizer: the executables of the tests labelled gpu.
sanitizer=/usr/local/cuda/bin/compute-sanitizer
[[ -x "$sanitizer" ]] || sanitizer=$(command -v compute-sanitizer || true)
gpu_tests=()
if listing=$(ctest --test-dir "$build" -L gpu -N); then
  mapfile -t gpu_tests < <(sed -n 's/^ *Test *#[0-9]*: *\([^ ]*\).*/\1/p' <<<"$listing")
fi
if [[ -z "$sanitizer" ]]; then
  echo
  echo "gpu_check: FAILED: compute-sanitizer not found (neither /usr/local/cuda/bin nor PATH)"
  failures+=("compute-sanitizer (not found)")
elif ((${#gpu_tests[@]} == 0)); then
  echo
  echo "gpu_check: FAILED: no test carries the CTest label gpu in $build"
  failures+=("compute-sanitizer (no gpu tests)")
else
  for t in "${gpu_tests[@]}"; do
    for tool in memcheck racecheck; do
      needs "$build/tests/$t" "$tool $t" || continue
      step "$tool $t" logged "$dir/sanitizer-$tool-$t.log" env OA_TEST_REQUIRE_GPU=1 \
        "$sanitizer" --tool "$tool" --error-exitcode 1 "$build/tests/$t"
    done
  done
fi

if needs "$build/bench/oa-bandwidth" "bandwidth"; then
  step "bandwidth" "$build/bench/oa-bandwidth" --bytes 1GiB --repeat 10 --json "$dir/bandwidth.jsonl"
fi

# Data sizes as fractions of the budget; the all-at-once baseline (whole)
# only where the data fits the budget.
declare -A bytes_per_element=([blackscholes]=56 [haversine]=24)  # 7 and 3 arrays of doubles
if needs "$build/bench/oa-bench" "oa-bench"; then
  for workload in blackscholes haversine; do
    for fraction in 1/4 1/2 1/1 2/1 4/1 8/1; do
      num=${fraction%/*} den=${fraction#*/}
      n=$((num * budget / (den * bytes_per_element[$workload])))
      size="data ${fraction%/1}x budget, $n elements"
      common=(--workload "$workload" --elements "$n" --device cuda --device-memory "$budget_text" --verify
              --repeat "$bench_repeat" --json "$dir/bench.jsonl")
      step "oa-bench $workload ($size)" \
        "$build/bench/oa-bench" "${common[@]}" --mode cpu,sequential,oa
      if ((num < den)); then
        step "oa-bench $workload whole ($size)" \
          "$build/bench/oa-bench" "${common[@]}" --mode whole
      fi
    done
  done
  # Host memory: pinning each stage's arrays (register, the default) against
  # copying through pinned staging buffers, side by side at 2x and 8x.
  for fraction in 2 8; do
    n=$((fraction * budget / bytes_per_element[blackscholes]))
    step "oa-bench blackscholes staging=pinned (data ${fraction}x budget)" \
      env OA_CUDA_STAGING=pinned "$build/bench/oa-bench" --workload blackscholes --elements "$n" --device cuda \
      --device-memory "$budget_text" --verify --repeat "$bench_repeat" --mode sequential,oa \
      --json "$dir/bench_staging_pinned.jsonl"
  done
fi

summarize "$dir"

echo
if ((${#failures[@]})); then
  echo "gpu_check: ${#failures[@]} step(s) FAILED:"
  printf '  %s\n' "${failures[@]}"
  echo "gpu_check: results and logs in $dir"
  exit 1
fi
echo "gpu_check: every step passed; results and logs in $dir"
