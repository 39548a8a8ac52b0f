#!/usr/bin/env python3
"""stepgraph vs Hugging Face transformers: the same weights and the same batch give the same loss.

Steps (issue 4 "against PyTorch", issue 5 "transformers loads the saved checkpoint"):
  (a) `stepgraph data synth` writes a synthetic corpus to OUT/corpus;
  (b) `stepgraph train RECIPE` trains K+1 steps on it, saving a checkpoint at step K and dumping every
      step's batch (--dump-batches); a second, 2-step run saves at step 1 (the early check);
  (c) transformers loads OUT/ckpt/iter_000000K with the class its config.json names (LlamaForCausalLM
      for GPT recipes, Qwen2ForCausalLM with --override model.add_qkv_bias=true, Qwen3ForCausalLM with
      --override model.qk_layernorm=true, MixtralForCausalLM for MoE
      recipes such as moe/tiny_moe (Qwen3MoeForCausalLM with model.qk_layernorm=true, Qwen2MoeForCausalLM with
      model.moe_shared_expert_gate=true and a shared expert), NemotronHForCausalLM for
      hybrid Mamba recipes such as hybrid/tiny_hybrid, with MoE layers too: hybrid/tiny_hybrid_moe), in
      bfloat16 and in float32 (no missing or unexpected tensor is allowed);
  (d) the loss of batch K+1 is computed as stepgraph defines it: the global batch is split into
      global/micro microbatches of micro_batch_size sequences; per microbatch the mean cross-entropy
      over tokens with loss_mask 1 (sum(mask*ce) / max(sum(mask), 1)); the step loss is the mean over
      microbatches. The targets come from the batch file (already shifted: no shifting here);
  (e) that loss is compared with metrics.jsonl's loss at step K+1 (the loss stepgraph computed with the
      weights after step K, i.e. the checkpoint's weights). Same for step 2 vs iter_0000001.

Tolerance: relative difference |hf - stepgraph| / |stepgraph| <= 1e-2 for both dtypes (bf16 compute on
either side rounds activations to 8 bits of mantissa; the checkpoint's bf16 weights are exactly the
GPU step's compute weights). On the CPU backend (fp32 compute with the fp32 master weights, while the
checkpoint holds them rounded to bf16) the float32 row is expected within about 1e-3.

Prints a table; exit status 0 when every row passes, 1 when one fails, 2 for a usage/setup problem.

MoE models (Mixtral): the loss is the language-model loss alone on both sides; the load-balancing loss is
reported apart by stepgraph (metrics.jsonl moe_aux_loss: per MoE layer the mean over microbatches of
Megatron's switch aux loss, summed over layers) and recomputed here from transformers' router logits with
Megatron's formula:  coeff * E / (k T^2) * sum_e count_e * sum_t softmax(logits_t)_e  per microbatch.

GPU machine:  python3 tests/model/hf_parity.py --stepgraph build/stepgraph --out /tmp/hf_parity
MoE (Mixtral): python3 tests/model/hf_parity.py --stepgraph build/stepgraph --out /tmp/hf_parity_moe \
      --recipe moe/tiny_moe --override model.moe_aux_loss_coeff=0.01
              python3 tests/model/hf_parity.py --stepgraph build/stepgraph --out /tmp/hf_parity_hybrid \
                  --recipe hybrid/tiny_hybrid    (NemotronH's MoE: scripts/gpu.sh's overrides)
NemotronH is run on transformers' pure-PyTorch path (use_mamba_kernels=False: no mamba_ssm needed). That
path clamps dt from below at time_step_min, the dt_bias INIT parameter (its CUDA path clamps to
time_step_limit, as Megatron and stepgraph do), so the script loads with time_step_min = the limit's lower
end to compare the same function.
CPU check of the script itself (small model, no graphs; add --main-params --tol-fp32 1e-5 to compare the
float32 row with the fp32 master weights stepgraph's CPU backend computed with):
  python3 tests/model/hf_parity.py --stepgraph build/stepgraph --out /tmp/hf_parity_cpu --steps 3 \
      --graphs none --cpu --override model.num_layers=2 model.hidden_size=64 model.ffn_hidden_size=128 \
      model.seq_length=32 dataset.seq_length=32
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the GPU machine has no network; nothing is downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import torch
    import torch.nn.functional as F
    import transformers
    from safetensors.torch import load_file
except ImportError as e:
    print(f"error: {e}: needs torch, transformers and safetensors", file=sys.stderr)
    sys.exit(2)


def run(cmd, log_path):
    """Runs cmd, teeing nothing: output goes to log_path; raises with its tail on failure."""
    print("+ " + " ".join(cmd), flush=True)
    start = time.time()
    with open(log_path, "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    with open(log_path) as log:
        text = log.read()
    if rc != 0:
        raise SystemExit(f"error: exit status {rc} after {time.time() - start:.1f} s from: {' '.join(cmd)}\n"
                         f"--- {log_path} (tail):\n{text[-4000:]}")
    return text


def resolved_value(config_yaml, key):
    """The value of `key:` in `stepgraph config show` output (keys used here are unique)."""
    m = re.search(r"^\s*" + re.escape(key) + r":\s*([^\s#]+)", config_yaml, re.MULTILINE)
    if not m:
        raise SystemExit(f"error: `stepgraph config show` printed no {key}")
    return m.group(1)


def metrics_losses(path, key="loss"):
    """step -> loss (or another key) from metrics.jsonl (tolerates nan/inf, which strict JSON does not allow)."""
    losses = {}
    with open(path) as f:
        for line in f:
            step = re.search(r'"step":\s*(-?\d+)', line)
            loss = re.search(r'"' + key + r'":\s*([^,}\s]+)', line)
            if step and loss:
                losses[int(step.group(1))] = float(loss.group(1))
    return losses


def megatron_aux_loss(router_logits, k, coeff):
    """Megatron's switch load-balancing loss of one microbatch, summed over the MoE layers."""
    total = 0.0
    for logits in router_logits:  # one [tokens, E] tensor per layer
        logits = logits.float()
        tokens, experts = logits.shape
        probs = torch.softmax(logits, dim=-1)
        counts = torch.zeros(experts, device=logits.device)
        counts.scatter_add_(0, torch.topk(logits, k, dim=-1).indices.reshape(-1),
                            torch.ones(tokens * k, device=logits.device))
        total += float(coeff * experts / (k * tokens * tokens) * (counts * probs.sum(dim=0)).sum())
    return total


