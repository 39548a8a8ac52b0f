#!/usr/bin/env python3
"""`stepgraph generate` vs Hugging Face transformers' generate(): the same greedy tokens.

Run on the GPU machine (from scripts/gpu.sh's parity section):
  python3 tests/model/hf_generate_parity.py --stepgraph build/src/stepgraph --out /tmp/sg_hf_generate

Checkpoints:
  (a) synthetic Hugging Face folders written by tests/checkpoint/make_hf_llama.py (random weights with a
      large spread, so the logits are peaked): untied GQA in bf16 with 3 shards; tied with Llama 3
      rope_scaling (factor 8, rope_theta 5e5, original context 256 < max_position_embeddings 512: a valid
      Llama 3 config whose kept, interpolated and divided frequencies all turn at the prompt positions;
      tests/tools/hf_reference_generate_test.py checks the same on the CPU) in fp32;
  (b) a stepgraph checkpoint: `stepgraph train llama/tiny` for --steps steps on `stepgraph data synth`
      (a model that uses its context), prompts cut from that corpus.
For each, stepgraph generates greedily on the GPU (the decoding step as one CUDA graph) from every
prompt in one batch (--prompt-tokens ... --ignore-eos --json), and transformers generates greedily
(do_sample=False) from each prompt alone, in float32 and in bfloat16 (eager attention).

A row passes when the token lists are equal ("exact"), or when they first differ at a step where the
float32 transformers logits of the two candidate tokens are within --tie-margin of each other (relative
to the row's logit range: "near tie", reported with the margin; bf16 rounding decides those). The
float32 rows must be exact or near ties; bf16 rows are reported the same way. Also checked: the
stepgraph tokens with --no-graphs (eager decoding) are identical to the graphed ones, and the CPU
decoder (--cpu) agrees with the GPU up to near ties.
Exit status 0 when every row passes, 1 otherwise, 2 for a setup problem (no torch / transformers).
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"error: {e}: needs numpy, torch and transformers", file=sys.stderr)
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_HF = os.path.join(ROOT, "tests", "checkpoint", "make_hf_llama.py")


def run(cmd, log=None):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"error: exit status {r.returncode} from {' '.join(cmd)}\n{r.stderr[-4000:]}")
    return r.stdout


def stepgraph_generate(args, folder, prompts, n, extra=()):
    cmd = [args.stepgraph, "generate", folder, "--max-new-tokens", str(n), "--ignore-eos", "--json"] + list(extra)
    for p in prompts:
        cmd += ["--prompt-tokens", ",".join(str(t) for t in p)]
    out = json.loads(run(cmd))
    return out["tokens"], out


def hf_generate(model, prompt, n, device):
    ids = torch.tensor([prompt], device=device)
    config = transformers.GenerationConfig(max_new_tokens=n, min_new_tokens=0, do_sample=False, num_beams=1,
                                           eos_token_id=None, pad_token_id=0, bos_token_id=None)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return out[0, len(prompt):].tolist()


def compare(model32, prompt, ours, theirs, tie_margin, device):
    """'exact', 'near tie (margin m at step i)' or 'FAIL (...)' using the float32 model's logits."""
    if ours == theirs:
        return "exact", True
    i = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    if i >= min(len(ours), len(theirs)):
        return f"FAIL (lengths {len(ours)} vs {len(theirs)})", False
    prefix = torch.tensor([prompt + ours[:i]], device=device)
    with torch.no_grad():
        logits = model32(input_ids=prefix).logits[0, -1].float()
    spread = float(logits.max() - logits.min())
    margin = abs(float(logits[ours[i]] - logits[theirs[i]])) / max(spread, 1e-12)
    ok = margin <= tie_margin
    return (f"{'near tie' if ok else 'FAIL'} at step {i}: stepgraph {ours[i]}, transformers {theirs[i]}, "
            f"fp32 logit gap {margin:.2e} of the range"), ok


