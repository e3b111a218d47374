#!/bin/bash
# Several emulated devices against one: Black-Scholes of 4Mi elements
# (224 MiB, 8x one device's 28 MiB budget) from pinned host memory, best of 5;
# then a 2048^3 product through 32 MiB devices, best of 3.
#   bench/several_devices.sh OUT_DIR [OA_BENCH]
# Appends the tables to OUT_DIR/several-devices.log and writes the JSON lines
# to OUT_DIR/several-devices.jsonl. Emulated timings: not GPU timings.
set -euo pipefail
out=${1:?usage: bench/several_devices.sh OUT_DIR [OA_BENCH]}
bench=${2:-./build/release/bench/oa-bench}
mkdir -p "$out"
json=$out/several-devices.jsonl
rm -f "$json"
run() {
  echo "\$ oa-bench $*"
  "$bench" --workload blackscholes --elements 4Mi --host-memory pinned --mode oa --repeat 5 "$@" --json "$json" 2>&1 | tail -1
}
{
  # Equal links: one device, then two.
  for gb in 2 1 0.5; do
    run --devices "emulated:memory=28MiB:link_gbps=$gb"
    run --devices "emulated:memory=28MiB:link_gbps=$gb,emulated:memory=28MiB:link_gbps=$gb"
  done
  # Links four times apart: chunks shared by rate (balanced) against i mod 2 (even).
  for pair in 2,8 0.5,2; do
    for spread in balanced even; do
      run --spread $spread --devices "emulated:memory=28MiB:link_gbps=${pair%,*},emulated:memory=28MiB:link_gbps=${pair#*,}"
    done
  done
  # The host's share: one device, then the same with host listed, then the host alone.
  for gb in 2 0.5; do
    run --devices "emulated:memory=28MiB:link_gbps=$gb,host"
  done
  echo "\$ oa-bench --device host"
  "$bench" --workload blackscholes --elements 4Mi --host-memory pinned --mode oa --repeat 5 --device host --json "$json" 2>&1 | tail -1
  # A product: C cut in one block per device.
  for devices in "emulated:memory=32MiB:link_gbps=2" "emulated:memory=32MiB:link_gbps=2,emulated:memory=32MiB:link_gbps=2"; do
    echo "\$ oa-bench --workload gemm --n 2048 --host-memory pinned --mode oa --repeat 3 --devices $devices"
    "$bench" --workload gemm --n 2048 --host-memory pinned --mode oa --repeat 3 --devices "$devices" --json "$json" 2>&1 |
      grep -E '^oa '
  done
} | tee -a "$out/several-devices.log"
