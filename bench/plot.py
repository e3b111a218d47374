#!/usr/bin/env python3
"""Pictures from oa-bench's JSON Lines records (--json FILE).

The paging picture: for each workload and device, throughput (input and output
bytes per second) against the data's size over the device budget, one line per
mode (cpu, sequential, whole, oa). Where a mode keeps its throughput past 1x,
paging works; where it falls, that is the cliff. Records of the emulated
device are titled as an emulation: their seconds are not GPU timings.

The GEMM picture (records of --workload gemm): GFLOP/s of each mode against
the operands' size over the budget, and beside it the bytes oa moved over
the I/O lower bound for that budget (1 is the bound; no schedule does better).

The scaling picture (records of oa-bench under mpirun, which carry `ranks`):
for each workload, the efficiency against one rank by the number of ranks:
weak scaling (a fixed block per rank, --per-rank: per-rank throughput over
one rank's) and strong scaling (a fixed total: throughput over ranks times
one rank's). 1 is perfect.

    bench/plot.py RECORDS.jsonl... [--out DIR]   PNG files (needs matplotlib)
    bench/plot.py RECORDS.jsonl... --table       the series as text (no matplotlib)

bench/plot.sh runs it with matplotlib from a virtual environment.
"""

import argparse
import json
import os
import sys
from collections import defaultdict

MODES = ["cpu", "sequential", "whole", "oa"]  # the order oa-bench runs them in
GEMM_MODES = ["cpu", "cpu-openmp", "sequential", "oa", "cublas", "cublasxt"]


def read_records(paths):
    records = []
    for path in paths:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError as e:
                    sys.exit(f"plot.py: {path}:{number}: not a JSON record: {e}")
    return records


def paging_series(records):
    """{(workload, device): {mode: [(data/budget, GB/s), ...]}}, each series sorted.

    A run is placed by its data over the budget that oa and sequential ran
    under: `whole` raises its own budget to hold everything, and `cpu` has
    none, so both take the budget and the device of the oa run of the same
    workload and size. Of repeated points the fastest is kept; failed runs
    are left out.
    """
    reference = {}  # (workload, elements) -> (budget, device) of the paged modes
    records = [r for r in records if r.get("workload") != "gemm" and "ranks" not in r]
    for r in records:
        if r.get("mode") in ("oa", "sequential") and r.get("device_memory_budget"):
            reference.setdefault((r["workload"], r["elements"]), (r["device_memory_budget"], r["device"]))
    figures = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.get("error") or not r.get("seconds"):
            continue
        budget, device = reference.get((r["workload"], r["elements"]),
                                       (r.get("device_memory_budget"), r.get("device")))
        if not budget:
            continue
        x = round(r["data_bytes"] / budget, 3)
        gbps = r["data_bytes"] / r["seconds"] / 1e9
        points = figures[(r["workload"], device)][r["mode"]]
        points[x] = max(points.get(x, 0.0), gbps)
    return {key: {mode: sorted(points.items()) for mode, points in modes.items()} for key, modes in figures.items()}


def gemm_series(records):
    """{(type, device): ({mode: [(operands/budget, GFLOP/s)]}, [(operands/budget, moved/bound)])}.

    Modes without a budget (the CPU and cuBLAS baselines) take the budget and
    device of the first oa run of the same size and type.
    """
    gemm = [r for r in records if r.get("workload") == "gemm" and "ranks" not in r]
    reference = {}
    for r in gemm:
        if r.get("mode") in ("oa", "sequential") and r.get("device_memory_budget"):
            reference.setdefault((r["type"], r["n"]), (r["device_memory_budget"], r["device"]))
    rates = defaultdict(lambda: defaultdict(dict))
    moved = defaultdict(dict)
    for r in gemm:
        if r.get("error") or not r.get("gflops") or (r["type"], r["n"]) not in reference:
            continue
        budget, device = reference[(r["type"], r["n"])]
        if r["mode"] in ("oa", "sequential"):
            budget, device = r["device_memory_budget"], r["device"]
        x = round(r["data_bytes"] / budget, 3)
        points = rates[(r["type"], device)][r["mode"]]
        points[x] = max(points.get(x, 0.0), r["gflops"])
        if r["mode"] == "oa" and r.get("bytes_over_lower_bound"):
            moved[(r["type"], device)][x] = r["bytes_over_lower_bound"]
    return {key: ({m: sorted(p.items()) for m, p in modes.items()}, sorted(moved[key].items()))
            for key, modes in rates.items()}


def print_gemm_table(series):
    for (kind, device), (modes, moved) in sorted(series.items()):
        print(f"gemm {kind} on {device}: GFLOP/s by operands/budget")
        for mode in [m for m in GEMM_MODES if m in modes] + sorted(set(modes) - set(GEMM_MODES)):
            print(f"  {mode:<10} " + "  ".join(f"{x:g}x:{g:.3g}" for x, g in modes[mode]))
        print("  moved/LB   " + "  ".join(f"{x:g}x:{b:.2f}" for x, b in moved))


