#!/usr/bin/env bash
# The one script to run on a GPU machine: measures what host staging can do
# on this node (bench/staging_probe.cu), builds oa with CUDA, runs every
# test, the GPU tests under compute-sanitizer (memcheck, racecheck), measures
# the copy bandwidths, benchmarks the paging workloads on the GPU at data 1/4x
# to 8x a 4 GiB budget, and writes a summary. It runs offline: the libraries
# come from the bundle of bench/bundle_deps.sh (.deps/) when there is one.
#
#   bench/gpu_check.sh                    every phase, one after the other (probe first)
#   bench/gpu_check.sh --phase probe      the staging probe alone: nvcc compiles one file, no oa build
#   bench/gpu_check.sh --phase build-test deps, configure, build, tests, compute-sanitizer
#   bench/gpu_check.sh --phase bench      bandwidth and paging benchmarks (builds oa-bench first if needed)
#   bench/gpu_check.sh --phase gemm       out-of-core GEMM against cuBLAS, cuBLASXt and NVBLAS
#   bench/gpu_check.sh --phase node       the node's devices at once: the multi-kernel set (serial against
#                                         oa), a host stage beside a GPU stage in a trace, placement by cost
#                                         from 2^10 to 2^24, several GPUs when there are
#   bench/gpu_check.sh --phase bars       the GPU bars in one short command (about 8 min on an H100 node):
#                                         the quick probe, bandwidth, Black-Scholes at 8x the budget from
#                                         pageable and pinned arrays, DGEMM n=16384 at 4x and 16x against
#                                         in-core cuBLAS (pageable and pinned), a traced 2x run for oa-sim,
#                                         the multi-kernel set at 64Mi through 256 MiB (--no-node: not
#                                         it, after a --phase node in the same session)
#   bench/gpu_check.sh --phase dist       oa::dist under mpirun on the GPU (about 3 min): whether the MPI
#                                         build is CUDA-aware, then Black-Scholes per rank on 1 and 2 ranks,
#                                         a sort of 2^26 int64 and a product n=8192 over 2 ranks, each rank
#                                         on the GPU (two ranks share one), every run --verify'd (dist.jsonl)
#   bench/gpu_check.sh --summary DIR      only the summary of results folder D (no GPU needed)
# Options of the phases: --build DIR (default build/gpu), --time-limit S (a phase stops starting steps that
# would not end within S seconds of its start; default 540 for each phase
# alone, none for all), --workloads LIST and --sizes LIST (bench: e.g.
# --workloads haversine --sizes 4,8 to finish a sweep another call cut short).
#
# Each phase fits one 10-minute command of a GPU node (16 cores). Measured on
# an H100 node (bench/results/2026-11-23-h100; summary.txt lists each step's
# seconds):
#   probe       (not yet timed on a node) nvcc of bench/staging_probe.cu, 15 s
#               on 2 cores; the probe stops starting measurements after 360 s
#               (or the phase's time left) and writes staging_probe.json: the
#               machine, host memcpy and first-touch rates, pinning costs,
#               pinned and pageable DMA rates and latencies, host functions'
#               concurrency, stream memory operations, staging through a ring
#               of pinned slots by 1-8 host threads, cuBLAS GEMM rates alone
#               and beside a DMA loop.
#   build-test  configure 8 s, build 53 s, tests 15 s, memcheck of test_cuda
#               25 s, racecheck of test_cuda without its cuBLAS cases (racecheck
#               looks for shared-memory races in kernels: cuBLAS's are not
#               ours, and took over 7 min) about 2-3 min.
#   gemm        about 2.5 min: three runs of 50 s (reference on every core,
#               five modes best of 2).
#   node        166 s on an H100 node (bench/results/2026-11-27-h100; the
#               two traces of dag-image and dag-union added since, ~15 s):
#               dag-image, dag-ensemble and
#               dag-union at 16Mi elements in a 4 GiB budget (in core) and
#               64Mi through 256 MiB (the link bounds), modes serial and oa,
#               best of 3 (dag.jsonl); each at 64Mi traced, dag-ensemble's read by
#               bench/trace_overlap.py (the sort's merge on the host beside
#               the GPU's stages); bench/cost_sweep.sh on the GPU
#               (cost-sweep.jsonl, cost-sweep.log); with two GPUs or more,
#               Black-Scholes at 8x the budget on one and on two.
#   bench       about 8 min (the last size of haversine and the staging run at
#               8x need a second call: --workloads haversine --sizes 8);
#               bandwidth 6 s; per workload and size one
#               oa-bench process (inputs drawn once, the cpu reference computed
#               once on every core and reused by every mode; modes sequential
#               and oa best of 2, whole where the data fits the budget, cpu
#               only at the smallest size: its time grows linearly with the
#               elements, so the summary scales it); then pinned staging
#               against registration, and arrays in oa's pinned pool (records
#               with "host_memory": "pinned", in bench.jsonl), at 2x and 8x;
#               the 2x pageable run's OA_TRACE goes with the raw logs. Sizes run smallest first,
#               both workloads in turn; a step the time limit cannot hold is
#               listed as not run, with the call that runs what is left.
# Without a GPU (no nvidia-smi, or it cannot query one) every step that needs
# none still runs; the GPU steps are listed as not run (no GPU).
#
# Results go to $OUT when set, else bench/results/<date>-<gpu>/, as at most
# eight files: summary.txt (steps with status and seconds, the benchmark
# table), gpu_check.log (the console), staging_probe.json, bench.jsonl,
# bench_staging_register.jsonl, bench_stl.jsonl, bandwidth.jsonl, dist.jsonl,
# logs-<phase>.tar.gz (raw logs: ctest, sanitizers, each step's output). A
# failing step is recorded and the next one runs anyway.
# Exit status: 0 every step passed; 1 a step failed or did not fit the time
# limit; 3 no GPU here, and every step that needs none passed; 2 bad usage.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

