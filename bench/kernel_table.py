#!/usr/bin/env python3
"""Per-kernel time table from a `stepgraph bench --trace FILE` Chrome trace (one step per mode).

    python3 bench/kernel_table.py trace_1b.json [--mode none] [--markdown]

Groups the chosen mode's kernels by name (template arguments cut), and prints calls, total and mean
microseconds and the share of the step, largest first — the figures behind docs/performance.md's
kernel table.
"""
import argparse
import collections
import json
import re
import sys


def short_name(name: str) -> str:
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"<.*>", "", name)            # template arguments
    name = re.sub(r"\(.*\)$", "", name)         # parameter lists
    name = name.replace("void ", "").strip()
    return name[:70]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--mode", default="none", help="process name in the trace (a bench mode), default none")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    pids = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    wanted = [pid for pid, name in pids.items() if name == args.mode]
    if not wanted:
        print(f"kernel_table: no mode {args.mode!r} in {args.trace}; modes: {sorted(pids.values())}", file=sys.stderr)
        return 1
    calls = collections.Counter()
    total = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == wanted[0]:
            key = short_name(e["name"]) if e.get("cat", "kernel") == "kernel" else e.get("cat", e["name"])
            calls[key] += 1
            total[key] += float(e["dur"])
    step = sum(total.values())
    rows = sorted(total, key=lambda k: -total[k])
    if args.markdown:
        print(f"| kernel | calls | total us | mean us | share |\n|---|---:|---:|---:|---:|")
        for k in rows:
            print(f"| `{k}` | {calls[k]} | {total[k]:.1f} | {total[k] / calls[k]:.1f} | {100 * total[k] / step:.1f}% |")
        print(f"| **step (sum of kernel times)** | {sum(calls.values())} | {step:.1f} | | 100% |")
    else:
        print(f"{'kernel':70s} {'calls':>6s} {'total us':>10s} {'mean us':>9s} {'share':>6s}")
        for k in rows:
            print(f"{k:70s} {calls[k]:6d} {total[k]:10.1f} {total[k] / calls[k]:9.1f} {100 * total[k] / step:5.1f}%")
        print(f"{'step (sum)':70s} {sum(calls.values()):6d} {step:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
