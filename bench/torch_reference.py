#!/usr/bin/env python3
"""The PyTorch side of `stepgraph bench`: stepgraph's training step in plain PyTorch, timed the ways a PyTorch user
would run it, on the same shapes and batch: the Llama models, and the MoE and hybrid Mamba models (the family follows
from the recipe: model.hybrid_override_pattern -> hybrid, model.num_moe_experts -> moe, else llama).

The step (stepgraph's math): embedding -> N x [RMSNorm -> fused QKV -> RoPE (HF rotate-half) -> causal SDPA (GQA)
-> o_proj -> +residual -> RMSNorm -> fused gate|up -> silu(gate)*up -> down_proj -> +residual] -> RMSNorm ->
LM head (untied unless the recipe ties it) -> masked mean cross-entropy per microbatch, the step loss being the mean
over global_batch_size / micro_batch_size microbatches. fp32 master parameters and gradients (accumulated over the
microbatches), bf16 autocast with bf16 activations (the embedding output is cast to bf16, so the residual stream is
bf16 as in stepgraph), global-norm clipping (clip_grad_norm_), fused AdamW with decoupled weight decay on matrices
only (norm weights get none, as in stepgraph's parameter layout). Left out, as negligible for timing: the LR
schedule (a constant optimizer.lr; stepgraph computes it in one tiny kernel) and dropout (the Llama recipes have none).

MoE (bench/torch_moe.py) and hybrid (bench/torch_stack.py, bench/torch_mamba2.py) models: the layers of Megatron's
pattern, each pre-norm residual; the reported loss is the LM loss (the MoE aux and z losses train, as Megatron's, but
are not added to it). --impls picks the implementations timed, each in every mode: moe: loop (a Python loop over the
experts, Hugging Face's layout, one host sync per layer) and grouped_mm (torch._grouped_mm over stacked experts);
hybrid: mamba_ssm (mamba_ssm 2.3.2's Mamba2 module with its Triton SSD and gated-norm kernels, loaded from the source
tree in --mamba-src, see scripts/fetch_mamba_ssm.sh) and torch (pure PyTorch, as Hugging Face's NemotronH
torch_forward). A whole-step capture that PyTorch cannot do (a dropless MoE's host-side expert sizes) is reported
as status "capture fails" with the reason.

Modes: eager; cuda_graph (the whole step in one torch.cuda.graph, capturable fused AdamW, warmed up on a side
stream); graphed_callables (torch.cuda.make_graphed_callables per transformer block); compile;
compile_reduce_overhead. Each mode runs in a child process of its own, so its memory figures are its own and a crash
or a sticky CUDA error cannot take the other modes down.

Timing: CUDA events around each step (the copy of the next batch into the static inputs is outside them), read after
a synchronize. The first step (it includes torch.compile's compilation), the --warmup steps after it and, for
cuda_graph, the side-stream warmup are excluded from the statistics; capture and first-step times are reported apart.

  python3 bench/torch_reference.py --recipe recipes/llama/tiny.yaml --steps 50 --warmup 10 --json out.json
  python3 bench/torch_reference.py --recipe recipes/moe/small_moe.yaml --impls loop,grouped_mm --json moe.json
  python3 bench/torch_reference.py --device cpu --shrink --steps 3 --warmup 1   # smoke test of the logic, no GPU
  python3 bench/torch_reference.py --device cpu --shrink hybrid --impls torch --modes eager   # ... of a hybrid model
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from contextlib import nullcontext

try:
    import torch
except ImportError as e:  # a clear line instead of a traceback (--help included) where PyTorch is missing
    sys.exit(f"error: {e}: bench/torch_reference.py needs PyTorch, which the GPU machine has")

MODES = ("eager", "cuda_graph", "graphed_callables", "compile", "compile_reduce_overhead")
CUDA_ONLY_MODES = {"cuda_graph", "graphed_callables", "compile_reduce_overhead"}
CUDA_GRAPH_SIDE_WARMUP_STEPS = 3  # as the PyTorch docs' whole-network capture example
GIB = float(1 << 30)


# The recipe reader lives in bench/torch_config.py, the Llama model and the step in bench/torch_llama.py, the MoE and
# hybrid models in bench/torch_stack.py (this script's folder is on sys.path).
from torch_config import (  # noqa: E402,F401  (SHRINK_OVERRIDES: used by the smoke test)
    SHRINK_OVERRIDES, BenchConfig, load_config, model_flops_per_step,
)
from torch_llama import Llama, TrainStep  # noqa: E402
from torch_moe import grouped_mm_unavailable, with_expert_bias_update  # noqa: E402
from torch_stack import IMPLS, StackLM  # noqa: E402
import gpu_power  # noqa: E402


class CaptureFailed(RuntimeError):
    """PyTorch could not capture the step (torch.cuda.graph or make_graphed_callables): a result, not a crash."""


# ------------------------------------------------------------------------------------------------ one mode
def _brief(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _percentile(sorted_values: list[float], q: float) -> float:
    pos = (len(sorted_values) - 1) * q  # linear interpolation, as numpy's default
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _sdpa_context(backend: str):
    if backend == "auto":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([{"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                         "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]])


def run_mode(cfg: BenchConfig, args, mode: str, impl: str) -> dict:
    device = torch.device(args.device)
    result = {"mode": mode, "impl": impl, "status": "ok"}
    if mode in CUDA_ONLY_MODES and device.type != "cuda":
        return {**result, "status": "skipped", "error": "needs a CUDA device"}
    try:
        with _sdpa_context(args.sdpa_backend):
            result.update(_run_mode(cfg, args, mode, impl, device))
    except CaptureFailed as e:
        traceback.print_exc(file=sys.stderr)
        result.update(status="capture fails", error=str(e))
    except Exception as e:  # a failed mode is reported, never fatal to the others
        traceback.print_exc(file=sys.stderr)
        result.update(status="failed", error=_brief(e))
    if device.type == "cuda" and "peak_allocated_bytes" not in result:
        try:  # a failed mode's memory so far; after a sticky CUDA error even this may fail
            result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        except Exception:
            pass
    return result


def build_model(cfg: BenchConfig, args, impl: str, device: torch.device, act_dtype=torch.bfloat16):
    if cfg.family == "llama":
        return Llama(cfg, device, act_dtype, fused=impl == "fused")
    if "E" in cfg.layer_pattern and (impl == "grouped_mm" or cfg.family == "hybrid"):  # hybrid E layers: grouped_mm
        reason = grouped_mm_unavailable(device)
        if reason:
            raise RuntimeError(f"{reason}; the expert loop is the fallback: --impls loop")
    return StackLM(cfg, device, act_dtype, impl=impl, mamba_src=args.mamba_src)


def _capture(what: str, capture):
    try:
        return capture()
    except Exception as e:  # the first error in the chain names the cause; ending the capture raises another
        root = e
        while root.__context__ is not None and root.__context__ is not root:
            root = root.__context__
        raise CaptureFailed(f"{what}: {_brief(root)}" + ("" if root is e else f" (then {_brief(e)})")) from e


def _nvidia_smi_id(device: torch.device) -> str:
    """nvidia-smi's name for the CUDA device: its UUID (CUDA's device order need not be nvidia-smi's)."""
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is not None:
        return "GPU-" + str(uuid)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible if visible.isdigit() else str(device.index or 0)


