#!/usr/bin/env python3
"""Decoding speed: `stepgraph generate` against Hugging Face transformers' generate() on the same folder.

Run on the GPU machine (scripts/gpu.sh generate_bench runs it):
  python3 bench/generate_reference.py --stepgraph build/src/stepgraph --out /tmp/sg_generate_bench

For each model (--models), transformers writes a folder of random bf16 weights at that shape; then, for each
batch size (--batches), every side decodes greedily from the same random prompts (--prompt-len tokens each)
for --new-tokens tokens, never stopping at an end-of-sequence token:
  stepgraph          `generate --prompt-tokens ... --ignore-eos --json`: the GPU bf16 decoder, its decoding step
                     one CUDA graph (the first step's capture counted in its time, and given apart)
  stepgraph eager    the same with --no-graphs
  hf eager           model.generate() in bf16 with SDPA attention and the dynamic cache
  hf static_compile  the same with cache_implementation="static", which transformers compiles (torch.compile)
Decode tokens/s counts the tokens after each sequence's first (prefill and the first token are apart, as
`stepgraph generate` reports them). transformers' decode time is generate(N) minus generate(1) on the same
prompts, medians of --repeats timed calls after a warmup call; stepgraph's is its reported decode time, median
of --repeats runs (each run a new process: load, plan, capture), the modes' runs taken in turns. --decode-gemv
1,0,tensor_cores runs the graphed mode under each STEPGRAPH_DECODE_GEMV value (model/decode_gemv.h), in the same
turns; --no-eager leaves the eager run out. A mode that fails is reported with its error and the run goes on.
Prints a Markdown table; --json writes the rows. --profile adds, per model and batch, one more graphed stepgraph
run with `generate --profile` and prints its kernel table (CUPTI's time per decoding step by kernel) after the
table; --hf-modes none leaves transformers out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import torch
    import transformers
except ImportError as e:
    print(f"error: {e}: needs torch and transformers", file=sys.stderr)
    sys.exit(2)


def llama_1b():
    # recipes/llama/1b.yaml's shapes.
    return transformers.LlamaForCausalLM, transformers.LlamaConfig(
        vocab_size=32768, hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=16, max_position_embeddings=4096, tie_word_embeddings=False)


def mixtral_small():
    # recipes/moe/small_moe.yaml's width with Mixtral's layout: 8 experts, top-2, GQA.
    return transformers.MixtralForCausalLM, transformers.MixtralConfig(
        vocab_size=32768, hidden_size=768, intermediate_size=1024, num_hidden_layers=12, num_attention_heads=12,
        num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=4096)


def nemotron_h_small():
    # A Nemotron-H style hybrid: Mamba2, attention without RoPE, squared-ReLU MLP and MoE with a shared expert.
    import inspect
    pattern = "M*-MEM-M*-E"
    kinds = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
    shape = dict(vocab_size=32768, hidden_size=1024, num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                 intermediate_size=2816, mlp_hidden_act="relu2", mamba_num_heads=32, mamba_head_dim=64, n_groups=8,
                 ssm_state_size=128, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=512,
                 moe_shared_expert_intermediate_size=1024, max_position_embeddings=4096, tie_word_embeddings=False)
    if "layers_block_type" in inspect.signature(transformers.NemotronHConfig.__init__).parameters:
        shape["layers_block_type"] = [kinds[c] for c in pattern]
    else:
        shape["hybrid_override_pattern"] = pattern
    return transformers.NemotronHForCausalLM, transformers.NemotronHConfig(**shape)


MODELS = {"llama_1b": llama_1b, "mixtral_small": mixtral_small, "nemotron_h_small": nemotron_h_small}
# transformers' modes: the cache_implementation each passes to generate() (None: the dynamic cache).
HF_CACHES = {"eager": None, "static_compile": "static"}


def write_folder(name, out):
    folder = os.path.join(out, name)
    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    cls, config = MODELS[name]()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = cls(config).to(torch.bfloat16).eval()
    model.save_pretrained(folder)
    del model
    torch.cuda.empty_cache()
    return folder


def generate_command(args, folder, prompts, *flags):
    cmd = [args.stepgraph, "generate", folder, "--max-new-tokens", str(args.new_tokens), "--ignore-eos", *flags]
    for p in prompts:
        cmd += ["--prompt-tokens", ",".join(str(t) for t in p)]
    return cmd


def stepgraph_variants(args):
    """(mode, extra flags, environment) of each stepgraph run: graphed under each --decode-gemv value, then eager
    (unless --no-eager)."""
    variants = []
    for value in args.decode_gemv.split(",") if args.decode_gemv else [None]:
        if value is None:
            variants.append(("stepgraph", [], None))
        else:
            variants.append((f"stepgraph gemv={value}", [], dict(os.environ, STEPGRAPH_DECODE_GEMV=value)))
    if not args.no_eager:
        variants.append(("stepgraph eager", ["--no-graphs"], None))
    return variants


def stepgraph_decode(args, folder, prompts, variants):
    """{mode: (median decode tokens/s, median capture ms) or the failure's text}: the variants' runs taken in turns,
    so that a drift of the machine's speed reaches each alike."""
    cmd = generate_command(args, folder, prompts, "--json")
    runs = {mode: ([], []) for mode, _, _ in variants}
    failed = {}
    for _ in range(args.repeats):
        for mode, extra, env in variants:
            if mode in failed:
                continue
            r = subprocess.run(cmd + list(extra), capture_output=True, text=True, env=env)
            if r.returncode != 0:
                failed[mode] = f"failed: exit status {r.returncode}: {r.stderr.strip().splitlines()[-1:]}"
                continue
            j = json.loads(r.stdout)
            runs[mode][0].append(j["decode_tokens_per_s"])
            runs[mode][1].append(j.get("capture_ms", -1))
    return {mode: failed.get(mode) or (statistics.median(runs[mode][0]), statistics.median(runs[mode][1]))
            for mode, _, _ in variants}


def stepgraph_profile(args, folder, prompts):
    """The kernel table `generate --profile` prints (stderr), from its heading line on."""
    r = subprocess.run(generate_command(args, folder, prompts, "--profile"), capture_output=True, text=True)
    if r.returncode != 0:
        return f"failed: exit status {r.returncode}: {r.stderr.strip().splitlines()[-1:]}"
    lines = r.stderr.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("device time per")), len(lines))
    return "\n".join(lines[first:])


