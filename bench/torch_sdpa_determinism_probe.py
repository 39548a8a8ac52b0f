#!/usr/bin/env python3
"""Which attention PyTorch runs when held to determinism, and what it costs: causal bf16
scaled_dot_product_attention forward + backward at the Llama recipes' attention shapes, with
torch.use_deterministic_algorithms off and on (backend: PyTorch's own choice, as bench/torch_reference.py's default).

For each shape and setting it prints the median time of forward + backward (CUDA events, after warmup), the GPU
kernels that ran (torch.profiler, names shortened), and whether two backward passes on the same inputs gave bitwise
equal dQ, dK, dV. This explains bench/torch_reference.py --deterministic's step times; stepgraph's own attention is
cuDNN's deterministic backward (bench/attention_determinism_probe.cpp measures it against cuDNN's non-deterministic
one).

  python3 bench/torch_sdpa_determinism_probe.py [--iters 20] [--shapes small,1b]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a clear line instead of a traceback (--help included) where PyTorch is missing
    sys.exit(f"error: {e}: bench/torch_sdpa_determinism_probe.py needs PyTorch, which the GPU machine has")

# (batch, sequence, heads, head dim): the attention of recipes/llama/{tiny,small,1b}.yaml
SHAPES = {"tiny": (4, 256, 4, 64), "small": (8, 1024, 12, 64), "1b": (4, 2048, 16, 128)}


def fwd_bwd(q, k, v, dout):
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return torch.autograd.grad(out, (q, k, v), dout)


def kernel_names(q, k, v, dout) -> list[str]:
    from torch.profiler import ProfilerActivity, profile
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")  # one profile per call: nothing lost
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd(q, k, v, dout)
        torch.cuda.synchronize()
    names = sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA" and e.self_device_time_total > 0})
    return [n if len(n) <= 90 else n[:87] + "..." for n in names]


def median_ms(q, k, v, dout, iters: int) -> float:
    for _ in range(3):
        fwd_bwd(q, k, v, dout)
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fwd_bwd(q, k, v, dout)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=20, help="timed forward + backward passes per setting (default 20)")
    p.add_argument("--shapes", default="small,1b", help=f"comma-separated, of {','.join(SHAPES)} (default small,1b)")
    args = p.parse_args()
    unknown = [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown or args.iters < 1:
        p.error(f"--shapes: unknown {unknown} (known: {', '.join(SHAPES)})" if unknown else "--iters must be >= 1")
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; causal SDPA, bf16, backend auto")
    for name in args.shapes.split(","):
        b, s, h, d = SHAPES[name]
        gen = torch.Generator(device="cuda").manual_seed(1234)
        q, k, v, dout = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        for deterministic in (False, True):
            torch.use_deterministic_algorithms(deterministic)
            first, second = fwd_bwd(q, k, v, dout), fwd_bwd(q, k, v, dout)
            repeatable = all(torch.equal(a, c) for a, c in zip(first, second))
            ms = median_ms(q, k, v, dout, args.iters)
            print(f"\n{name} (B {b}, S {s}, heads {h}, d {d}), deterministic={deterministic}: forward + backward "
                  f"{ms:.3f} ms median, dQ/dK/dV bitwise repeatable: {repeatable}")
            for kernel in kernel_names(q, k, v, dout):
                print(f"  {kernel}")
        torch.use_deterministic_algorithms(False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