def load(folder, dtype, device):
    model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager")
    return model.to(device).eval()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stepgraph", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=150, help="training steps of the stepgraph checkpoint")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--prompts", type=int, default=4, help="prompts per checkpoint (one stepgraph batch)")
    p.add_argument("--tie-margin", type=float, default=5e-3,
                   help="a first difference counts as a near tie when the fp32 logit gap is at most this "
                        "fraction of the row's logit range")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--cpu", action="store_true", help="run stepgraph with --cpu (a check of this script)")
    args = p.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    sg_flags = ["--cpu"] if args.cpu else []
    rng = np.random.default_rng(0)
    v5 = int(transformers.__version__.split(".")[0]) >= 5

    checkpoints = []
    # (a) synthetic folders
    shapes = ["--vocab", "512", "--hidden", "256", "--layers", "4", "--heads", "8", "--kv-heads", "2", "--ffn", "688",
              "--max-pos", "512"]
    synth = [("hf_bf16_untied_gqa_3shards", ["--dtype", "bf16", "--shards", "3", "--std", "0.08"]),
             ("hf_fp32_tied_llama3_rope", ["--dtype", "fp32", "--tied", "--std", "0.08", "--rope-scaling", "8",
                                           "--rope-theta", "500000", "--original-max-pos", "256"]
              + (["--rope-parameters"] if v5 else []))]
    for name, flags in synth:
        folder = os.path.join(out, name)
        run([sys.executable, MAKE_HF, "--out", folder] + shapes + flags)
        prompts = [rng.integers(0, 512, size=int(rng.integers(3, 20))).tolist() for _ in range(args.prompts)]
        checkpoints.append((name, folder, prompts))
    # (b) a trained stepgraph checkpoint
    corpus = os.path.join(out, "corpus")
    run([args.stepgraph, "data", "synth", "--out", corpus, "--tokens", "200000"])
    ckpt = os.path.join(out, "ckpt")
    run([args.stepgraph, "train", "llama/tiny", "dataset.mock=false", f"dataset.data_path=[{corpus}]",
         "model.vocab_size=256", "optimizer.lr=3e-3", f"train.train_iters={args.steps}", f"checkpoint.save={ckpt}",
         "--plain", "--run-dir", os.path.join(out, "run")] + sg_flags, os.path.join(out, "train.log"))
    tokens = np.fromfile(corpus + ".bin", dtype=np.uint16)
    starts = rng.integers(0, len(tokens) - 64, size=args.prompts)
    checkpoints.append(("stepgraph_llama_tiny_trained", ckpt, [tokens[s:s + 24].tolist() for s in starts]))

    rows = []
    for name, folder, prompts in checkpoints:
        ours, info = stepgraph_generate(args, folder, prompts, args.new_tokens, sg_flags)
        print(f"{name}: {info['backend']}; {info['decode_tokens_per_s']:.0f} tokens/s", flush=True)
        eager, _ = stepgraph_generate(args, folder, prompts, args.new_tokens, sg_flags + ["--no-graphs"])
        rows.append((name, "stepgraph graphed vs eager", "all", "exact" if eager == ours else "FAIL", eager == ours))
        hf_folder = folder  # a stepgraph checkpoint root: its latest iteration folder
        latest = os.path.join(folder, "latest_checkpointed_iteration.txt")
        if os.path.exists(latest):
            hf_folder = os.path.join(folder, f"iter_{int(open(latest).read()):07d}")
        model32 = load(hf_folder, torch.float32, args.device)
        for dtype_name, model in (("float32", model32), ("bfloat16", load(hf_folder, torch.bfloat16, args.device))):
            for i, prompt in enumerate(prompts):
                theirs = hf_generate(model, prompt, args.new_tokens, args.device)
                verdict, ok = compare(model32, prompt, ours[i], theirs, args.tie_margin, args.device)
                rows.append((name, f"vs transformers {dtype_name}", f"prompt {i}", verdict, ok))
        if not args.cpu:
            cpu, _ = stepgraph_generate(args, folder, prompts, args.new_tokens, ["--cpu"])
            for i, prompt in enumerate(prompts):
                verdict, ok = compare(model32, prompt, ours[i], cpu[i], args.tie_margin, args.device)
                rows.append((name, "GPU vs CPU decoder", f"prompt {i}", verdict, ok))

    widths = [max(len(str(r[k])) for r in rows) for k in range(4)]
    for r in rows:
        print(" | ".join(str(r[k]).ljust(widths[k]) for k in range(4)) + " | " + ("PASS" if r[4] else "FAIL"))
    exact = sum(1 for r in rows if r[3] == "exact")
    failed = [r for r in rows if not r[4]]
    print(f"{len(rows) - len(failed)}/{len(rows)} pass ({exact} exact, {len(rows) - len(failed) - exact} near ties)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
