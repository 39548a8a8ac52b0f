"""Feasibility probe (issue 13, ninth session): would running AdamW beside the next step's forward pay on an H200?

AdamW is one memory-bound pass (about 30 bytes a parameter, 8% of the 1b step); the forward is GEMM-bound. If
they overlapped well, a step that applies the previous step's update layer by layer while its forward runs
(layer L's forward waiting only for layer L's update) would hide most of it. That restructuring is large
(checkpoints and evaluation would have to flush a pending update), so this probe measures the overlap first,
in PyTorch at the 1b recipe's shapes: 16 layers (hidden 2048, ffn 5632, 16 heads, 4 x 2048 tokens), 0.96 G
fp32 parameters in 16 per-layer chunks (embedding and LM head with the first and last), torch's fused AdamW
plus the bf16 weight copy per chunk; with and without a backward-sized GEMM load after it (two GEMMs per
forward GEMM), so the GPU runs at its power cap as in a training step.

Modes, medians of 12 after 4 warmup, CUDA events:
  adamw     the 16 AdamW chunks alone
  forward   the 16-layer forward alone
  serial    AdamW, then the forward (today's order)
  overlap   AdamW chunks on a side stream, layer L's forward waiting for chunk L's event
Usage: python3 bench/adamw_overlap_probe.py   (needs a CUDA GPU with about 30 GiB free)
"""
import json
import statistics
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a clear line instead of a traceback (--help included) where PyTorch is missing
    sys.exit(f"error: {e}: bench/adamw_overlap_probe.py needs PyTorch, which the GPU machine has")

B, S, H, NH, FFN, L, V = 4, 2048, 2048, 16, 5632, 16, 32768
T = B * S
dev, bf = "cuda", torch.bfloat16


def main():
    torch.manual_seed(0)
    per_layer = 4 * H * H + 3 * H * FFN  # qkv + o, fc1 (2F) + fc2
    chunks = [per_layer] * L
    chunks[0] += V * H  # embedding with the first layer
    chunks[-1] += V * H  # LM head with the last
    p = [torch.randn(n, device=dev) * 0.02 for n in chunks]
    g = [torch.randn(n, device=dev) * 1e-3 for n in chunks]
    m = [torch.zeros(n, device=dev) for n in chunks]
    v = [torch.zeros(n, device=dev) for n in chunks]
    w16 = [torch.empty(n, device=dev, dtype=bf) for n in chunks]
    steps = [torch.tensor(1.0, device=dev) for _ in chunks]

    def adamw(i):
        torch._fused_adamw_([p[i]], [g[i]], [m[i]], [v[i]], [], [steps[i]], lr=1e-4, beta1=0.9, beta2=0.95,
                            weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
        w16[i].copy_(p[i])

    W = [dict(qkv=torch.randn(3 * H, H, device=dev, dtype=bf) * 0.02, o=torch.randn(H, H, device=dev, dtype=bf) * 0.02,
              fc1=torch.randn(2 * FFN, H, device=dev, dtype=bf) * 0.02,
              fc2=torch.randn(H, FFN, device=dev, dtype=bf) * 0.02) for _ in range(L)]
    x0 = torch.randn(T, H, device=dev, dtype=bf)

    def layer_forward(x, w):
        qkv = x @ w["qkv"].t()
        q, k, vv = qkv.view(B, S, 3, NH, H // NH).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, vv, is_causal=True).transpose(1, 2).reshape(T, H)
        x = x + a @ w["o"].t()
        gu = x @ w["fc1"].t()
        return x + (F.silu(gu[:, :FFN]) * gu[:, FFN:]) @ w["fc2"].t()

    shapes = [(H, 3 * H), (H, H), (H, 2 * FFN), (FFN, H)]  # (in, out) of qkv, o, fc1, fc2
    bufs = {s: (torch.randn(T, s[1], device=dev, dtype=bf), torch.randn(T, s[0], device=dev, dtype=bf),
                torch.empty(T, s[0], device=dev, dtype=bf), torch.empty(s[1], s[0], device=dev, dtype=bf))
            for s in shapes}

    def backward_load():  # the input and weight gradient GEMMs of every forward GEMM
        for w in reversed(W):
            for shape, name in zip(shapes, ("qkv", "o", "fc1", "fc2")):
                dy, xin, dx, dw = bufs[shape]
                torch.mm(dy, w[name], out=dx)
                torch.mm(dy.t(), xin, out=dw)

    side = torch.cuda.Stream()

    def step(mode, with_backward):
        main_stream = torch.cuda.current_stream()
        if mode in ("adamw", "serial"):
            for i in range(L):
                adamw(i)
        if mode in ("forward", "serial"):
            x = x0
            for i in range(L):
                x = layer_forward(x, W[i])
        if mode == "overlap":
            side.wait_stream(main_stream)
            events = []
            with torch.cuda.stream(side):
                for i in range(L):
                    adamw(i)
                    events.append(torch.cuda.Event())
                    events[-1].record(side)
            x = x0
            for i in range(L):
                main_stream.wait_event(events[i])
                x = layer_forward(x, W[i])
            main_stream.wait_stream(side)
        if with_backward:
            backward_load()

    def median_ms(mode, with_backward, n=12, warmup=4):
        times = []
        for it in range(n + warmup):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step(mode, with_backward)
            b.record()
            torch.cuda.synchronize()
            if it >= warmup:
                times.append(a.elapsed_time(b))
        return statistics.median(times)

    results = {}
    for rep in range(2):
        for with_backward in (False, True):
            for mode in ("adamw", "forward", "serial", "overlap"):
                if with_backward and mode in ("adamw", "forward"):
                    continue
                key = mode + ("+backward" if with_backward else "")
                results.setdefault(key, []).append(median_ms(mode, with_backward))
                print(f"rep {rep} {key:18s} {results[key][-1]:9.3f} ms", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
