#!/usr/bin/env python3
"""Times mamba_ssm's Triton SSD scan (mamba_chunk_scan_combined, forward + backward) on the shapes of
bench/ssd_scan_bench.cu, for the issue-12 table "the SSD scan alone vs mamba_ssm".

mamba_ssm's package __init__ imports its compiled CUDA extension, which the GPU machine does not have, so
bench/mamba_ssm_src.py imports ops/triton/ssd_combined.py (pure Python + Triton) from the source tree directly.
Needs torch, triton and einops (third_party/wheels or --wheels; see scripts/fetch_mamba_ssm.sh).

  python3 bench/mamba_ssd_reference.py --mamba-src third_party/mamba_ssm-2.3.2 [--iters 50] [--warmup 10]

--mamba-src is the folder holding the `mamba_ssm` package directory (an unpacked sdist or a source tree).
Prints a table like ssd_scan_bench's; --json FILE also writes the numbers.
"""
import argparse
import glob
import json
import os
import sys

import mamba_ssm_src


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def bench_shape(ssd, torch, batch, seqlen, nheads, ngroups, headdim, dstate, warmup, iters):
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(batch, seqlen, nheads, headdim, device=dev, dtype=torch.bfloat16, generator=gen)
    B = (0.5 * torch.randn(batch, seqlen, ngroups, dstate, device=dev, generator=gen)).to(torch.bfloat16)
    C = (0.5 * torch.randn(batch, seqlen, ngroups, dstate, device=dev, generator=gen)).to(torch.bfloat16)
    dt = 0.001 + 0.099 * torch.rand(batch, seqlen, nheads, device=dev, generator=gen)
    A = -(1.0 + 15.0 * torch.rand(nheads, device=dev, generator=gen))
    D = torch.ones(nheads, device=dev)
    dy = torch.randn(batch, seqlen, nheads, headdim, device=dev, dtype=torch.bfloat16, generator=gen)
    leaves = [t.requires_grad_() for t in (x, dt, A, B, C, D)]

    def forward():
        return ssd.mamba_chunk_scan_combined(x, dt, A, B, C, 128, D=D)

    for _ in range(warmup):
        y = forward()
        torch.autograd.grad(y, leaves, dy)
    torch.cuda.synchronize()
    fwd, bwd, both = [], [], []
    for _ in range(iters):
        start, mid, stop = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        y = forward()
        mid.record()
        torch.autograd.grad(y, leaves, dy)
        stop.record()
        stop.synchronize()
        fwd.append(start.elapsed_time(mid))
        bwd.append(mid.elapsed_time(stop))
        both.append(start.elapsed_time(stop))
    return median(fwd), median(bwd), median(both)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mamba-src", default=mamba_ssm_src.DEFAULT_SRC,
                    help="folder holding the mamba_ssm package sources (default third_party/mamba_ssm-2.3.2)")
    ap.add_argument("--wheels", default=None, help="folder of pure-Python wheels to put on sys.path (einops)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.wheels:
        sys.path[:0] = sorted(glob.glob(os.path.join(args.wheels, "*.whl")))  # zipimport of py3-none-any wheels
    import torch
    import triton

    try:
        ssd = mamba_ssm_src.load("ops.triton.ssd_combined", args.mamba_src)
    except FileNotFoundError as e:
        sys.exit(f"mamba_ssd_reference: {e}")
    shapes = [(4, 2048, 32, 8, 64, 128), (1, 8192, 32, 8, 64, 128)]
    print(f"SSD scan (mamba_ssm Triton mamba_chunk_scan_combined, torch {torch.__version__}, triton "
          f"{triton.__version__}), chunk 128, median of {args.iters} after {args.warmup} warmup")
    print(f"{'batch':<6} {'seqlen':<6} {'nheads':<6} {'ngroups':<7} {'headdim':<7} {'dstate':<6} "
          f"{'fwd_ms':>10} {'bwd_ms':>10} {'fwd+bwd_ms':>12}")
    rows = []
    for shape in shapes:
        f, b, fb = bench_shape(ssd, torch, *shape, args.warmup, args.iters)
        batch, seqlen, nheads, ngroups, headdim, dstate = shape
        print(f"{batch:<6} {seqlen:<6} {nheads:<6} {ngroups:<7} {headdim:<7} {dstate:<6} {f:>10.3f} {b:>10.3f} "
              f"{fb:>12.3f}")
        rows.append(dict(batch=batch, seqlen=seqlen, nheads=nheads, ngroups=ngroups, headdim=headdim,
                         dstate=dstate, fwd_ms=f, bwd_ms=b, fwd_bwd_ms=fb))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
