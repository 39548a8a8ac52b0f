#!/usr/bin/env python3
"""Per-kernel time table from a `stepgraph bench --trace FILE` Chrome trace (one step per mode).

    python3 bench/kernel_table.py trace_1b.json [--mode none] [--markdown] [--bench bench_1b.json]

Groups the chosen mode's kernels by name (template arguments cut), and prints calls, total and mean
microseconds and the share of the step, largest first — the figures behind docs/performance.md's
kernel table.

With --bench (the same run's `stepgraph bench --json`), it also prints where the step's kernel time goes —
GEMMs (cuBLASLt's nvjet kernels, CUTLASS grouped GEMMs, cuBLAS xmma kernels), attention (cuDNN), the SSD
scan, everything else — and the GEMM-only MFU: the step's matmul FLOPs over the GEMM kernels' time at the
device's peak, next to the mode's MFU. The time outside GEMMs at the GEMMs' own efficiency is the headroom.
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


# Kernel classes for the --bench summary, first match wins.
KERNEL_CLASSES = (
    ("GEMM", re.compile(r"^nvjet|GemmUniversal|xmma_gemm|splitKreduce|^cutlass::Kernel")),
    ("attention", re.compile(r"cudnn|sdpa|flash", re.IGNORECASE)),
    ("SSD scan", re.compile(r"ssd_")),
)


def kernel_class(name: str) -> str:
    for label, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return label
    return "other"


def summary(by_class: collections.Counter, bench: dict, mode: str) -> list:
    """Lines: each kernel class's time (microseconds in by_class) and share, the GEMM-only MFU and the mode's MFU."""
    step_us = sum(by_class.values())
    lines = [f"{label}: {by_class[label] / 1000:.3f} ms ({100 * by_class[label] / step_us:.1f}% of the kernel time)"
             for label in ("GEMM", "attention", "SSD scan", "other") if by_class[label] > 0]
    matmul = bench["batch"].get("matmul_flops_per_step")
    peak = float(bench.get("device", {}).get("peak_bf16_tflops") or 0.0)
    if matmul is None or peak <= 0.0:
        lines.append("GEMM-only MFU: needs batch.matmul_flops_per_step (stepgraph bench --json of 2026-12-01 or later) "
                     "and the device's peak (device.peak_bf16_tflops)")
    elif by_class["GEMM"] > 0:
        matmul = float(matmul)
        gemm_mfu = matmul / (by_class["GEMM"] * 1e-6) / (peak * 1e12)
        lines.append(f"GEMM-only MFU: {100 * gemm_mfu:.1f}% ({matmul / 1e12:.2f} TFLOP of matmuls per step at "
                     f"{matmul / (by_class['GEMM'] * 1e-6) / 1e12:.0f} TFLOP/s in the GEMM kernels; peak {peak:.0f})")
    modes = [m for m in bench.get("modes", []) if m.get("label") == mode]
    if modes and modes[0].get("mfu"):
        lines.append(f"MFU of mode {mode}: {100 * float(modes[0]['mfu']):.1f}% (median step)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--mode", default="none", help="process name in the trace (a bench mode), default none")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--bench", help="the same run's `stepgraph bench --json` file: adds the time per kernel class "
                    "and the GEMM-only MFU")
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
    by_class = collections.Counter()  # classified by the full name: the short one drops template arguments
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == wanted[0]:
            key = short_name(e["name"]) if e.get("cat", "kernel") == "kernel" else e.get("cat", e["name"])
            calls[key] += 1
            total[key] += float(e["dur"])
            by_class[kernel_class(e["name"])] += float(e["dur"])
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
    if args.bench:
        with open(args.bench) as f:
            bench = json.load(f)
        print()
        for line in summary(by_class, bench, args.mode):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
