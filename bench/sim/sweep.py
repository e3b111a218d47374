#!/usr/bin/env python3
"""Sensitivity of the new design's predictions (simulated, not measured) to its assumed parameters.

    bench/sim/sweep.py build/release/bench/oa-sim bench/profiles/h100.json

Varies one assumed parameter at a time around the profile (fill/drain threads,
memcpy rate per thread, host memory-bandwidth cap, ring slots, slot size) and
prints, for Black-Scholes at 8x a 4 GiB budget (pageable arrays) and GEMM
double n=16384 at 1536 MiB, the fraction of the link bound (or of in-core
cuBLAS) and the busiest resource.
"""
import json, subprocess, sys, tempfile

SWEEP = [("new_host_threads", [1, 2, 4, 8, 12, 16]),
         ("new_memcpy_gbps_per_thread", [5, 10, 15, 25]),
         ("host_memcpy_cap_gbps", [30, 60, 120]),
         ("new_prefault_threads", [3, 6, 12]),
         ("new_ring_slots", [4, 8, 16]),
         ("new_slot_mib", [8, 32, 64])]
TOP = {"new_host_threads": 16, "new_memcpy_gbps_per_thread": 25, "host_memcpy_cap_gbps": 120, "new_prefault_threads": 12}
CASES = {"blackscholes 8x": ["--workload", "blackscholes", "--elements", "613566756", "--device-memory", "4GiB"],
         "gemm n=16384": ["--workload", "gemm", "--n", "16384", "--device-memory", "1536MiB"]}


def predict(sim, profile, args):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f, tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
        json.dump(profile, f)
        f.flush()
        subprocess.run([sim, "predict", "--profile", f.name, "--design", "new", "--json", out.name, "--",
                        *args, "--mode", "oa"], check=True, capture_output=True)
        r = json.loads(open(out.name).readline())
    frac = r["predicted_gflops"] / r["incore_gflops"] if "incore_gflops" in r else r["link_bound_seconds"] / r["predicted_seconds"]
    return "%.2f %s (%.2f)" % (frac, r["busiest_resource"], r["busiest_utilisation"])


def main():
    sim, path = sys.argv[1], sys.argv[2]
    base = json.load(open(path))
    print("predicted (simulated), new design, pageable arrays: of link bound (blackscholes) / of in-core (gemm), busiest resource")
    print("%-28s %-8s %-44s %s" % ("parameter", "value", *CASES))
    for key, values in SWEEP:
        for v in values:
            prof = json.loads(json.dumps(base))
            prof["parameters"][key]["value"] = v
            cells = [predict(sim, prof, a) for a in CASES.values()]
            mark = " (profile)" if v == base["parameters"][key]["value"] else ""
            print("%-28s %-8s %-44s %s%s" % (key, v, *cells, mark))
    # Every host parameter at the top of its range at once.
    prof = json.loads(json.dumps(base))
    for key, v in TOP.items():
        prof["parameters"][key]["value"] = v
    cells = [predict(sim, prof, a) for a in CASES.values()]
    print("%-37s %-44s %s" % ("all host limits at their top", *cells))


if __name__ == "__main__":
    main()