def _run_mode(cfg: BenchConfig, args, mode: str, impl: str, device: torch.device) -> dict:
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model = build_model(cfg, args, impl, device)
    model.init_weights(args.seed)
    # The expert-bias update (if any) is device work around each step, inside the cuda_graph capture (torch_moe).
    train_step = with_expert_bias_update(TrainStep(model, cfg, mode, args.seed), model)
    total_steps = (CUDA_GRAPH_SIDE_WARMUP_STEPS if mode == "cuda_graph" else 0) + 1 + args.warmup + args.steps
    loss_log = torch.zeros(total_steps, dtype=torch.float32, device=device)
    out: dict = {"persistent_grads": train_step.persistent_grads}
    gc.collect()
    if cuda:  # the mode's memory from here on; the parameters are allocated already and counted
        sync()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    step_index, step = 0, train_step

    setup_start = time.perf_counter()
    if mode == "cuda_graph":
        # The PyTorch docs' whole-network capture: warm up on a side stream (real, logged steps), then capture.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(CUDA_GRAPH_SIDE_WARMUP_STEPS):
                train_step.feed(step_index)
                loss_log[step_index].copy_(train_step())
                step_index += 1
        torch.cuda.current_stream().wait_stream(side)
        sync()
        capture_start = time.perf_counter()
        graph = torch.cuda.CUDAGraph()

        def record() -> torch.Tensor:
            with torch.cuda.graph(graph):
                loss = train_step()  # recorded, not run
            sync()
            return loss
        static_loss = _capture("torch.cuda.graph of the whole step", record)
        out["capture_s"] = time.perf_counter() - capture_start

        def replay() -> torch.Tensor:
            graph.replay()
            return static_loss
        step = replay
    elif mode == "graphed_callables":
        # A sample input per block: each graph's static input is saved for its backward, so none may be shared.
        samples = tuple((torch.randn(cfg.micro_batch_size, cfg.seq_length, cfg.hidden_size, device=device,
                                     dtype=torch.bfloat16, requires_grad=True),) for _ in model.layers)
        capture_start = time.perf_counter()

        def record() -> tuple:
            with train_step.autocast():
                graphed = torch.cuda.make_graphed_callables(tuple(model.layers), samples)
            sync()
            return graphed
        model.graphed_layers = _capture("make_graphed_callables per layer", record)
        out["capture_s"] = time.perf_counter() - capture_start
        del samples
    sync()
    out["setup_s"] = time.perf_counter() - setup_start

    def run(global_step: int, start=None, end=None) -> None:
        train_step.feed(global_step)  # outside the timed region, in every mode
        if start is not None:
            start.record()
        loss = step()
        if end is not None:
            end.record()
        loss_log[global_step].copy_(loss)

    t = time.perf_counter()  # the first step includes torch.compile's compilation and lazy initialisation
    run(step_index)
    step_index += 1
    sync()
    out["first_step_s"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(args.warmup):
        run(step_index)
        step_index += 1
    sync()
    out["warmup_s"] = time.perf_counter() - t
    if cuda:
        out["setup_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()  # steady state from here; the mode's peak is the max of both

    step_ms = []
    wall_start = time.perf_counter()
    if cuda:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(args.steps)]
        power = gpu_power.GpuPowerSampler(_nvidia_smi_id(device)) if args.power else None
        with power or nullcontext():  # as stepgraph bench's power line
            for start, end in events:
                run(step_index, start, end)
                step_index += 1
            sync()  # before any elapsed_time is read
        if power is not None:
            out["power"] = power.summary()
        step_ms = [start.elapsed_time(end) for start, end in events]
    else:
        for _ in range(args.steps):
            t = time.perf_counter()
            run(step_index)
            step_ms.append((time.perf_counter() - t) * 1e3)
            step_index += 1
    wall_s = time.perf_counter() - wall_start

    ordered = sorted(step_ms)
    median_s = _percentile(ordered, 0.5) / 1e3
    out.update(median_ms=median_s * 1e3, p90_ms=_percentile(ordered, 0.9), min_ms=ordered[0],
               mean_ms=sum(step_ms) / len(step_ms), wall_ms_per_step=wall_s * 1e3 / args.steps,
               tokens_per_s=cfg.tokens_per_step / median_s, wall_tokens_per_s=cfg.tokens_per_step * args.steps / wall_s,
               tflops=model_flops_per_step(cfg) / median_s / 1e12)
    out["mfu"] = out["tflops"] / args.peak_tflops if cuda and args.peak_tflops > 0 else None
    if cuda:
        free, total = torch.cuda.mem_get_info()
        out.update(steady_peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                   peak_allocated_bytes=max(out["setup_peak_allocated_bytes"], torch.cuda.max_memory_allocated()),
                   reserved_bytes=torch.cuda.memory_reserved(), device_used_bytes=total - free)
    if mode.startswith("compile"):  # what torch.compile did not cover, or ran without CUDA graphs
        from torch._dynamo.utils import counters
        out["graph_breaks"] = sum(counters["graph_break"].values())
        if mode == "compile_reduce_overhead":
            out["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
    out["losses"] = loss_log.tolist()
    out["step_ms"] = step_ms
    return out


# ------------------------------------------------------------------------------------------- driver, output
def environment(args, with_device: bool) -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "device": args.device, "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}
    if with_device and torch.device(args.device).type == "cuda":  # creates a CUDA context: not in the parent
        env.update(device_name=torch.cuda.get_device_name(), cudnn=torch.backends.cudnn.version())
    return env


def prepare_device(args) -> None:
    if args.deterministic:  # before the first cuBLAS call: its workspace setting is read when the handle is made
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)  # an op with no deterministic kernel raises: the mode fails, named
    if torch.device(args.device).type == "cuda":
        device = torch.device(args.device)
        torch.cuda.set_device(device.index if device.index is not None else 0)
        # fp32 accumulation throughout, as stepgraph's cuBLASLt GEMMs (no reduced-precision split-K reductions).
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def run_mode_in_child(args, mode: str, impl: str) -> dict:
    """The mode in a fresh process: its own memory figures; a crash or a hang is reported, not inherited."""
    fd, path = tempfile.mkstemp(prefix=f"torch_reference_{mode}_", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--modes", mode, "--impls", impl, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--device", args.device, "--seed", str(args.seed), "--sdpa-backend",
           args.sdpa_backend, "--peak-tflops", str(args.peak_tflops), "--child-result", path]
    cmd += ["--deterministic"] if args.deterministic else []
    cmd += ["--power" if args.power else "--no-power"]
    cmd += (["--recipe", args.recipe] if args.recipe else []) + ([f"--shrink={args.shrink}"] if args.shrink else [])
    cmd += ["--mamba-src", args.mamba_src] if args.mamba_src else []
    for item in args.set or []:
        cmd += ["--set", item]
    tail: deque[str] = deque(maxlen=20)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        timer = threading.Timer(args.mode_timeout, proc.kill)
        timer.start()
        for line in proc.stdout:
            sys.stderr.write(f"  [{impl}/{mode}] {line}")
            tail.append(line.rstrip())
        rc = proc.wait()
        timer.cancel()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if rc == 0 and text:
            return json.loads(text)
        why = f"killed after --mode-timeout {args.mode_timeout:g} s" if rc == -9 else f"exit code {rc}"
        last = next((line.strip() for line in reversed(tail) if line.strip()), "")
        return {"mode": mode, "impl": impl, "status": "failed",
                "error": f"child process {why}{': ' + last if last else ''}"[:300]}
    finally:
        os.unlink(path)


def print_table(report: dict) -> None:
    def fmt(value, spec: str, scale: float = 1.0) -> str:
        return "-" if value is None else format(value / scale, spec)

    def label(r: dict) -> str:  # the mode, and the implementation where the family has several
        return r["mode"] if report["family"] == "llama" else f"{r['impl']}/{r['mode']}"

    cols = ["mode", "status", "median ms", "p90 ms", "tokens/s", "TFLOP/s", "MFU", "peak GiB", "steady GiB",
            "device used GiB", "capture s", "1st step s", "loss diff"]
    rows = [[label(r), r["status"], fmt(r.get("median_ms"), ".3f"), fmt(r.get("p90_ms"), ".3f"),
             fmt(r.get("tokens_per_s"), ",.0f"), fmt(r.get("tflops"), ".1f"),
             fmt(None if r.get("mfu") is None else 100 * r["mfu"], ".1f"),
             fmt(r.get("peak_allocated_bytes"), ".2f", GIB), fmt(r.get("steady_peak_allocated_bytes"), ".2f", GIB),
             fmt(r.get("device_used_bytes"), ".2f", GIB), fmt(r.get("capture_s"), ".2f"),
             fmt(r.get("first_step_s"), ".2f"), fmt(r.get("loss_rel_diff_vs_eager"), ".1e")]
            for r in report["modes"]]
    widths = [max(len(name), *(len(row[i]) for row in rows)) for i, name in enumerate(cols)]
    c, env = report["config"], report["environment"]
    print(f"\nPyTorch reference: {report['recipe'] or 'built-in defaults'}: {c['num_layers']} layers, hidden "
          f"{c['hidden_size']}, heads {c['num_attention_heads']} (query groups {c['num_query_groups']}), ffn "
          f"{c['ffn_hidden_size']}, vocab {c['vocab_size']}, seq {c['seq_length']}, micro batch "
          f"{c['micro_batch_size']} x {report['num_microbatches']} microbatches = {report['tokens_per_step']} "
          f"tokens/step; {report['steps']} timed steps after {report['warmup']} warmup; torch {env['torch']} on "
          f"{env.get('device_name', env['device'])}")
    if report.get("deterministic"):
        print(f"deterministic: torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG="
              f"{env.get('cublas_workspace_config') or '(not recorded)'}")
    if report["family"] == "moe" or "E" in report["layer_pattern"]:
        router = c["moe_router_score_function"] + " routing" + (" with the expert bias"
                                                                 if c["moe_router_enable_expert_bias"] else "")
        experts = "SwiGLU" if c["gated_linear_unit"] else c["activation_func"]
        shared = f", shared expert {c['moe_shared_expert_intermediate_size']}" \
            if c["moe_shared_expert_intermediate_size"] else ""
        print(f"MoE: {c['num_moe_experts']} {experts} experts top-{c['moe_router_topk']}, expert ffn "
              f"{c['moe_ffn_hidden_size']}{shared}, {router}, kv_channels {c['kv_channels'] or 'hidden/heads'}, "
              f"dropless; {c['moe_router_load_balancing_type']} coeff {c['moe_aux_loss_coeff']}, z-loss coeff "
              f"{c['moe_z_loss_coeff'] or 0}")
    if report["family"] == "hybrid":
        print(f"hybrid pattern {report['layer_pattern']}: Mamba2 d_state {c['mamba_state_dim']}, head dim "
              f"{c['mamba_head_dim']}, {c['mamba_num_heads']} heads, {c['mamba_num_groups']} groups, chunk "
              f"{c['mamba_chunk_size']}; attention position embedding {c['position_embedding_type']}")
    for row in [cols] + rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    print("median/p90: CUDA-event time per step (wall time on CPU); MFU in % of --peak-tflops; peak GiB: "
          "max_memory_allocated over setup and steps, steady GiB: over the timed steps; device used: whole GPU "
          "(mem_get_info); capture s: torch.cuda.graph / make_graphed_callables; 1st step s includes torch.compile's "
          "compilation; loss diff: max relative difference of the per-step losses from eager's")
    for r in report["modes"]:
        if r.get("power"):
            print(f"{label(r)}: power (nvidia-smi): {gpu_power.describe(r['power'])}")
        if r.get("error"):
            print(f"{label(r)}: {r['status']}: {r['error']}")
        if r.get("loss_rel_diff_vs_first_impl") is not None:
            print(f"{label(r)}: losses differ from {report['impls'][0]}/eager's by at most "
                  f"{r['loss_rel_diff_vs_first_impl']:.1e} (relative)")
        if r.get("graph_breaks") or r.get("cudagraph_skips"):
            print(f"{label(r)}: note: {r.get('graph_breaks', 0)} graph breaks, {r.get('cudagraph_skips', 0)} "
                  "CUDA-graph skips by inductor (TORCH_LOGS=graph_breaks,perf_hints tells why)")


def _max_rel_diff(reference: list[float], other: list[float]) -> float:
    return max(abs(b - a) / max(abs(a), 1e-12) for a, b in zip(reference, other))


def make_report(args, cfg: BenchConfig, impls: list[str], results: list[dict]) -> dict:
    results = [dict(r) for r in results]
    for impl in impls:  # every mode trains from the same weights on the same batches: the losses should agree
        eager = next((r for r in results if r["impl"] == impl and r["mode"] == "eager" and r["status"] == "ok"), None)
        for r in results:
            if eager is not None and r["impl"] == impl and r["status"] == "ok":
                r["loss_rel_diff_vs_eager"] = _max_rel_diff(eager["losses"], r["losses"])
    # Every impl starts from the same weights (torch_stack's init): their eager losses should agree too.
    first = next((r for r in results if r["impl"] == impls[0] and r["mode"] == "eager" and r["status"] == "ok"), None)
    for r in results:
        if first is not None and r is not first and r["mode"] == "eager" and r["status"] == "ok":
            r["loss_rel_diff_vs_first_impl"] = _max_rel_diff(first["losses"], r["losses"])
    child_env = next((r["environment"] for r in results if "environment" in r), None)
    for r in results:
        r.pop("environment", None)
    return {"tool": "bench/torch_reference.py", "recipe": args.recipe, "family": cfg.family,
            "layer_pattern": cfg.layer_pattern, "impls": impls, "config": dataclasses.asdict(cfg),
            "num_microbatches": cfg.num_microbatches, "tokens_per_step": cfg.tokens_per_step,
            "model_flops_per_step": model_flops_per_step(cfg), "steps": args.steps, "warmup": args.warmup,
            "sdpa_backend": args.sdpa_backend, "deterministic": args.deterministic,
            "fused_projections": impls == ["fused"] if cfg.family == "llama" else None,
            "peak_tflops": args.peak_tflops,
            "environment": child_env or environment(args, with_device=args.in_process), "modes": results}


def write_json(path: str, report: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", help="Megatron-Bridge style YAML (model.*, train.*, optimizer.* keys)")
    p.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps after the first step (default 10)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {','.join(MODES)} (default all)")
    p.add_argument("--impls", help="comma-separated implementations to time, each in every mode: "
                   + "; ".join(f"{family}: {','.join(names)}" for family, names in IMPLS.items())
                   + " (default: all of the family's; llama: fused, or separate with --separate-projections)")
    p.add_argument("--json", help="also write the report (with per-step times and losses) to this file")
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (CUDA-only modes are skipped)")
    p.add_argument("--shrink", nargs="?", const="auto", metavar="FAMILY",
                   help="a tiny model for a CPU smoke run (overrides the recipe's sizes); FAMILY llama, moe or hybrid "
                        "(default: the recipe's)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a recipe key: model.num_layers=2")
    p.add_argument("--separate-projections", action="store_true",
                   help="llama: separate q/k/v and gate/up linears (Hugging Face) instead of stepgraph's fused ones")
    p.add_argument("--mamba-src", help="hybrid, impl mamba_ssm: the folder holding mamba_ssm 2.3.2's package sources "
                                       "(default third_party/mamba_ssm-2.3.2, from scripts/fetch_mamba_ssm.sh)")
    p.add_argument("--sdpa-backend", default="auto", choices=("auto", "flash", "cudnn", "efficient", "math"),
                   help="restrict scaled_dot_product_attention to one backend (default: PyTorch's choice)")
    p.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG=:4096:8 unless set: PyTorch "
                        "under the constraint stepgraph's step keeps (run-to-run bitwise equality; the attention "
                        "backward's dQ without atomics); a mode with an op that has no deterministic kernel fails")
    p.add_argument("--power", action=argparse.BooleanOptionalAction, default=True,
                   help="sample board power and SM clock with nvidia-smi during the timed steps, as stepgraph bench "
                        "does (default on: the fifteenth session's A/B found no cost to PyTorch's step, "
                        "docs/performance.md); --no-power turns it off")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak for MFU (H200 SXM: 989)")
    p.add_argument("--in-process", action="store_true", help="run every mode in this process (no isolation)")
    p.add_argument("--mode-timeout", type=float, default=1800.0, help="seconds before a mode's process is killed")
    p.add_argument("--child-result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes {args.modes}: choose from {','.join(MODES)}")
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    overrides = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--set {item}: expected KEY=VALUE")
        import yaml
        overrides[key.strip()] = yaml.safe_load(value)
    cfg = load_config(args.recipe, overrides, shrink=args.shrink)
    family_impls = IMPLS[cfg.family]
    default_impls = ("separate" if args.separate_projections else "fused") if cfg.family == "llama" \
        else ",".join(family_impls)
    impls = [i.strip() for i in (args.impls or default_impls).split(",") if i.strip()]
    if not impls or any(i not in family_impls for i in impls):
        p.error(f"--impls {args.impls}: the {cfg.family} family has {','.join(family_impls)}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():  # this check creates no CUDA context
        print("torch_reference: no CUDA device visible to PyTorch; use --device cpu for a smoke run", file=sys.stderr)
        return 1

    if args.child_result:  # one mode; the result goes to a file for the parent
        prepare_device(args)
        result = run_mode(cfg, args, modes[0], impls[0])
        result["environment"] = environment(args, with_device=True)
        with open(args.child_result, "w", encoding="utf-8") as f:
            json.dump(result, f)
        return 0
    if args.in_process:
        prepare_device(args)

    print(f"torch_reference: {cfg.family} model, pattern {cfg.layer_pattern}: {cfg}", file=sys.stderr)
    results = []
    runs = [(impl, mode) for impl in impls for mode in modes]
    for i, (impl, mode) in enumerate(runs):
        name = mode if cfg.family == "llama" else f"{impl}/{mode}"
        print(f"torch_reference: mode {name} ({i + 1}/{len(runs)})", file=sys.stderr, flush=True)
        if args.in_process or (mode in CUDA_ONLY_MODES and device.type != "cuda"):
            result = run_mode(cfg, args, mode, impl)
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
            from torch import _dynamo
            _dynamo.reset()  # the next mode compiles from scratch, as it would in a process of its own
        else:
            result = run_mode_in_child(args, mode, impl)
        results.append(result)
        if args.json:  # after every mode: a run cut short (a device time limit) keeps what it measured
            write_json(args.json, {**make_report(args, cfg, impls, results), "complete": False})
        print(f"torch_reference: mode {name}: {result['status']}"
              + (f", median {result['median_ms']:.3f} ms" if "median_ms" in result else "")
              + (f" ({result['error']})" if result.get("error") else ""), file=sys.stderr, flush=True)

    report = make_report(args, cfg, impls, results)
    if args.json:
        write_json(args.json, report)
    print_table(report)
    return 0 if any(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
