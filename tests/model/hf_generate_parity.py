#!/usr/bin/env python3
"""`stepgraph generate` vs Hugging Face transformers' generate(): the same greedy tokens.

Run on the GPU machine (from scripts/gpu.sh's parity section):
  python3 tests/model/hf_generate_parity.py --stepgraph build/src/stepgraph --out /tmp/sg_hf_generate

Checkpoints:
  (a) synthetic Hugging Face folders written by tests/checkpoint/make_hf_llama.py (random weights with a
      large spread, so the logits are peaked): untied GQA in bf16 with 3 shards; tied with Llama 3
      rope_scaling (factor 8, rope_theta 5e5, original context 256 < max_position_embeddings 512: a valid
      Llama 3 config whose kept, interpolated and divided frequencies all turn at the prompt positions;
      tests/tools/hf_reference_generate_test.py checks the same on the CPU) in fp32; a Qwen2 folder (q, k and v
      biases, GQA), a Llama folder with attention_bias and mlp_bias, a Mistral folder (sliding_window 128, longer
      than prompt and generation), a Qwen3 folder (q_norm and k_norm, GQA) and a Phi-3 folder with Phi-4-mini's
      partial rotary (partial_rotary_factor 0.75: 24 of 32 dimensions) in bf16, Phi-3 folders with Phi-3.5's
      LongRoPE on that share (its short factors, every sequence within the original context, in bf16; its long
      ones, every prompt past an original context of 2, so that transformers too uses them from the first token,
      in fp32), and a Phi-3 folder (2 shards; q, k, v and gate, up in fused tensors), a Qwen3-MoE folder (8
      experts top-2 renormalised, block 1 dense) and a Qwen2-MoE folder (gated shared expert) in fp32;
  (b) a stepgraph checkpoint: `stepgraph train llama/tiny` for --steps steps on `stepgraph data synth`
      (a model that uses its context), prompts cut from that corpus;
  (c) folders transformers writes itself for the other architectures stepgraph decodes: NemotronH (pattern
      ME*-EM: Mamba2 with 8 heads, MoE with sigmoid routing and a correction bias that changes the choice, a
      shared expert, squared-ReLU experts, GQA attention without RoPE, a squared-ReLU MLP) and Mixtral (4
      experts top-2, GQA), float32, weights redrawn with std 0.25 so that every layer matters.
For each, stepgraph generates greedily on the GPU (the decoding step as one CUDA graph) from every
prompt in one batch (--prompt-tokens ... --ignore-eos --json), and transformers generates greedily
(do_sample=False) from each prompt alone, in float32 and in bfloat16 (eager attention).

A row passes when the token lists are equal ("exact"), or when they first differ at a step where the
float32 transformers logits of the two candidate tokens are closer than bf16 rounding moves a logit at that
step (twice the largest |bf16 - fp32| logit difference of transformers on that prefix), or within
--tie-margin of the row's logit range: a "near tie", reported with both numbers. In an MoE model a token's
experts can tie too: a first difference where some router's k-th and (k+1)-th choices are closer in float32 than
twice bf16's change to its scores is a "near tie (routing)" (a router flipped that way moves the logits further
than bf16 moves them along one path). The random-weight fixtures
have flat logits, so most of their rows end in such ties; the trained checkpoint's peaked logits rarely tie. The
float32 rows must be exact or near ties; bf16 rows are reported the same way. Also checked: the
stepgraph tokens with --no-graphs (eager decoding) are identical to the graphed ones, and the CPU
decoder (--cpu) agrees with the GPU up to near ties.
Exit status 0 when every row passes, 1 otherwise, 2 for a setup problem (no torch / transformers).
--only NAME,... runs the checkpoints whose names contain one of the parts.
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
NEMOTRON_H, MIXTRAL = "hf_nemotron_h_moe_mamba", "hf_mixtral"  # (c): the folders transformers writes


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


def routing_scores(model, prefix):
    """[(scores the router's top-k chooses by, k)] at the prefix's last position, one per MoE router (Mixtral:
    the logits, whose softmax keeps their order; NemotronH: sigmoid(logits) + the correction bias)."""
    caught = []

    def hook(module, inputs, outputs):
        logits = outputs[0].float().reshape(-1, outputs[0].shape[-1])[-1]
        bias = getattr(module, "e_score_correction_bias", None)
        caught.append((logits.sigmoid() + bias.float() if bias is not None else logits, module.top_k))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if type(m).__name__.endswith(("TopKRouter", "TopkRouter"))]
    try:
        with torch.no_grad():
            model(input_ids=prefix)
    finally:
        for h in handles:
            h.remove()
    return caught


def routing_near_tie(model32, model16, prefix):
    """A router whose k-th and (k+1)-th choices are closer in float32 than twice the change bfloat16 makes to its
    scores at this step: which expert a token reaches is for rounding to decide, and with it the next token."""
    for layer, ((s32, k), (s16, _)) in enumerate(zip(routing_scores(model32, prefix), routing_scores(model16, prefix))):
        if k >= s32.numel():
            continue
        ranked = torch.sort(s32, descending=True).values
        margin = float(ranked[k - 1] - ranked[k])
        noise = float((s16 - s32).abs().max())
        if margin <= 2 * noise:
            return f"router {layer}: choices {k} and {k + 1} {margin:.2e} apart, bf16 moves them by up to {noise:.2e}"
    return None


def compare(model32, model16, prompt, ours, theirs, tie_margin, device, other="transformers"):
    """'exact', 'near tie (...)' or 'FAIL (...)' from the transformers logits at the first difference.

    A first difference is a near tie when the float32 logits of the two candidates are closer than either
    --tie-margin of the logit range or twice the largest change bfloat16 makes to any logit at that very
    step (transformers bf16 against float32 on the same prefix): two bf16 computations that round at
    different places can each move a logit that far, so such a gap is for rounding to decide.
    """
    if ours == theirs:
        return "exact", True
    i = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    if i >= min(len(ours), len(theirs)):
        return f"FAIL (lengths {len(ours)} vs {len(theirs)})", False
    prefix = torch.tensor([prompt + ours[:i]], device=device)
    with torch.no_grad():
        logits = model32(input_ids=prefix).logits[0, -1].float()
        logits16 = model16(input_ids=prefix).logits[0, -1].float()
    spread = max(float(logits.max() - logits.min()), 1e-12)
    gap = abs(float(logits[ours[i]] - logits[theirs[i]]))
    bf16_noise = float((logits16 - logits).abs().max())
    ok = gap <= max(tie_margin * spread, 2 * bf16_noise)
    text = (f"at step {i}: stepgraph {ours[i]}, {other} {theirs[i]}, fp32 logit gap {gap / spread:.2e} of the range, "
            f"bf16 moves logits by up to {bf16_noise / spread:.2e}")
    routing = None if ok else routing_near_tie(model32, model16, prefix)
    if routing:
        return f"near tie (routing) {text}; {routing}", True
    return f"{'near tie' if ok else 'FAIL'} {text}", ok


def load(folder, dtype, device):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager")
    # generate() fills a GenerationConfig's unset keys from the model's, so eos_token_id=None alone still stopped at
    # the folder's EOS while stepgraph ran --ignore-eos (the rows then differed in length, not in a token).
    model.generation_config.eos_token_id = None
    return model.to(device).eval()


def transformers_folders(out):
    """(c): NemotronH and Mixtral folders saved by transformers, [(name, folder)]."""
    torch.manual_seed(0)
    nemotron_pattern = "ME*-EM"
    kinds = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
    nemotron = dict(vocab_size=256, hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                    intermediate_size=96, mlp_hidden_act="relu2", mamba_num_heads=8, mamba_head_dim=64, n_groups=2,
                    ssm_state_size=16, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    moe_shared_expert_intermediate_size=48, routed_scaling_factor=2.5, norm_topk_prob=True,
                    max_position_embeddings=512, tie_word_embeddings=False)
    import inspect
    if "layers_block_type" in inspect.signature(transformers.NemotronHConfig.__init__).parameters:
        nemotron["layers_block_type"] = [kinds[c] for c in nemotron_pattern]  # transformers >= 5.2x
    else:
        nemotron["hybrid_override_pattern"] = nemotron_pattern
    mixtral = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=512)
    made = []
    for name, config, cls in ((NEMOTRON_H, transformers.NemotronHConfig(**nemotron), transformers.NemotronHForCausalLM),
                              (MIXTRAL, transformers.MixtralConfig(**mixtral), transformers.MixtralForCausalLM)):
        model = cls(config).eval()
        with torch.no_grad():
            for pname, param in model.named_parameters():
                if param.dim() >= 2:
                    param.normal_(0.0, 0.25)
            for bname, buf in model.named_buffers():
                if bname.endswith("e_score_correction_bias"):  # distinct values that steer the choice
                    buf.copy_(torch.tensor([0.05, -0.02, 0.1, 0.0], dtype=buf.dtype))
        folder = os.path.join(out, name)
        model.save_pretrained(folder)
        made.append((name, folder))
    return made


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
    p.add_argument("--only", default="",
                   help="comma-separated parts of checkpoint names: only those checkpoints (default: all)")
    args = p.parse_args()
    only = [part for part in args.only.split(",") if part]
    wanted = lambda name: not only or any(part in name for part in only)
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
              + (["--rope-parameters"] if v5 else [])),
             ("hf_bf16_qwen2_gqa", ["--dtype", "bf16", "--qwen2", "--std", "0.08"]),
             ("hf_bf16_llama_bias", ["--dtype", "bf16", "--bias-linear", "--std", "0.08"]),
             ("hf_bf16_mistral_window", ["--dtype", "bf16", "--mistral", "128", "--std", "0.08"]),
             ("hf_fp32_phi3_fused", ["--dtype", "fp32", "--phi3", "0", "--shards", "2", "--std", "0.08"]),
             # Phi-4-mini's partial rotary: 24 of each head's 32 dimensions rotated
             ("hf_bf16_phi3_partial_rotary", ["--dtype", "bf16", "--phi3", "0", "--partial-rotary", "0.75",
                                              "--std", "0.08"]),
             # Phi-3.5's LongRoPE on Phi-4-mini's partial rotary: the short factors (every sequence within the original
             # context of 256) in bf16; the long ones (every prompt past an original context of 2, so transformers too
             # uses them from the first token) in fp32
             ("hf_bf16_phi3_longrope_short", ["--dtype", "bf16", "--phi3", "0", "--partial-rotary", "0.75",
                                              "--longrope", "--original-max-pos", "256", "--std", "0.08"]),
             ("hf_fp32_phi3_longrope_long", ["--dtype", "fp32", "--phi3", "0", "--partial-rotary", "0.75",
                                             "--longrope", "--original-max-pos", "2", "--std", "0.08"]),
             ("hf_bf16_qwen3_gqa", ["--dtype", "bf16", "--qwen3", "--std", "0.08"]),
             ("hf_fp32_qwen3_moe", ["--dtype", "fp32", "--qwen3", "--std", "0.08", "--experts", "8", "--topk", "2",
                                    "--moe-ffn", "64", "--mlp-only", "1", "--norm-topk"]),
             ("hf_fp32_qwen2_moe", ["--dtype", "fp32", "--qwen2", "--std", "0.08", "--experts", "8", "--topk", "2",
                                    "--moe-ffn", "64", "--shared-ffn", "96", "--mlp-only", "1"])]
    for name, flags in synth:
        if not wanted(name):
            continue
        folder = os.path.join(out, name)
        run([sys.executable, MAKE_HF, "--out", folder] + shapes + flags)
        prompts = [rng.integers(0, 512, size=int(rng.integers(3, 20))).tolist() for _ in range(args.prompts)]
        checkpoints.append((name, folder, prompts))
    # (b) a trained stepgraph checkpoint
    corpus = os.path.join(out, "corpus")
    if not wanted("stepgraph_llama_tiny_trained"):
        corpus = None
    if corpus is not None:
        run([args.stepgraph, "data", "synth", "--out", corpus, "--tokens", "200000"])
        ckpt = os.path.join(out, "ckpt")
        run([args.stepgraph, "train", "llama/tiny", "dataset.mock=false", f"dataset.data_path=[{corpus}]",
             "model.vocab_size=256", "optimizer.lr=3e-3", f"train.train_iters={args.steps}", f"checkpoint.save={ckpt}",
             "--plain", "--run-dir", os.path.join(out, "run")] + sg_flags, os.path.join(out, "train.log"))
        tokens = np.fromfile(corpus + ".bin", dtype=np.uint16)
        starts = rng.integers(0, len(tokens) - 64, size=args.prompts)
        checkpoints.append(("stepgraph_llama_tiny_trained", ckpt, [tokens[s:s + 24].tolist() for s in starts]))
    # (c) MoE and Mamba architectures
    for name, folder in transformers_folders(out) if wanted(NEMOTRON_H) or wanted(MIXTRAL) else []:
        if not wanted(name):
            continue
        prompts = [rng.integers(0, 256, size=int(rng.integers(3, 20))).tolist() for _ in range(args.prompts)]
        checkpoints.append((name, folder, prompts))

    rows = []
    for name, folder, prompts in checkpoints:
        flags = sg_flags
        ours, info = stepgraph_generate(args, folder, prompts, args.new_tokens, flags)
        print(f"{name}: {info['backend']}; {info['decode_tokens_per_s']:.0f} tokens/s", flush=True)
        if "--cpu" not in flags:
            eager, _ = stepgraph_generate(args, folder, prompts, args.new_tokens, flags + ["--no-graphs"])
            rows.append((name, "stepgraph graphed vs eager", "all", "exact" if eager == ours else "FAIL",
                         eager == ours))
        hf_folder = folder  # a stepgraph checkpoint root: its latest iteration folder
        latest = os.path.join(folder, "latest_checkpointed_iteration.txt")
        if os.path.exists(latest):
            hf_folder = os.path.join(folder, f"iter_{int(open(latest).read()):07d}")
        model32 = load(hf_folder, torch.float32, args.device)
        model16 = load(hf_folder, torch.bfloat16, args.device)
        for dtype_name, model in (("float32", model32), ("bfloat16", model16)):
            for i, prompt in enumerate(prompts):
                theirs = hf_generate(model, prompt, args.new_tokens, args.device)
                verdict, ok = compare(model32, model16, prompt, ours[i], theirs, args.tie_margin, args.device)
                rows.append((name, f"vs transformers {dtype_name}", f"prompt {i}", verdict, ok))
        if "--cpu" not in flags:
            cpu, _ = stepgraph_generate(args, folder, prompts, args.new_tokens, ["--cpu"])
            for i, prompt in enumerate(prompts):
                verdict, ok = compare(model32, model16, prompt, ours[i], cpu[i], args.tie_margin, args.device,
                                      other="CPU decoder")
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