def draw_gemm(series, out_dir, plt):
    written = []
    for (kind, device), (modes, moved) in sorted(series.items()):
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
        for mode in [m for m in GEMM_MODES if m in modes] + sorted(set(modes) - set(GEMM_MODES)):
            xs, ys = zip(*modes[mode])
            left.plot(xs, ys, marker="o", label=mode)
        left.set_xscale("log", base=2)
        left.set_xlabel("operands (A, B, C) / device memory budget")
        left.set_ylabel("GFLOP/s")
        left.grid(True, which="both", alpha=0.3)
        left.legend()
        if moved:
            xs, ys = zip(*moved)
            right.plot(xs, ys, marker="o", color="C3", label="oa")
        right.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        right.axhline(2.0, color="grey", linestyle="--", linewidth=1)
        right.set_xscale("log", base=2)
        right.set_ylim(0, max([2.2] + [y for _, y in moved]))
        right.set_xlabel("operands (A, B, C) / device memory budget")
        right.set_ylabel("bytes moved / I/O lower bound")
        right.grid(True, which="both", alpha=0.3)
        title = f"gemm ({kind}) on {device}"
        if device == "emulated":
            title += " (emulation: not GPU timings)"
        fig.suptitle(title)
        path = os.path.join(out_dir, f"gemm-{kind}-{device}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def scaling_series(records):
    """{(workload, weak|strong, size): [(ranks, efficiency), ...]} from records under mpirun.

    A run is compared with the one-rank run of the same workload, type and
    size (each rank's block for weak scaling, the total for strong); of
    repeated points the best is kept.
    """
    dist = [r for r in records if "ranks" in r and r.get("seconds") and not r.get("error")]

    def rate(r):
        return r.get("gflops_per_rank") or r.get("elements_per_second_per_rank")

    def size(r):
        return r["elements_per_rank"] if r.get("per_rank") else r["elements"]

    series = defaultdict(dict)
    for r in dist:
        kind = "weak" if r.get("per_rank") else "strong"
        base = [rate(b) for b in dist if b["ranks"] == 1 and b["workload"] == r["workload"]
                and b.get("type") == r.get("type") and bool(b.get("per_rank")) == bool(r.get("per_rank"))
                and size(b) == size(r)]
        if not base or not rate(r):
            continue
        key = (r["workload"], kind, size(r))
        series[key][r["ranks"]] = max(series[key].get(r["ranks"], 0.0), rate(r) / max(base))
    return {key: sorted(points.items()) for key, points in series.items()}


def scaling_label(key):
    workload, kind, size = key
    return f"{workload} {kind} ({size} {'per rank' if kind == 'weak' else 'in all'})"


def print_scaling_table(series):
    if series:
        print("scaling efficiency against 1 rank, by ranks")
    for key, points in sorted(series.items()):
        print(f"  {scaling_label(key):<45} " + "  ".join(f"{n}:{e:.2f}" for n, e in points))


def draw_scaling(series, out_dir, plt):
    if not series:
        return []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, points in sorted(series.items()):
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", linestyle="-" if key[1] == "weak" else "--", label=scaling_label(key))
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ranks")
    ax.set_ylabel("efficiency against 1 rank")
    ax.set_ylim(0, 1.2)
    ax.set_title("oa::dist scaling (weak: solid, strong: dashed)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    path = os.path.join(out_dir, "scaling.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]


def print_table(series):
    for (workload, device), modes in sorted(series.items()):
        print(f"{workload} on {device}: GB/s (input and output bytes per second) by data/budget")
        for mode in [m for m in MODES if m in modes] + sorted(set(modes) - set(MODES)):
            cells = "  ".join(f"{x:g}x:{gbps:.3g}" for x, gbps in modes[mode])
            print(f"  {mode:<10} {cells}")


def draw(series, gemm, scaling, out_dir):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: matplotlib is not installed: run bench/plot.sh (it makes a virtual environment), "
                 "or use --table")
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for (workload, device), modes in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for mode in [m for m in MODES if m in modes] + sorted(set(modes) - set(MODES)):
            xs, ys = zip(*modes[mode])
            ax.plot(xs, ys, marker="o", label=mode)
        ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
        ax.text(1.0, ax.get_ylim()[1], " data = budget", va="top", fontsize=8, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("data size / device memory budget")
        ax.set_ylabel("throughput, GB/s (input + output bytes)")
        title = f"{workload} on {device}"
        if device == "emulated":
            title += " (emulation: not GPU timings)"
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        path = os.path.join(out_dir, f"paging-{workload}-{device}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written + draw_gemm(gemm, out_dir, plt) + draw_scaling(scaling, out_dir, plt)


def main():
    parser = argparse.ArgumentParser(description="Pictures from oa-bench JSON Lines records.")
    parser.add_argument("records", nargs="+", help="oa-bench --json files")
    parser.add_argument("--out", default="bench/results/plots", help="folder for the PNG files")
    parser.add_argument("--table", action="store_true", help="print the series instead of drawing them")
    args = parser.parse_args()
    records = read_records(args.records)
    series, gemm, scaling = paging_series(records), gemm_series(records), scaling_series(records)
    if not series and not gemm and not scaling:
        sys.exit("plot.py: no successful runs with a device budget, or under mpirun, in these records")
    if args.table:
        print_table(series)
        print_gemm_table(gemm)
        print_scaling_table(scaling)
        return
    for path in draw(series, gemm, scaling, args.out):
        print(path)


if __name__ == "__main__":
    main()