def stepgraph_loss(model, batch, micro_batch_size, device, aux=None):
    """The step loss exactly as stepgraph defines it (see the module docstring). With aux = [] (MoE
    models), appends each microbatch's Megatron aux loss."""
    tokens = batch["tokens"].long()
    targets = batch["targets"].long()
    mask = batch["loss_mask"].float()
    sequences, seq_length = tokens.shape
    if sequences % micro_batch_size != 0:
        raise SystemExit(f"error: the batch has {sequences} sequences, not a multiple of micro_batch_size "
                         f"{micro_batch_size}")
    per_microbatch = []
    with torch.no_grad():
        for m in range(sequences // micro_batch_size):
            rows = slice(m * micro_batch_size, (m + 1) * micro_batch_size)
            # Only Mixtral router logits carry the Megatron aux loss here: NemotronH's MoE returns no
            # router logits (its LM loss is compared as for every model; the aux loss is stepgraph's alone).
            moe = model.config.model_type == "mixtral"
            result = model(input_ids=tokens[rows].to(device), output_router_logits=bool(moe) and aux is not None)
            logits = result.logits.float()  # [mbs, L, V], fp32 softmax
            if moe and aux is not None:
                aux.append(megatron_aux_loss(result.router_logits, model.config.num_experts_per_tok,
                                             model.config.router_aux_loss_coef))
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[rows].reshape(-1).to(device),
                                 reduction="none")
            mb_mask = mask[rows].reshape(-1).to(device)
            per_microbatch.append(float((ce.double() * mb_mask.double()).sum() / max(float(mb_mask.sum()), 1.0)))
    return sum(per_microbatch) / len(per_microbatch), per_microbatch


def main_params_folder(folder, out):
    """A folder transformers loads the checkpoint's fp32 master weights from (--main-params): its config.json
    and optimizer_main_params.safetensors (the same tensor names) as model.safetensors, linked."""
    view = os.path.join(out, "main_params", os.path.basename(folder))
    os.makedirs(view, exist_ok=True)
    for name, target in (("config.json", "config.json"), ("model.safetensors", "optimizer_main_params.safetensors")):
        link = os.path.join(view, name)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join(os.path.abspath(folder), target), link)
    return view