budget=$((4 * 1024 ** 3))  # the device budget of the oa-bench runs: 4 GiB
budget_text=4GiB
bench_repeat=2             # best of 2: a stage's first run also compiles its kernel
build=build/gpu
all_workloads=(blackscholes haversine)
all_sizes=(1/4 1/2 1 2 4 8)  # data as fractions of the budget
staging_sizes=(2 8)
declare -A bytes_per_element=([blackscholes]=56 [haversine]=24)  # 7 and 3 arrays of doubles

# Prints, per workload and size, the seconds of each mode, oa's overlap and
# speedups, and oa's copy-in throughput against the measured pinned peak.
summarize() {
  local dir=$1 bench=$1/bench.jsonl bandwidth=$1/bandwidth.jsonl staging=$1/bench_staging_register.jsonl
  echo
  echo "== benchmarks in $dir"
  if [[ ! -s "$bench" ]]; then
    echo "no benchmark records in $bench"
    return 0
  fi
  [[ -f "$bandwidth" ]] || bandwidth=/dev/null
  [[ -f "$staging" ]] || staging=/dev/null
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$bench" "$bandwidth" "$staging" "$budget" <<'PY'
import json, sys

bench_path, bandwidth_path, staging_path, budget = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

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

peak = d2h_peak = both_peak = None
for r in records(bandwidth_path):  # the last measurement wins
    res = r.get("results", {})
    peak = res.get("h2d_pinned", {}).get("best_gbps", peak)
    d2h_peak = res.get("d2h_pinned", {}).get("best_gbps", d2h_peak)
    both_peak = res.get("bidirectional_pinned", {}).get("best_gbps", both_peak)

def link_seconds(r):
    """The least time the pinned link needs for the bytes a run moved (each direction, and both at once)."""
    if not (peak and d2h_peak and both_peak):
        return None
    h, d = r.get("h2d_bytes") or 0, r.get("d2h_bytes") or 0
    return max(h / peak, d / d2h_peak, (h + d) / both_peak) / 1e9

def by_size(path):
    runs = {}  # (workload, elements, host memory) -> mode -> record; later records replace earlier ones
    for r in records(path):
        if r["workload"] in ("blackscholes", "haversine"):
            runs.setdefault((r["workload"], r["elements"], r.get("host_memory", "pageable")), {})[r["mode"]] = r
    return runs

def ok(r):
    return r is not None and not r.get("error") and r.get("seconds") is not None

def secs(r):
    if r is None:
        return "-"
    return "%.3f" % r["seconds"] if ok(r) else "failed"

def ratio(a, b_seconds, mark=""):
    if not ok(a) or not b_seconds:
        return "-"
    return "%s%.2fx" % (mark, b_seconds / a["seconds"])

def table(header, rows):
    width = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    for n, r in enumerate([header] + rows):
        print("  ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(r)).rstrip())
        if n == 0:
            print("-" * (sum(width) + 2 * (len(width) - 1)))

runs = by_size(bench_path)
# Single-threaded plain Eigen streams through the arrays: its time grows
# linearly with the elements, so one measured size gives the others.
cpu_rate = {}
for (workload, elements, _), modes in sorted(runs.items()):
    if ok(modes.get("cpu")):
        cpu_rate[workload] = (modes["cpu"]["seconds"] / elements, elements)

rows = []
scaled = False
for (workload, elements, memory), modes in sorted(runs.items()):
    oa = modes.get("oa")
    any_rec = next(iter(modes.values()))
    cpu = modes.get("cpu")
    cpu_text, cpu_seconds, mark = secs(cpu), cpu["seconds"] if ok(cpu) else None, ""
    if cpu is None and workload in cpu_rate:
        cpu_seconds, mark = cpu_rate[workload][0] * elements, "~"
        cpu_text, scaled = "~%.3f" % cpu_seconds, True
    seq = modes.get("sequential")
    overlap = h2d = share = wall = "-"
    if ok(oa):
        if peak and oa.get("h2d_bytes"):
            wall = "%.0f%%" % (100 * oa["h2d_bytes"] / oa["seconds"] / 1e9 / peak)
        if oa.get("overlap_efficiency") is not None:
            overlap = "%.2f" % oa["overlap_efficiency"]
        if oa.get("h2d_seconds"):
            gbps = oa["h2d_bytes"] / oa["h2d_seconds"] / 1e9
            h2d = "%.2f" % gbps
            if peak:
                share = "%.0f%%" % (100 * gbps / peak)
    rows.append([workload, str(elements), "%.3gx" % (any_rec["data_bytes"] / budget), memory, cpu_text, secs(seq),
                 secs(modes.get("whole")), secs(oa), overlap, ratio(oa, cpu_seconds, mark),
                 ratio(oa, seq["seconds"] if ok(seq) else None), h2d, share, wall])
table(["workload", "elements", "data/budget", "host memory", "cpu s", "sequential s", "whole s", "oa s",
       "oa overlap", "oa vs cpu", "oa vs seq", "oa h2d GB/s", "of pinned peak", "h2d/wall of peak"], rows)
print("of pinned peak: oa's copy-in rate while its engine was busy; h2d/wall of peak: the bytes oa copied in"
      " over its wall time, against the peak (the link-rate bar)")
if scaled:
    print("~: cpu seconds scaled from the cpu run at " +
          ", ".join("%s %d elements" % (w, e) for w, (_, e) in sorted(cpu_rate.items())))
print("pinned host-to-device peak (oa-bandwidth, best): " + ("%.2f GB/s" % peak if peak else "not measured"))

gemm = {}  # (type, n, budget) -> mode -> record; the in-core modes (the same at every budget) under each
incore = {}  # (type, n) -> mode -> record: cublas, cublasxt, nvblas
for r in records(bench_path):
    if r["workload"] == "gemm":
        if r["mode"] in ("cublas", "cublasxt", "nvblas"):
            incore.setdefault((r["type"], r["n"]), {})[r["mode"]] = r
        else:
            gemm.setdefault((r["type"], r["n"], r.get("device_memory_budget"), r.get("host_memory", "pageable")),
                            {})[r["mode"]] = r
for (kind, n, _, _), modes in gemm.items():
    for mode, r in incore.get((kind, n), {}).items():
        modes.setdefault(mode, r)
if gemm:
    print()
    print("out-of-core GEMM (C = A B): oa against in-core cuBLAS (the ceiling) and cuBLASXt, same matrices")
    rows = []
    for (kind, n, _, memory), modes in sorted(gemm.items()):
        oa, cb, xt, nv = modes.get("oa"), modes.get("cublas"), modes.get("cublasxt"), modes.get("nvblas")
        gf = lambda r: "%.0f" % r["gflops"] if ok(r) else "failed" if r else "-"
        share = lambda a, b: "%.0f%%" % (100 * a["gflops"] / b["gflops"]) if ok(a) and ok(b) else "-"
        rows.append([kind, str(n), "%.1fx" % (oa["data_bytes"] / oa["device_memory_budget"]) if ok(oa) else "-", memory,
                     gf(modes.get("sequential")), gf(oa), gf(cb), share(oa, cb), gf(xt), share(oa, xt), gf(nv),
                     "%.2f" % oa["bytes_over_lower_bound"] if ok(oa) and oa.get("bytes_over_lower_bound") else "-",
                     "%.2f" % oa["overlap_efficiency"] if ok(oa) and oa.get("overlap_efficiency") else "-",
                     "%.1e" % oa["max_rel_error"] if ok(oa) and oa.get("max_rel_error") is not None else "-"])
    table(["type", "n", "operands/budget", "host memory", "sequential GFLOP/s", "oa GFLOP/s", "cublas GFLOP/s", "oa/cublas",
           "cublasxt GFLOP/s", "oa/cublasxt", "nvblas GFLOP/s", "moved/LB", "overlap", "max_rel_error"], rows)
    rows = []
    for (kind, n, _, memory), modes in sorted(gemm.items()):
        oa, cb = modes.get("oa"), modes.get("cublas")
        if not ok(oa):
            continue
        link = link_seconds(oa)
        bound = max(link or 0, cb["seconds"] if ok(cb) else 0)
        rows.append([kind, str(n), "%.1fx" % (oa["data_bytes"] / oa["device_memory_budget"]), memory, "%.3f" % oa["seconds"],
                     "%.3f" % link if link else "-", "%.3f" % cb["seconds"] if ok(cb) else "-",
                     "%.0f%%" % (100 * bound / oa["seconds"]) if bound else "-"])
    print()
    print("oa's GEMM against its bound: the pinned link for the bytes oa moved, or in-core cuBLAS, the longer")
    table(["type", "n", "operands/budget", "host memory", "oa s", "link s", "cublas s", "bound/oa"], rows)

staging_runs = by_size(staging_path)
if staging_runs:
    print()
    print("host memory: staging through pinned buffers (the default) against registering the arrays (OA_CUDA_STAGING=register)")
    rows = []
    for (workload, elements, memory), modes in sorted(staging_runs.items()):
        staged = runs.get((workload, elements, memory), {}).get("oa")
        registered = modes.get("oa")
        rows.append([workload, str(elements), secs(staged), secs(registered),
                     ratio(staged, registered["seconds"] if ok(registered) else None)])
    table(["workload", "elements", "oa staging s", "oa registered s", "staging vs registered"], rows)
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
      group_by([.workload, .elements, (.host_memory // "pageable")])[]
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

usage() {
  echo "usage: $0 [--phase all|probe|build-test|bench|gemm|node|bars|dist] [--build DIR] [--time-limit SECONDS] [--workloads LIST]" \
    "[--sizes LIST] [--no-node]" >&2
  echo "       $0 --summary RESULTS_DIR" >&2
  exit 2
}

phase=all
time_limit=
no_node=
workloads=("${all_workloads[@]}")
sizes=("${all_sizes[@]}")
while (($#)); do
  case $1 in
    --summary)
      [[ $# -eq 2 && -d "$2" ]] || usage
      summarize "$2"
      exit 0
      ;;
    --phase)
      [[ $# -ge 2 && "$2" =~ ^(all|probe|build-test|bench|gemm|node|bars|dist)$ ]] || usage
      phase=$2
      shift 2
      ;;
    --build)
      [[ $# -ge 2 && -n "$2" ]] || usage
      build=$2
      shift 2
      ;;
    --no-node)
      no_node=1
      shift
      ;;
    --time-limit)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage
      time_limit=$2
      shift 2
      ;;
    --workloads)
      [[ $# -ge 2 ]] || usage
      IFS=, read -r -a workloads <<<"$2"
      for w in "${workloads[@]}"; do [[ -n "${bytes_per_element[$w]:-}" ]] || usage; done
      shift 2
      ;;
    --sizes)
      [[ $# -ge 2 ]] || usage
      IFS=, read -r -a sizes <<<"$2"
      for s in "${sizes[@]}"; do [[ "$s" =~ ^[0-9]+(/[0-9]+)?$ ]] || usage; done
      shift 2
      ;;
    *) usage ;;
  esac
done
if [[ -z "$time_limit" ]]; then
  [[ $phase == all ]] && time_limit=0 || time_limit=540
fi

# The GPU, or why there is none: the build and the tests that need no GPU run either way.
gpu_name='' no_gpu=''
if ! command -v nvidia-smi >/dev/null 2>&1; then
  no_gpu="nvidia-smi not found"
elif ! gpu_names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1); then
  no_gpu="nvidia-smi cannot query a GPU: ${gpu_names%%$'\n'*}"
else
  gpu_name=${gpu_names%%$'\n'*}
fi
slug=$(printf '%s' "${gpu_name:-no-gpu}" | tr '[:upper:] ' '[:lower:]-' | tr -cd 'a-z0-9._-')

dir=${OUT:-bench/results/$(date -u +%Y-%m-%d)-$slug}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
raw=$dir/raw-$phase  # packed into logs-$phase.tar.gz at the end
rm -rf "$raw"
mkdir -p "$raw"
exec > >(tee -a "$dir/gpu_check.log") 2>&1

# The dependency bundle, for this script's builds and the nested ones of the tests.
bundle=${OA_DEPS_BUNDLE:-$repo/.deps}
if [[ -f "$bundle/BUNDLE.txt" ]]; then
  export CMAKE_PREFIX_PATH="$bundle${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi

failures=() not_run=() step_lines=()
deadline=$((time_limit > 0 ? SECONDS + time_limit : 0))

# record STATUS SECONDS NAME: one line of the step table in summary.txt.
record() {
  step_lines+=("$(printf '%-8s %7s  %s' "$1" "$2" "$3")")
}

# skip NAME WHY: a step that is not run (no GPU, or no time left).
skip() {
  echo
  echo "== $1"
  echo "gpu_check: NOT RUN: $2"
  not_run+=("$1 ($2)")
  record "not run" - "$1 ($2)"
}

# step NAME LOG COMMAND...: runs the command within the phase's time left,
# its output shown and saved to raw/LOG.log; a failure is recorded and the
# script goes on. NEED=S in the environment: the seconds the step is
# expected to take; it is not started when fewer are left. MAX=S: the step
# is stopped after S seconds (a hang costs one step, not the phase).
step() {
  local name=$1 log=$raw/$2.log rc=0 t0=$SECONDS limit=()
  shift 2
  last_rc=
  if ((deadline)); then
    local left=$((deadline - SECONDS))
    if ((left < ${NEED:-30})); then
      skip "$name" "${left} s of the phase's time limit left, needs ~${NEED:-30} s"
      return 0
    fi
    limit=(timeout -k 10 "$left")
  fi
  if [[ -n "${MAX:-}" ]] && { ((!deadline)) || ((MAX < deadline - SECONDS)); }; then
    limit=(timeout -k 10 "$MAX")
  fi
  echo
  echo "== $name"
  echo "\$ $*"
  { "${limit[@]}" "$@" 2>&1; } | tee "$log" || rc=$?
  local took=$((SECONDS - t0))
  last_rc=$rc
  if ((rc == 0)); then
    record passed "$took" "$name"
  elif (((deadline || ${MAX:-0}) && (rc == 124 || rc == 137))); then
    echo "gpu_check: FAILED: $name was stopped by its time limit after $took s"
    failures+=("$name (stopped by the time limit)")
    record "timeout" "$took" "$name"
  else
    echo "gpu_check: FAILED (exit $rc): $name"
    failures+=("$name (exit $rc)")
    record failed "$took" "$name"
  fi
}

# needs FILE NAME: a step whose binary was not built fails without running.
needs() {
  [[ -x "$1" ]] && return 0
  echo
  echo "== $2"
  echo "gpu_check: FAILED: $1 was not built"
  failures+=("$2 (not built)")
  record failed - "$2 ($1 not built)"
  return 1
}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo 'unknown commit')
echo "gpu_check: phase $phase, $(date -u +%Y-%m-%dT%H:%M:%SZ), oa at $commit, results in $dir"
if ((time_limit)); then
  echo "gpu_check: time limit ${time_limit} s for the phase"
fi
if [[ -n "$no_gpu" ]]; then
  echo "gpu_check: NO GPU here ($no_gpu): the build and the tests that need no GPU run; the GPU steps are" \
    "listed as not run. Run this on a machine with an NVIDIA GPU and its driver for the full check."
else
  echo "gpu_check: GPU: $gpu_name"
  nvidia-smi >"$raw/nvidia-smi.txt" 2>&1 || true
fi
if [[ -n "${CMAKE_PREFIX_PATH:-}" ]]; then
  echo "gpu_check: CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"
fi

# --- phase probe: bench/staging_probe.cu, compiled by nvcc alone (no oa build) ---
# It writes staging_probe.json; without a GPU it is compiled, not run.
if [[ $phase == all || $phase == probe || $phase == bars ]]; then
  nvcc=$(command -v nvcc || true)
  [[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
  probe_bin=$build/staging_probe
  mkdir -p "$build"
  rm -f "$probe_bin"
  if [[ -z "$nvcc" ]]; then
    echo
    echo "== compile staging probe"
    echo "gpu_check: FAILED: nvcc not found (neither on PATH nor /usr/local/cuda/bin)"
    failures+=("compile staging probe (nvcc not found)")
    record failed - "compile staging probe (nvcc not found)"
  else
    # sm_80 and sm_90 as the oa build, plus PTX for newer GPUs.
    NEED=60 step "compile staging probe" probe-compile "$nvcc" -O2 -std=c++17 \
      -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code="[sm_90,compute_90]" \
      bench/staging_probe.cu -o "$probe_bin" -ldl
  fi
  if [[ ! -x "$probe_bin" ]]; then
    skip "staging probe" "not compiled"
  elif [[ -n "$no_gpu" ]]; then
    skip "staging probe" "no GPU"
  else
    # Its own limit: 360 s, or less when the phase's time limit leaves less.
    probe_seconds=360 probe_quick=()
    [[ $phase == bars ]] && probe_seconds=60 probe_quick=(--quick)
    if ((deadline)); then
      probe_seconds=$((deadline - SECONDS - 20))
      ((probe_seconds > 360)) && probe_seconds=360
      [[ $phase == bars ]] && ((probe_seconds > 60)) && probe_seconds=60
      ((probe_seconds < 30)) && probe_seconds=30
    fi
    NEED=60 MAX=$((probe_seconds + 60)) step "staging probe (at most ${probe_seconds} s)" probe "$probe_bin" \
      --json "$dir/staging_probe.json" --max-seconds "$probe_seconds" "${probe_quick[@]}"
  fi
fi

# --- configure and build (every phase but probe: a no-op when the build is up to date) ---
if [[ $phase != probe ]]; then
  NEED=10 step "dependencies" deps bash .ci/deps.sh
  # On a GPU, code for that GPU alone (its own instructions, half the nvcc time);
  # without one, the two architectures oa is measured on.
  archs="80;90"
  [[ -z "$no_gpu" ]] && archs=native
  NEED=60 step "configure" configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DOA_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs"
  if [[ "$last_rc" != 0 && $archs == native ]]; then  # CMake could not tell the GPU's architecture
    rm -f "$build/CMakeCache.txt"
    NEED=60 step "configure for 80;90" configure-80-90 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DOA_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="80;90"
  fi
  if [[ $phase == bars ]]; then
    NEED=120 step "build oa-bench, oa-bandwidth" build cmake --build "$build" -j "$(nproc)" --target oa-bench \
      oa-bandwidth
  elif [[ $phase == bench || $phase == gemm || $phase == node || $phase == dist ]]; then
    NEED=120 step "build oa-bench, oa-bandwidth" build cmake --build "$build" -j "$(nproc)" --target oa-bench \
      oa-bandwidth oa_example_eigen_gemm_offload
  else
    NEED=120 step "build" build cmake --build "$build" -j "$(nproc)"
  fi
fi

# --- phase build-test: every test, then the GPU tests under compute-sanitizer ---
if [[ $phase == all || $phase == build-test ]]; then
  if [[ -n "$no_gpu" ]]; then
    echo
    echo "gpu_check: no GPU: the tests labelled gpu report Skipped"
    NEED=120 step "tests (no GPU)" ctest ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --no-tests=error
  else
    NEED=120 step "tests" ctest env OA_TEST_REQUIRE_GPU=1 \
      ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --no-tests=error
  fi
  [[ -f "$build/Testing/Temporary/LastTest.log" ]] && cp "$build/Testing/Temporary/LastTest.log" "$raw/"

  # The executables of the tests labelled gpu.
  sanitizer=/usr/local/cuda/bin/compute-sanitizer
  [[ -x "$sanitizer" ]] || sanitizer=$(command -v compute-sanitizer || true)
  gpu_tests=()
  if listing=$(ctest --test-dir "$build" -L gpu -N --no-tests=error 2>&1); then
    mapfile -t gpu_tests < <(sed -n 's/^ *Test *#[0-9]*: *\([^ ]*\).*/\1/p' <<<"$listing")
  fi
  if ((${#gpu_tests[@]} == 0)); then
    echo
    echo "gpu_check: FAILED: no test carries the CTest label gpu in $build"
    failures+=("compute-sanitizer (no gpu tests)")
    record failed - "compute-sanitizer (no test labelled gpu)"
  elif [[ -n "$no_gpu" ]]; then
    for t in "${gpu_tests[@]}"; do
      skip "memcheck, racecheck $t" "no GPU"
    done
  elif [[ -z "$sanitizer" ]]; then
    echo
    echo "gpu_check: FAILED: compute-sanitizer not found (neither /usr/local/cuda/bin nor PATH)"
    failures+=("compute-sanitizer (not found)")
    record failed - "compute-sanitizer (not found)"
  else
    for t in "${gpu_tests[@]}"; do
      for tool in memcheck racecheck; do
        needs "$build/tests/$t" "$tool $t" || continue
        # racecheck checks kernels' shared memory: ours, not cuBLAS's (too slow under it).
        filter=()
        [[ $tool == racecheck ]] && filter=(--test-case-exclude='*cuBLAS*')
        NEED=60 step "$tool $t" "sanitizer-$tool-$t" env OA_TEST_REQUIRE_GPU=1 \
          "$sanitizer" --tool "$tool" --error-exitcode 1 "$build/tests/$t" "${filter[@]}"
      done
    done
  fi
fi

# --- phase bench: bandwidth and benchmarks ---
# bench_step NAME LOG WORKLOAD N COMMAND...: an oa-bench step of N elements.
# Its expected seconds come from the workload's last step that passed, scaled
# by the elements.
declare -A seconds_per_element=()
bench_step() {
  local name=$1 log=$2 workload=$3 n=$4 t0=$SECONDS need=30
  shift 4
  if [[ -n "${seconds_per_element[$workload]:-}" ]]; then
    need=$(awk -v r="${seconds_per_element[$workload]}" -v n="$n" 'BEGIN { printf "%d", r * n * 1.2 + 5 }')
  fi
  NEED=$need step "$name" "$log" "$@"
  if [[ "$last_rc" == 0 ]] && ((SECONDS - t0 > 0)); then
    seconds_per_element[$workload]=$(awk -v s="$((SECONDS - t0))" -v n="$n" 'BEGIN { printf "%.6g", s / n }')
  fi
}

if [[ $phase == all || $phase == bench ]]; then
  if [[ -n "$no_gpu" ]]; then
    skip "bandwidth" "no GPU"
    skip "oa-bench on the GPU (${workloads[*]}, data ${sizes[*]} x budget)" "no GPU"
  else
    if needs "$build/bench/oa-bandwidth" "bandwidth"; then
      NEED=60 step "bandwidth" bandwidth "$build/bench/oa-bandwidth" --bytes 1GiB --repeat 10 \
        --json "$dir/bandwidth.jsonl"
    fi
    if needs "$build/bench/oa-bench" "oa-bench"; then
      cut_short=()
      for fraction in "${sizes[@]}"; do
        num=${fraction%/*} den=1
        [[ $fraction == */* ]] && den=${fraction#*/}
        for workload in "${workloads[@]}"; do
          n=$((num * budget / (den * bytes_per_element[$workload])))
          modes=sequential,oa
          ((num < den)) && modes=sequential,whole,oa  # the all-at-once baseline where the data fits
          [[ $fraction == "${all_sizes[0]}" ]] && modes=cpu,$modes
          before=${#not_run[@]}
          bench_step "oa-bench $workload (data ${fraction}x budget, $n elements, $modes)" \
            "bench-$workload-${fraction/\//_}x" "$workload" "$n" \
            "$build/bench/oa-bench" --workload "$workload" --elements "$n" --device cuda \
            --device-memory "$budget_text" --verify --repeat "$bench_repeat" --mode "$modes" \
            --json "$dir/bench.jsonl"
          ((${#not_run[@]} == before)) || cut_short+=("--workloads $workload --sizes $fraction")
        done
      done
      # Host memory: copying through pinned staging buffers (the default)
      # against pinning each stage's arrays (register).
      for fraction in "${staging_sizes[@]}"; do
        [[ " ${sizes[*]} " == *" $fraction "* && " ${workloads[*]} " == *" blackscholes "* ]] || continue
        n=$((fraction * budget / bytes_per_element[blackscholes]))
        before=${#not_run[@]}
        bench_step "oa-bench blackscholes staging=register (data ${fraction}x budget, $n elements)" \
          "bench-staging-register-${fraction}x" blackscholes "$n" \
          env OA_CUDA_STAGING=register "$build/bench/oa-bench" --workload blackscholes --elements "$n" \
          --device cuda --device-memory "$budget_text" --verify --repeat "$bench_repeat" --mode oa \
          --json "$dir/bench_staging_register.jsonl"
        ((${#not_run[@]} == before)) || cut_short+=("(staging) --workloads blackscholes --sizes $fraction")
        # The same arrays in oa's pinned pool: direct DMA, no staging (the
        # GPU bar: 0.9 of the pinned link at 8x). The 2x pageable run keeps a
        # trace of every copy, kernel, fill, drain and prefault for oa-sim.
        before=${#not_run[@]}
        bench_step "oa-bench blackscholes host-memory=pinned (data ${fraction}x budget, $n elements)" \
          "bench-pinned-${fraction}x" blackscholes "$n" \
          "$build/bench/oa-bench" --workload blackscholes --elements "$n" --device cuda \
          --device-memory "$budget_text" --verify --repeat "$bench_repeat" --mode sequential,oa --host-memory pinned \
          --json "$dir/bench.jsonl"
        ((${#not_run[@]} == before)) || cut_short+=("(pinned) --workloads blackscholes --sizes $fraction")
        if ((fraction == 2)); then
          bench_step "oa-bench blackscholes traced (data 2x budget, $n elements)" "bench-traced-2x" blackscholes "$n" \
            env OA_TRACE="$raw/trace-blackscholes-2x.json" "$build/bench/oa-bench" --workload blackscholes \
            --elements "$n" --device cuda --device-memory "$budget_text" --repeat 1 --mode oa
        fi
      done
      # oa::stl out of core: sort and scan of 2^28 int64 (2 GiB) through a
      # 256 MiB budget (8x), against the in-core thrust::sort (the ceiling).
      stl_n=$((1 << 28))
      NEED=240 step "oa-bench sort (int64, 8x a 256 MiB budget, oa and thrust)" bench-stl-sort \
        "$build/bench/oa-bench" --workload sort --elements "$stl_n" --type int64 --device cuda \
        --device-memory 256MiB --verify --repeat 2 --mode oa,thrust --json "$dir/bench_stl.jsonl"
      NEED=120 step "oa-bench scan (int64, 8x a 256 MiB budget)" bench-stl-scan \
        "$build/bench/oa-bench" --workload scan --elements "$stl_n" --type int64 --device cuda \
        --device-memory 256MiB --verify --repeat 2 --mode cpu,oa --json "$dir/bench_stl.jsonl"
      if ((${#cut_short[@]})); then
        echo
        echo "gpu_check: the time limit left out these runs; run them with bench/gpu_check.sh --phase bench and:"
        printf '  %s\n' "${cut_short[@]}"
      fi
    fi
  fi
fi

# --- phase bars: the GPU bars, each run once, in one short command ---
if [[ $phase == bars ]]; then
  if [[ -n "$no_gpu" ]]; then
    skip "the GPU bars (bandwidth, Black-Scholes at 8x, DGEMM at 4x and 16x)" "no GPU"
  elif needs "$build/bench/oa-bench" "oa-bench" && needs "$build/bench/oa-bandwidth" "bandwidth"; then
    NEED=20 MAX=90 step "bandwidth" bandwidth "$build/bench/oa-bandwidth" --bytes 1GiB --repeat 10 \
      --json "$dir/bandwidth.jsonl"
    # Black-Scholes at 8x the budget: at least 0.9 of the pinned host-to-device
    # peak from the pinned pool, 0.8 from pageable arrays.
    n=$((8 * budget / bytes_per_element[blackscholes]))
    for memory in pageable pinned; do
      modes=oa
      [[ $memory == pageable ]] && modes=sequential,oa
      NEED=60 MAX=180 step "oa-bench blackscholes host-memory=$memory (data 8x budget, $n elements, $modes)" \
        "bars-blackscholes-$memory-8x" "$build/bench/oa-bench" --workload blackscholes --elements "$n" --device cuda \
        --device-memory "$budget_text" --host-memory "$memory" --verify --repeat "$bench_repeat" --mode "$modes" \
        --json "$dir/bench.jsonl"
    done
    # DGEMM n=16384 (6 GiB of operands) at 4x and 16x the budget against
    # in-core cuBLAS, the matrices pageable and in the pinned pool.
    for memory in pageable pinned; do
      for gemm_budget in 1536MiB 384MiB; do
        modes=oa
        [[ $memory == pageable && $gemm_budget == 1536MiB ]] && modes=oa,cublas
        NEED=40 MAX=150 step "oa-bench gemm double n=16384 host-memory=$memory (budget $gemm_budget, $modes)" \
          "bars-gemm-$memory-$gemm_budget" "$build/bench/oa-bench" --workload gemm --n 16384 --type double \
          --device cuda --device-memory "$gemm_budget" --host-memory "$memory" --mode "$modes" --verify \
          --repeat "$bench_repeat" --json "$dir/bench.jsonl"
      done
    done
    # Every copy, kernel, fill, drain and prefault of a 2x run, for oa-sim.
    n=$((2 * budget / bytes_per_element[blackscholes]))
    NEED=30 MAX=120 step "oa-bench blackscholes traced (data 2x budget, $n elements)" bars-traced-2x \
      env OA_TRACE="$raw/trace-blackscholes-2x.json" "$build/bench/oa-bench" --workload blackscholes \
      --elements "$n" --device cuda --device-memory "$budget_text" --repeat 1 --mode oa
  fi
fi

# --- phase gemm ---
if [[ $phase == all || $phase == gemm ]]; then
  if [[ -n "$no_gpu" ]]; then
    skip "oa-bench gemm on the GPU" "no GPU"
  else
    if needs "$build/bench/oa-bench" "oa-bench"; then
      cut_short=()
      # Out-of-core GEMM: operands 4x and 16x the budget, against in-core
      # cuBLAS (the ceiling), cuBLASXt and NVBLAS on the same matrices.
      # NVBLAS needs a CPU BLAS: without Debian's, pip's NumPy bundles one.
      if [[ -z "${OA_BENCH_CPU_BLAS:-}" ]] && command -v python3 >/dev/null 2>&1; then
        cpu_blas=$(python3 - <<'PY' 2>/dev/null || true
import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
for d in dirs:
    for pattern in ("numpy.libs/libscipy_openblas*.so*", "numpy.libs/libopenblas*.so*", "scipy_openblas*/lib/lib*.so*"):
        hits = sorted(glob.glob(os.path.join(d, pattern)))
        if hits:
            print(hits[0])
            raise SystemExit
PY
)
        [[ -n "$cpu_blas" ]] && export OA_BENCH_CPU_BLAS=$cpu_blas
      fi
      for run in "double 16384 1536MiB" "float 16384 768MiB" "double 8192 96MiB"; do
        read -r type n gemm_budget <<<"$run"
        before=${#not_run[@]}
        NEED=150 step "oa-bench gemm $type n=$n (budget $gemm_budget)" "bench-gemm-$type-$n-$gemm_budget" \
          "$build/bench/oa-bench" --workload gemm --n "$n" --type "$type" --device cuda \
          --device-memory "$gemm_budget" --mode sequential,oa,cublas,cublasxt,nvblas --verify --repeat "$bench_repeat" \
          --json "$dir/bench.jsonl"
        ((${#not_run[@]} == before)) || cut_short+=("oa-bench --workload gemm --n $n --type $type --device-memory $gemm_budget")
      done
      # The same product from plain Eigen code built with oa_offload (its
      # time on stderr, the report in the raw logs): the hook's cost over oa-bench's oa mode.
      if needs "$build/examples/oa_example_eigen_gemm_offload" "Eigen program with oa_offload"; then
        NEED=150 step "Eigen program with oa_offload, n=16384 (budget 1536MiB)" eigen-gemm-offload \
          env OA_DEVICE=cuda OA_DEVICE_MEMORY=1536MiB OA_REPORT="$raw/eigen-gemm-offload-report.json" \
          "$build/examples/oa_example_eigen_gemm_offload" 16384
      fi
      if ((${#cut_short[@]})); then
        echo
        echo "gpu_check: the time limit left out these runs (oa-bench, as above, with):"
        printf '  %s\n' "${cut_short[@]}"
      fi
    fi
  fi
fi

# --- phase node: every device of the node at once ---
if [[ $phase == all || $phase == node || ($phase == bars && -z "$no_gpu" && -z "$no_node") ]]; then
  if [[ -n "$no_gpu" ]]; then
    skip "multi-kernel set, trace, cost placement on the GPU" "no GPU"
  elif needs "$build/bench/oa-bench" "oa-bench"; then
    # The multi-kernel set: one stage at a time (serial) against the DAG on
    # streams (oa), results compared between the modes by oa-bench.
    dag_runs=("16Mi 4GiB" "64Mi 256MiB")
    [[ $phase == bars ]] && dag_runs=("64Mi 256MiB")  # the link-bound set only: the bars' time is short
    for run in "${dag_runs[@]}"; do
      read -r n dag_budget <<<"$run"
      for w in dag-image dag-ensemble dag-union; do
        NEED=30 MAX=120 step "oa-bench $w ($n elements, budget $dag_budget, serial and oa)" "dag-$w-$n" \
          "$build/bench/oa-bench" --workload "$w" --elements "$n" --device cuda --device-memory "$dag_budget" \
          --repeat 3 --json "$dir/dag.jsonl"
      done
    done
    # A host stage beside the GPU's: the sort's merge runs on the host while
    # the prefix sum runs on the GPU.
    NEED=60 step "dag-ensemble traced (64Mi elements, budget 256MiB, oa)" dag-ensemble-traced \
      env OA_TRACE="$raw/trace-dag-ensemble.json" "$build/bench/oa-bench" --workload dag-ensemble --elements 64Mi \
      --device cuda --device-memory 256MiB --repeat 1 --mode oa
    if [[ "$last_rc" == 0 ]]; then
      NEED=10 step "a host stage beside a GPU stage in the trace" trace-overlap \
        python3 bench/trace_overlap.py "$raw/trace-dag-ensemble.json"
    fi
    # Where the host's time goes in the other two (no host stage: the
    # results' first touch, the staging copies), for the next change.
    for w in dag-image dag-union; do
      NEED=30 MAX=60 step "$w traced (64Mi elements, budget 256MiB, oa)" "$w-traced" \
        env OA_TRACE="$raw/trace-$w.json" "$build/bench/oa-bench" --workload "$w" --elements 64Mi \
        --device cuda --device-memory 256MiB --repeat 1 --mode oa
    done
    if [[ $phase != bars ]]; then
      NEED=60 MAX=180 step "placement by cost against host and GPU, 2^10 to 2^24 elements" cost-sweep \
        bash bench/cost_sweep.sh "$dir" "$build/bench/oa-bench" cuda
    fi
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
    if [[ $phase == bars ]]; then
      :  # the cost sweep and several GPUs: --phase node
    elif ((gpus >= 2)); then
      n=$((8 * (1 << 30) / bytes_per_element[blackscholes]))
      for devices in cuda:0:memory=1GiB cuda:0:memory=1GiB,cuda:1:memory=1GiB; do
        NEED=60 step "oa-bench blackscholes on $devices (8x one budget)" "several-$(tr -c 'a-z0-9\n' _ <<<"$devices")" \
          "$build/bench/oa-bench" --workload blackscholes --elements "$n" --mode oa --devices "$devices" \
          --host-memory pinned --repeat 2 --json "$dir/bench.jsonl"
      done
    else
      skip "Black-Scholes on two GPUs against one" "one GPU here"
    fi
  fi
fi

# --- phase dist: oa::dist under mpirun, each rank on the GPU (issue: past one machine) ---
if [[ $phase == all || $phase == dist ]]; then
  if [[ -n "$no_gpu" ]]; then
    skip "oa::dist on the GPU" "no GPU"
  elif ! command -v mpirun >/dev/null 2>&1; then
    skip "oa::dist on the GPU" "no mpirun here"
  elif needs "$build/bench/oa-bench" "oa-bench"; then
    # Open MPI as root, more ranks than it counts slots for, and shared
    # memory without cross-memory attach (refused in many containers).
    mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
      mpirun --oversubscribe)
    # Whether device buffers could go to MPI directly (oa stages through the host either way).
    NEED=10 step "the MPI build's CUDA support" mpi-cuda \
      bash -c 'mpirun --version | head -n 1; (ompi_info --parsable --all 2>/dev/null || true) | grep -i "cuda" | head -n 5'
    for np in 1 2; do
      NEED=40 MAX=120 step "Black-Scholes, 64Mi elements per rank, 1 GiB budget each, $np rank(s)" "dist-bs-$np" \
        "${mpi[@]}" -np "$np" "$build/bench/oa-bench" --workload blackscholes --elements 64Mi --per-rank \
        --device cuda --device-memory 1GiB --host-memory pinned --repeat 3 --verify --json "$dir/dist.jsonl"
    done
    NEED=40 MAX=120 step "sort of 2^26 int64 over 2 ranks, 128 MiB budget each" dist-sort \
      "${mpi[@]}" -np 2 "$build/bench/oa-bench" --workload sort --type int64 --elements 64Mi --device cuda \
      --device-memory 128MiB --repeat 2 --verify --json "$dir/dist.jsonl"
    NEED=40 MAX=120 step "product n=8192 double over 2 ranks (SUMMA), 512 MiB budget each" dist-gemm \
      "${mpi[@]}" -np 2 "$build/bench/oa-bench" --workload gemm --n 8192 --type double --device cuda \
      --device-memory 512MiB --repeat 2 --verify --json "$dir/dist.jsonl"
  fi
fi

# --- summary.txt, and the raw logs packed into one file ---
{
  echo "gpu_check phase $phase: $(date -u +%Y-%m-%dT%H:%M:%SZ), oa $commit, ${gpu_name:-no GPU ($no_gpu)}," \
    "$SECONDS s"
  echo "status   seconds  step"
  printf '%s\n' "${step_lines[@]}"
  [[ $phase == build-test || $phase == probe ]] || summarize "$dir"
  echo
} | tee -a "$dir/summary.txt"

tar -C "$raw" -czf "$dir/logs-$phase.tar.gz" .
rm -rf "$raw"

echo
echo "gpu_check: phase $phase took $SECONDS s; results in $dir (summary.txt, logs-$phase.tar.gz)"
if ((${#failures[@]})); then
  echo "gpu_check: ${#failures[@]} step(s) FAILED:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
if [[ -n "$no_gpu" ]]; then
  echo "gpu_check: NO GPU ($no_gpu): every step that needs no GPU passed; ${#not_run[@]} GPU step(s) not run"
  exit 3
fi
if ((${#not_run[@]})); then
  echo "gpu_check: ${#not_run[@]} step(s) NOT RUN within the time limit:"
  printf '  %s\n' "${not_run[@]}"
  exit 1
fi
echo "gpu_check: every step passed"
