#!/usr/bin/env python3
"""Data-parallel results of scripts/gpu.sh's `dp` part (issue 16), as a short table.

  losses    metrics.jsonl of runs on the same global batch: the largest |loss difference| of each run
            against the first (world size 1, eager), and whether two runs are bitwise equal. For MoE runs
            also the auxiliary losses (relative difference at most 1e-2) and the tokens routed per logged
            step, summed over the experts and layers (equal: a dropless run routes every token of the global
            batch, so a rank that logged only its own tokens shows half)
  scaling   bench JSONs at -ng 1 and -ng N: tokens/s at N / (N x tokens/s at 1) per mode (target >= 0.95)

  python3 bench/data_parallel_report.py losses REF.jsonl RUN.jsonl [RUN.jsonl ...]
  python3 bench/data_parallel_report.py scaling NG1.json NGN.json
"""
import json
import struct
import sys


def records(path):
    """{step: record} of a metrics.jsonl."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                out[record["step"]] = record
    return out


def losses(path):
    """{step: loss} of a metrics.jsonl."""
    return {step: r["loss"] for step, r in records(path).items()}


def routed_tokens(record):
    """The tokens a step routed, summed over its MoE layers and experts; None when not logged."""
    rows = record.get("moe_tokens_per_expert")
    return None if rows is None else sum(sum(row) for row in rows)


def compare_moe(reference, run):
    """Problems of `run`'s MoE metrics against `reference`'s ({step: record} each), as lines."""
    problems = []
    common = sorted(set(reference) & set(run))
    for key in ("moe_aux_loss", "moe_z_loss"):
        pairs = [(run[s].get(key), reference[s].get(key)) for s in common]
        if any(a is None or b is None for a, b in pairs):
            problems.append(f"{key} missing")
            continue
        rel = max((abs(a - b) / max(abs(b), 1e-30) for a, b in pairs if a != b), default=0.0)
        if rel > 1e-2:
            problems.append(f"{key} differs by {rel:.3e} (relative)")
    logged = [s for s in common if routed_tokens(reference[s]) is not None and routed_tokens(run[s]) is not None]
    if not logged:
        problems.append("no step logged moe_tokens_per_expert in both runs")
    for s in logged:
        if routed_tokens(run[s]) != routed_tokens(reference[s]):
            problems.append(f"step {s} routed {routed_tokens(run[s])} tokens, the reference {routed_tokens(reference[s])}")
            break
    return problems


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def compare_losses(reference, runs):
    """Every run's steps against the same steps of the reference (a resumed run has the later ones)."""
    ref_records = records(reference)
    ref = {step: r["loss"] for step, r in ref_records.items()}
    moe = any("moe_aux_loss" in r for r in ref_records.values())
    steps = sorted(ref)
    print(f"reference {reference}: steps {steps[0]}..{steps[-1]}, loss {ref[steps[0]]:.6f} -> {ref[steps[-1]]:.6f}")
    worst = 0.0
    for run in runs:
        run_records = records(run)
        got = {step: r["loss"] for step, r in run_records.items()}
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
        if moe:
            problems = compare_moe(ref_records, run_records)
            print(f"    MoE auxiliary losses and routed tokens: {'; '.join(problems) + ': FAIL' if problems else 'as the reference'}")
            if problems:
                worst = float("inf")
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