def load_hf(folder, dtype, device, attn):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    architecture = config["architectures"][0]
    extra = {}
    if architecture == "NemotronHForCausalLM":  # see the module docstring
        extra = {"use_mamba_kernels": False, "time_step_min": (config.get("time_step_limit") or [0.0])[0]}
    model, info = getattr(transformers, architecture).from_pretrained(
        folder, dtype=dtype, attn_implementation=attn, output_loading_info=True, **extra)
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        raise SystemExit(f"error: transformers loaded {folder} with {problems}")
    return model.to(device).eval()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stepgraph", required=True, help="the stepgraph binary")
    p.add_argument("--out", required=True, help="output folder (corpus, checkpoints, batches, runs, logs)")
    p.add_argument("--recipe", default="llama/tiny")
    p.add_argument("--steps", type=int, default=100,
                   help="K: compare step K+1 with the step-K checkpoint (trained enough that the loss is "
                        "clearly below the corpus's unigram entropy, so the model uses the context)")
    p.add_argument("--lr", default="3e-3", help="optimizer.lr (the demo recipe's; tiny's 3e-4 learns slowly)")
    p.add_argument("--tokens", type=int, default=200000, help="synthetic corpus size")
    p.add_argument("--micro-batch-size", type=int, default=2)
    p.add_argument("--global-batch-size", type=int, default=4, help="2 microbatches of 2 by default")
    p.add_argument("--graphs", default="local", choices=["local", "none"],
                   help="model.cuda_graph_impl for the training run (local: the whole step as one graph)")
    p.add_argument("--cpu", action="store_true", help="train with `stepgraph train --cpu`")
    p.add_argument("--override", nargs="*", default=[], help="more dotted overrides for stepgraph train")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="torch device")
    p.add_argument("--attn", default="eager", help="transformers attn_implementation (eager, sdpa)")
    p.add_argument("--tol-bf16", type=float, default=1e-2, help="relative tolerance, transformers in bfloat16")
    p.add_argument("--tol-fp32", type=float, default=1e-2, help="relative tolerance, transformers in float32")
    p.add_argument("--skip-train", action="store_true", help="reuse OUT from a previous run (compare only)")
    p.add_argument("--main-params", action="store_true",
                   help="the float32 row loads the checkpoint's fp32 master weights (optimizer_main_params) instead "
                        "of its bf16 ones: with --cpu the weights stepgraph computed with, so --tol-fp32 can be "
                        "about 1e-5 and a routing or scaling difference shows")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be >= 1")

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "corpus")
    K = args.steps
    overrides = [
        "dataset.mock=false", f"dataset.data_path=[{corpus}]", "model.vocab_size=256",
        f"train.micro_batch_size={args.micro_batch_size}", f"train.global_batch_size={args.global_batch_size}",
        f"model.cuda_graph_impl={args.graphs}", f"optimizer.lr={args.lr}",
    ] + args.override
    flags = ["--plain"] + (["--cpu"] if args.cpu else [])

    # What the runs use, resolved by stepgraph itself: batch split and dropout (dropout would make the
    # training-mode loss differ from transformers' eval-mode forward).
    shown = subprocess.run([args.stepgraph, "config", "show", args.recipe] + overrides,
                           capture_output=True, text=True)
    if shown.returncode != 0:
        raise SystemExit(f"error: stepgraph config show failed:\n{shown.stderr}")
    micro_batch_size = int(resolved_value(shown.stdout, "micro_batch_size"))
    # One schedule for both runs (lr_decay_iters otherwise follows train_iters), valid for any K.
    warmup = int(resolved_value(shown.stdout, "lr_warmup_iters"))
    overrides.append(f"scheduler.lr_decay_iters={max(K + 1, warmup + 1)}")
    for key in ("attention_dropout", "hidden_dropout"):
        if float(resolved_value(shown.stdout, key)) != 0.0:
            raise SystemExit(f"error: model.{key} is not 0: the training loss then includes dropout, which "
                             "transformers' eval forward does not; compare without dropout")

    # (early, K) runs: (checkpoint step, compared step, train_iters, save_interval, folder tag)
    checks = [(1, 2, 2, 1, "early"), (K, K + 1, K + 1, K, "main")]
    if K == 1:
        checks = checks[1:]
    if not args.skip_train:
        run([args.stepgraph, "data", "synth", "--out", corpus, "--tokens", str(args.tokens), "--json"],
            os.path.join(out, "synth.log"))
    with open(os.path.join(out, "synth.log")) as f:
        entropy = json.loads(f.read())["unigram_entropy_nats"]
    print(f"corpus unigram entropy: {entropy:.4f} nats/token")
    if not args.skip_train:
        for _, _, iters, interval, tag in checks:
            run([args.stepgraph, "train", args.recipe] + overrides + [
                f"train.train_iters={iters}", f"checkpoint.save={out}/ckpt_{tag}",
                f"checkpoint.save_interval={interval}", "--dump-batches", f"{out}/batches_{tag}",
                "--run-dir", f"{out}/run_{tag}"] + flags, os.path.join(out, f"train_{tag}.log"))

    transformers.utils.logging.disable_progress_bar()  # keep the log to the table
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}, "
          f"attention {args.attn}, micro_batch_size {micro_batch_size}")
    rows = []
    for ckpt_step, step, _, _, tag in checks:
        folder = os.path.join(out, f"ckpt_{tag}", f"iter_{ckpt_step:07d}")
        batch = load_file(os.path.join(out, f"batches_{tag}", f"batch_{step:07d}.safetensors"))
        reference = metrics_losses(os.path.join(out, f"run_{tag}", "metrics.jsonl")).get(step)
        if reference is None:
            raise SystemExit(f"error: run_{tag}/metrics.jsonl has no step {step}")
        for name, dtype, tol in (("bfloat16", torch.bfloat16, args.tol_bf16), ("float32", torch.float32, args.tol_fp32)):
            source = main_params_folder(folder, out) if args.main_params and dtype == torch.float32 else folder
            model = load_hf(source, dtype, args.device, args.attn)
            aux = []
            loss, per_mb = stepgraph_loss(model, batch, micro_batch_size, args.device, aux)
            aux_reference = metrics_losses(os.path.join(out, f"run_{tag}", "metrics.jsonl"), "moe_aux_loss").get(step)
            if aux and aux_reference is not None and model.config.router_aux_loss_coef > 0:
                aux_loss = sum(aux) / len(aux)
                aux_rel = abs(aux_loss - aux_reference) / abs(aux_reference) if aux_reference else abs(aux_loss)
                rows.append((f"step {step} MoE aux loss (Megatron's formula)", name, aux_reference, aux_loss, aux_rel,
                             tol, math.isfinite(aux_loss) and aux_rel <= tol, " ".join(f"{x:.6f}" for x in aux)))
            rel = abs(loss - reference) / abs(reference) if reference != 0 else abs(loss)
            ok = math.isfinite(loss) and math.isfinite(reference) and rel <= tol
            rows.append((f"step {step} (weights iter_{ckpt_step:07d})", name, reference, loss, rel, tol, ok,
                         " ".join(f"{x:.6f}" for x in per_mb)))
            del model

    # A model that ignores the context (loss near the unigram entropy) would hide attention/RoPE bugs:
    # the main comparison must be made on a trained model.
    # Single batches vary by +-0.5 nats (the corpus mixes tasks), so the last 10 steps' mean decides.
    main_losses = metrics_losses(os.path.join(out, "run_main", "metrics.jsonl"))
    last = [main_losses.get(s, float("nan")) for s in range(max(1, K - 8), K + 2)]
    main_loss = sum(last) / len(last)
    trained = main_loss < entropy
    rows.append((f"mean loss of steps {max(1, K - 8)}-{K + 1} < unigram entropy", "-", main_loss, entropy,
                 0.0 if trained else float("inf"), 0.0, trained, "2nd loss column: unigram entropy"))

    # Same config, same seed: the first steps of both runs must be bitwise equal (as printed, %.9g).
    if len(checks) == 2:
        early = metrics_losses(os.path.join(out, "run_early", "metrics.jsonl"))
        main_run = metrics_losses(os.path.join(out, "run_main", "metrics.jsonl"))
        same = all(early.get(s) == main_run.get(s) and early.get(s) is not None for s in (1, 2))
        rows.append(("steps 1-2 of both runs bitwise equal", "-", early.get(2, float("nan")),
                     main_run.get(2, float("nan")), 0.0 if same else float("inf"), 0.0, same, "determinism"))

    header = ("check", "transformers dtype", "stepgraph loss", "transformers loss", "rel diff", "tol", "result",
              "per-microbatch (transformers)")
    table = [header] + [(r[0], r[1], f"{r[2]:.6f}", f"{r[3]:.6f}", f"{r[4]:.2e}", f"{r[5]:.0e}",
                         "PASS" if r[6] else "FAIL", r[7]) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))
    failed = [r for r in rows if not r[6]]
    print(f"{len(rows) - len(failed)}/{len(rows)} comparisons within tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