def hf_decode(args, model, prompts, cache):
    ids = torch.tensor(prompts, device="cuda")
    mask = torch.ones_like(ids)

    def timed(n):
        config = transformers.GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1,
                                               eos_token_id=None, pad_token_id=0, bos_token_id=None,
                                               cache_implementation=cache)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, generation_config=config)
        torch.cuda.synchronize()
        assert out.shape[1] == ids.shape[1] + n, out.shape
        return time.perf_counter() - t0

    timed(args.new_tokens)  # warmup (and compile, for the static cache)
    timed(1)
    full = statistics.median(timed(args.new_tokens) for _ in range(args.repeats))
    first = statistics.median(timed(1) for _ in range(args.repeats))
    return len(prompts) * (args.new_tokens - 1) / max(full - first, 1e-9)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stepgraph", required=True, help="the stepgraph binary")
    p.add_argument("--out", required=True, help="folder for the model folders")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--batches", default="1,8", help="batch sizes (prompts decoded together)")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--hf-modes", default="eager,static_compile",
                   help="transformers modes: eager, static_compile; none: stepgraph alone")
    p.add_argument("--decode-gemv", default="",
                   help="comma-separated STEPGRAPH_DECODE_GEMV values (1, 0, tensor_cores): the graphed stepgraph run "
                        "once under each, in turns (default: the variable as this process has it)")
    p.add_argument("--no-eager", action="store_true", help="leave out the eager stepgraph run (--no-graphs)")
    p.add_argument("--profile", action="store_true", help="print stepgraph's kernel table per model and batch")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        print(f"error: --models: unknown {unknown}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    unknown = [v for v in args.decode_gemv.split(",") if args.decode_gemv and v not in ("1", "0", "tensor_cores")]
    if unknown:
        print(f"error: --decode-gemv: unknown {unknown}; choose from 1, 0, tensor_cores", file=sys.stderr)
        return 2
    hf_modes = [] if args.hf_modes == "none" else args.hf_modes.split(",")
    unknown = [m for m in hf_modes if m not in HF_CACHES]
    if unknown:
        print(f"error: --hf-modes: unknown {unknown}; choose from {', '.join(HF_CACHES)}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: needs a GPU (stepgraph's decoder and transformers' on CUDA)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows, profiles = [], []
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, transformers {transformers.__version__}; "
          f"prompt {args.prompt_len} tokens, {args.new_tokens} new tokens, medians of {args.repeats}", flush=True)
    print("| model | batch | mode | decode tokens/s | vs hf eager | note |\n|---|---|---|---|---|---|", flush=True)
    for name in args.models.split(","):
        try:
            folder = write_folder(name, args.out)
        except Exception as e:  # noqa: BLE001 - a model transformers cannot build here is reported, not fatal
            print(f"| {name} | - | - | - | - | failed to write the folder: {type(e).__name__}: {str(e)[:160]} |")
            rows.append(dict(model=name, batch=None, mode="stepgraph", decode_tokens_per_s=None, note=str(e)[:160]))
            continue
        vocab = MODELS[name]()[1].vocab_size
        for batch in (int(b) for b in args.batches.split(",")):
            g = torch.Generator().manual_seed(batch)
            prompts = torch.randint(1, vocab, (batch, args.prompt_len), generator=g).tolist()
            results = {}
            model = None
            if hf_modes:
                model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16,
                                                                          attn_implementation="sdpa").cuda().eval()
            for mode in hf_modes:
                try:
                    results["hf " + mode] = (hf_decode(args, model, prompts, HF_CACHES[mode]), "")
                except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
                    results["hf " + mode] = (None, f"failed: {type(e).__name__}: {str(e)[:160]}")
                torch._dynamo.reset()
            del model
            torch.cuda.empty_cache()
            for mode, outcome in stepgraph_decode(args, folder, prompts, stepgraph_variants(args)).items():
                if isinstance(outcome, str):
                    results[mode] = (None, outcome)
                else:
                    tps, capture = outcome
                    results[mode] = (tps, f"capture {capture:.1f} ms" if capture >= 0 else "")
            if args.profile:
                profiles.append((name, batch, stepgraph_profile(args, folder, prompts)))
            base = results.get("hf eager", (None, ""))[0]
            for mode, (tps, note) in results.items():
                ratio = f"{tps / base:.2f}x" if tps and base else "-"
                shown = f"{tps:.1f}" if tps else "-"
                print(f"| {name} | {batch} | {mode} | {shown} | {ratio} | {note} |", flush=True)
                rows.append(dict(model=name, batch=batch, mode=mode, decode_tokens_per_s=tps, note=note))
    for name, batch, table in profiles:
        print(f"\nstepgraph generate --profile, {name}, batch {batch} (graphed):\n{table}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(prompt_len=args.prompt_len, new_tokens=args.new_tokens, repeats=args.repeats, rows=rows),
                      f, indent=1)
    return 0 if all(r["decode_tokens_per_s"] for r in rows if r["mode"].startswith("stepgraph")) else 1


if __name__ == "__main__":
    sys.exit(main())
