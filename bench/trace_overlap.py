#!/usr/bin/env python3
"""How long stages on the host ran beside other stages on a device, from an OA_TRACE.

    bench/trace_overlap.py TRACE.json [--device NAME] [--min-ms M]

The trace (Chrome/Perfetto format, written by oa at exit) has a process per
device and a track per stream or copy engine, each operation with the calls
of its stage (args.stage). The host's stage work is the host process's
stream tracks; a device's is its streams (kernels) and copy engines. Work
of one call on both (oa::stl::sort's runs on the device beside its merge
on the host) is one operation's pipeline, not stages side by side: it is
left out. Prints each side's busy time (the union of its operations), the
time a host stage ran beside another call's device work, and those host
stages. Exits 0 when one did for at least M ms (default 1: a copy's record
may end a little after the host saw it done), 1 when none did, 2 when the
trace has no host or no device stage work.
"""

import argparse
import json
import sys


def union(intervals):
    """Sorted, disjoint intervals covering `intervals`."""
    out = []
    for b, e in sorted(intervals):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def length(intervals):
    return sum(e - b for b, e in intervals)


def intersection(a, b):
    """Both unions' common time (each sorted and disjoint)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append([lo, hi])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def calls(stage):
    """The calls of a stage, without the part of an operation ("oa::stl::sort (merge)")."""
    return frozenset(c.split(" (")[0] for c in stage.split(", "))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--device", help="the device's name in the trace (default: every device but the host)")
    ap.add_argument("--min-ms", type=float, default=1.0, help="the least overlap a host stage must have (ms)")
    args = ap.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    process, track = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e["name"] == "process_name":
            process[e["pid"]] = e["args"]["name"]
        elif e["name"] == "thread_name":
            track[(e["pid"], e["tid"])] = e["args"]["name"]
    host, device = [], []  # (begin, end, call)
    for e in events:
        if e.get("ph") != "X":
            continue
        name, where = process.get(e["pid"], ""), track.get((e["pid"], e.get("tid")), "")
        stage = e.get("args", {}).get("stage")
        if stage is None:
            continue
        span = (e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, stage)
        on_host = name.startswith("host")  # "host", or "host, beside the devices"
        if on_host and where.startswith("stream"):
            host.append(span)
        elif not on_host and (args.device is None or name == args.device):
            if where.startswith("stream") or "copy engine" in where:
                device.append(span)
    if not host or not device:
        print(f"{args.trace}: {'no host stage work' if not host else 'no device stage work'} in the trace")
        return 2
    h, d = union(s[:2] for s in host), union(s[:2] for s in device)
    both, beside = [], set()
    for stage in sorted({s[2] for s in host}):
        others = union(s[:2] for s in device if not calls(s[2]) & calls(stage))
        common = intersection(union(s[:2] for s in host if s[2] == stage), others)
        if length(common) * 1e3 >= args.min_ms:
            both += common
            beside.add(stage)
    both = union(both)
    print(f"host stages busy {length(h) * 1e3:.3f} ms, device stages {length(d) * 1e3:.3f} ms, "
          f"a host stage beside another stage's device work {length(both) * 1e3:.3f} ms")
    if beside:
        print("host stages beside device stages: " + "; ".join(sorted(beside)))
    return 0 if both else 1


if __name__ == "__main__":
    sys.exit(main())
