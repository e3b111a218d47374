#!/usr/bin/env python3
"""The host path beside the tools a user would pick instead, in one run.

Per workload (WORKLOADS.md) and round, each program runs once, in turn:
NumPy (one call per op), numexpr (one fused evaluate; Black-Scholes' erf
through SciPy, as numexpr has none), the hand-fused OpenMP loop
(oa-fused-baseline) and oa-bench --mode cpu,oa --device host. Rounds
interleave the programs so that load from elsewhere falls on all of them.
Prints a table of seconds (best and median over rounds) and ratios against
oa, and appends one JSON record per program, workload and round.

Programs that cannot run (a Python package missing, a binary not built) are
named on stderr and left out; the rest still run.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    np = None
try:
    import numexpr as ne
except ImportError:
    ne = None
try:
    from scipy.special import erf as sp_erf
except ImportError:
    sp_erf = None

# The input ranges of oa-bench (bench/bench_data.hpp).
INPUTS = {
    "blackscholes": [("price", 10, 50), ("strike", 10, 50), ("t", 0.1, 2), ("rate", 0.01, 0.05), ("vol", 0.1, 0.5)],
    "haversine": [("lat2", -1.5, 1.5), ("lon2", -1.5, 1.5)],
}


def inputs(workload, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(lo, hi, n) for _, lo, hi in INPUTS[workload]]


def blackscholes_numpy(price, strike, t, rate, vol):
    from scipy.special import erf
    c05, c10, invsqrt2 = 3.0, 1.5, 1.0 / np.sqrt(2.0)
    rsig = vol * vol
    rsig = rsig * c05
    rsig = rsig + rate
    vol_sqrt = np.sqrt(t)
    vol_sqrt = vol_sqrt * vol
    tmp = rsig * t
    d1 = price / strike
    d1 = np.log2(d1)
    d1 = d1 + tmp
    d1 = d1 / vol_sqrt
    d2 = d1 - vol_sqrt
    d1 = d1 * invsqrt2
    d1 = erf(d1)
    d1 = d1 * c05
    d1 = d1 + c05
    d2 = d2 * invsqrt2
    d2 = erf(d2)
    d2 = d2 * c05
    d2 = d2 + c05
    e_rt = rate * (-1.0)
    e_rt = e_rt * t
    e_rt = np.exp(e_rt)
    tmp = price * d1
    tmp2 = e_rt * strike
    tmp2 = tmp2 * d2
    call = tmp - tmp2
    tmp = e_rt * strike
    tmp2 = c10 - d2
    put = tmp * tmp2
    tmp = c10 - d1
    tmp = price * tmp
    put = put - tmp
    return call, put


def haversine_numpy(lat2, lon2):
    lat1, lon1, miles = 0.70984286, 1.23892197, 3959.0
    dlat = lat2 - lat1
    dlon = lon2 - lon1
    dlat = dlat / 2.0
    dlat = np.sin(dlat)
    dlat = dlat * dlat
    a = np.cos(lat2)
    a = a * np.cos(lat1)
    dlon = dlon / 2.0
    dlon = np.sin(dlon)
    dlon = dlon * dlon
    a = a * dlon
    a = dlat + a
    a = np.sqrt(a)
    a = np.arcsin(a)
    a = a * 2.0
    a = a * miles
    return (a,)


def blackscholes_numexpr(price, strike, t, rate, vol):
    # numexpr has no erf: the two erf calls go through SciPy, the rest fused.
    c05, c10, invsqrt2 = 3.0, 1.5, 1.0 / np.sqrt(2.0)
    vol_sqrt = ne.evaluate("sqrt(t) * vol")
    d1 = ne.evaluate("(log(price / strike) / log(2.0) + (vol * vol * c05 + rate) * t) / vol_sqrt")
    e1 = sp_erf(ne.evaluate("d1 * invsqrt2"))
    e2 = sp_erf(ne.evaluate("(d1 - vol_sqrt) * invsqrt2"))
    call = ne.evaluate("price * (e1 * c05 + c05) - exp(-rate * t) * strike * (e2 * c05 + c05)")
    put = ne.evaluate("exp(-rate * t) * strike * (c10 - (e2 * c05 + c05)) - price * (c10 - (e1 * c05 + c05))")
    return call, put


def haversine_numexpr(lat2, lon2):
    lat1, lon1, miles = 0.70984286, 1.23892197, 3959.0
    cos_lat1 = np.cos(lat1)
    a = ne.evaluate(
        "arcsin(sqrt(sin((lat2 - lat1) / 2.0) ** 2 + cos(lat2) * cos_lat1 * sin((lon2 - lon1) / 2.0) ** 2))"
        " * 2.0 * miles")
    return (a,)


PY_PROGRAMS = {
    "numpy": {"blackscholes": blackscholes_numpy, "haversine": haversine_numpy},
    "numexpr": {"blackscholes": blackscholes_numexpr, "haversine": haversine_numexpr},
}


def time_python(fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    s = time.perf_counter() - t0
    del out
    return s


def run_fused(binary, workload, n):
    p = subprocess.run([binary, "--workload", workload, "--elements", str(n)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip() or p.stdout.strip())
    return float(p.stdout.split(" seconds ")[1].split()[0])


def run_oa_bench(binary, workload, n, verify):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        cmd = [binary, "--workload", workload, "--elements", str(n), "--device", "host", "--mode", "cpu,oa",
               "--json", f.name]
        if verify:
            cmd.append("--verify")
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError((p.stderr.strip() or p.stdout.strip())[-2000:])
        recs = [json.loads(line) for line in open(f.name) if line.strip()]
    return {r["mode"]: r for r in recs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--workloads", default="haversine,blackscholes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin-dir", default="build/perf/bench", help="where oa-bench and oa-fused-baseline are")
    ap.add_argument("--json", default="build/peers/peers.jsonl", help="JSON Lines output (appended)")
    ap.add_argument("--verify", action="store_true", help="oa-bench --verify (oa against plain Eigen)")
    args = ap.parse_args()

    threads = os.cpu_count() or 1
    programs = []  # (name, kind)
    missing = []
    if np is None:
        missing.append("numpy (not installed: NumPy and numexpr rows left out)")
    else:
        if sp_erf is None:
            missing.append("scipy (not installed: NumPy and numexpr need its erf for Black-Scholes)")
        programs.append("numpy")
        if ne is None:
            missing.append("numexpr (not installed: its rows left out)")
        else:
            ne.set_num_threads(threads)
            programs.append("numexpr")
    fused = os.path.join(args.bin_dir, "oa-fused-baseline")
    oa_bench = os.path.join(args.bin_dir, "oa-bench")
    if os.access(fused, os.X_OK):
        programs.append("fused")
    else:
        missing.append(f"{fused} (not built: the fused-loop rows left out)")
    if os.access(oa_bench, os.X_OK):
        programs += ["cpu", "oa"]
    else:
        missing.append(f"{oa_bench} (not built: the cpu and oa rows left out)")
    for m in missing:
        print(f"peers: cannot run {m}", file=sys.stderr)

    load = os.getloadavg()
    info = {"hostname": platform.node(), "cpus": threads, "elements": args.elements,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "numpy": np.__version__ if np is not None else None,
            "numexpr": ne.__version__ if ne is not None else None}
    print(f"peers: {args.elements} elements, {threads} CPUs, {args.rounds} rounds, load average at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    out = open(args.json, "a")
    failed = False
    for workload in args.workloads.split(","):
        times = {p: [] for p in programs}
        data = inputs(workload, args.elements, 42) if np is not None else None
        for rnd in range(1, args.rounds + 1):
            for prog in programs:
                if prog == "cpu":
                    continue  # measured with oa, in the same oa-bench process
                rec = {}
                try:
                    if prog in PY_PROGRAMS:
                        if workload == "blackscholes" and sp_erf is None:
                            continue
                        got = {prog: time_python(PY_PROGRAMS[prog][workload], data)}
                    elif prog == "fused":
                        got = {prog: run_fused(fused, workload, args.elements)}
                    else:
                        r = run_oa_bench(oa_bench, workload, args.elements, args.verify)
                        got = {"cpu": r["cpu"]["seconds"], "oa": r["oa"]["seconds"]}
                        rec["oa_max_rel_error"] = r["oa"].get("max_rel_error")
                except Exception as e:  # one program failing leaves the others
                    print(f"peers: {prog} on {workload} failed: {e}", file=sys.stderr)
                    failed = True
                    continue
                for name, s in got.items():
                    times[name].append(s)
                    out.write(json.dumps({**info, **rec, "program": name, "workload": workload, "round": rnd,
                                          "seconds": s, "load1": os.getloadavg()[0]}) + "\n")
                out.flush()
        oa_best = min(times["oa"]) if times.get("oa") else None
        print(f"\n{workload}: {args.elements} elements, best and median of {args.rounds} rounds; "
              f"ratio = program seconds / oa seconds (best), above 1: oa faster")
        print(f"{'program':<28}{'best s':>9}{'median s':>10}{'ratio':>8}")
        labels = {"numpy": "NumPy, one call per op", "numexpr": "numexpr" + (" (erf: SciPy)" if workload ==
                  "blackscholes" else ""), "fused": f"fused loop, OpenMP x{threads}", "cpu": "oa-bench cpu (Eigen)",
                  "oa": "oa host"}
        for prog in programs:
            t = times[prog]
            if not t:
                continue
            ratio = f"{min(t) / oa_best:.2f}x" if oa_best else "-"
            print(f"{labels[prog]:<28}{min(t):>9.3f}{statistics.median(t):>10.3f}{ratio:>8}")
    load = os.getloadavg()
    print(f"\nload average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; records appended to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
