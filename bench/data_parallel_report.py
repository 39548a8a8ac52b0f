#!/usr/bin/env python3
"""Data-parallel results of scripts/gpu.sh's `dp` part (issue 16), as a short table.

  losses    metrics.jsonl of runs on the same global batch: the largest |loss difference| of each run
            against the first (world size 1, eager), and whether two runs are bitwise equal
  scaling   bench JSONs at -ng 1 and -ng N: tokens/s at N / (N x tokens/s at 1) per mode (target >= 0.95)

  python3 bench/data_parallel_report.py losses REF.jsonl RUN.jsonl [RUN.jsonl ...]
  python3 bench/data_parallel_report.py scaling NG1.json NGN.json
"""
import json
import struct
import sys


def losses(path):
    """{step: loss} of a metrics.jsonl."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                out[record["step"]] = record["loss"]
    return out


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def compare_losses(reference, runs):
    """Every run's steps against the same steps of the reference (a resumed run has the later ones)."""
    ref = losses(reference)
    steps = sorted(ref)
    print(f"reference {reference}: steps {steps[0]}..{steps[-1]}, loss {ref[steps[0]]:.6f} -> {ref[steps[-1]]:.6f}")
    worst = 0.0
    for run in runs:
        got = losses(run)
        common = sorted(set(got) & set(ref))
        if not common or len(common) != len(got):
            print(f"  {run}: steps {sorted(got)[:1]}.. not all in the reference: FAIL")
            worst = float("inf")
            continue
        diff = max(abs(got[s] - ref[s]) for s in common)
        rel = max(abs(got[s] - ref[s]) / max(abs(ref[s]), 1e-30) for s in common)
        same = all(bits(got[s]) == bits(ref[s]) for s in common)
        worst = max(worst, diff)
        print(f"  {run}: steps {common[0]}..{common[-1]}: max |loss diff| {diff:.3e} (relative {rel:.3e})"
              f"{'; bitwise equal' if same else ''}")
    return worst


def mode_throughput(path):
    with open(path) as f:
        j = json.load(f)
    return {m["label"]: m["tokens_per_s"] for m in j["modes"]}, j["batch"].get("data_parallel_size", 1)


def scaling(one, many):
    t1, _ = mode_throughput(one)
    tn, n = mode_throughput(many)
    ok = True
    for label, tokens in tn.items():
        if label not in t1:
            continue
        eff = tokens / (n * t1[label])
        ok = ok and eff >= 0.95
        print(f"  {label:32s} {t1[label]:12.0f} tok/s at 1 GPU, {tokens:12.0f} at {n}: efficiency {eff:.3f}"
              f"{'' if eff >= 0.95 else '  (below 0.95)'}")
    return ok


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "losses":
        worst = compare_losses(sys.argv[2], sys.argv[3:])
        print(f"largest |loss difference| against the reference: {worst:.3e}")
        return 0 if worst < 1e-2 else 1
    if len(sys.argv) == 4 and sys.argv[1] == "scaling":
        return 0 if scaling(sys.argv[2], sys.argv[3]) else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
