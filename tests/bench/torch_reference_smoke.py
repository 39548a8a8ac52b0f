#!/usr/bin/env python3
"""CPU smoke test of bench/torch_reference.py (not run in CI: it needs torch, and transformers for the parity check).

  python3 tests/bench/torch_reference_smoke.py [--skip-compile]

Checks, in fp32 on the CPU where the math is exact enough to compare:
  1. the model's logits equal transformers' LlamaForCausalLM's with the same weights (RoPE convention, GQA, SwiGLU
     order, RMSNorm, fused QKV/gate|up slicing, tied head), when transformers is installed;
  2. fused and separate projections give the same loss and gradients;
  3. one TrainStep with two microbatches leaves the same gradients as with one microbatch of both
     (accumulation and the 1/num_microbatches scale), and AdamW skips weight decay on norm weights;
  4. recipe parsing: nested keys, `1e-5` strings, defaults, and the errors for bad values;
  5. the CLI end to end (child processes, skipped CUDA modes, JSON, the table printed last), in bf16 autocast.
"""
import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "torch_reference.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torch_reference as tr  # noqa: E402
from smoke_util import check, finish, rel_err  # noqa: E402  (this folder is on sys.path: the script's own)


def small_config(**changes) -> tr.BenchConfig:
    overrides = dict(tr.SHRINK_OVERRIDES)
    overrides.update(changes)
    return tr.load_config(None, overrides)


def batch(cfg: tr.BenchConfig, seed: int = 7):
    gen = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, cfg.vocab_size, (cfg.global_batch_size, cfg.seq_length + 1), generator=gen)
    return seqs[:, :-1].contiguous(), seqs[:, 1:].contiguous()


def check_hf_parity() -> None:
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("SKIP transformers parity (transformers not installed)")
        return
    for tied in (False, True):
        cfg = small_config(**{"model.share_embeddings_and_output_weights": tied, "model.rotary_base": 5000.0})
        ours = tr.Llama(cfg, "cpu", torch.float32)
        ours.init_weights(3)
        hf_cfg = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                             intermediate_size=cfg.ffn_hidden_size, num_hidden_layers=cfg.num_layers,
                             num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_query_groups,
                             max_position_embeddings=cfg.seq_length, rms_norm_eps=cfg.layernorm_epsilon,
                             rope_theta=cfg.rotary_base, tie_word_embeddings=tied, attention_bias=False,
                             mlp_bias=False, attn_implementation="eager")
        hf_cfg.rope_parameters = {"rope_type": "default", "rope_theta": cfg.rotary_base}  # newer transformers
        hf = LlamaForCausalLM(hf_cfg).float().eval()
        state = {name: view.detach().clone() for name, view, _ in ours.hf_views()}
        missing, unexpected = hf.load_state_dict(state, strict=False)
        check(not unexpected and set(missing) <= {"lm_head.weight"} and (tied or not missing),
              f"HF state dict names match (tied={tied}): missing {missing}, unexpected {unexpected}")
        if tied:
            hf.tie_weights()
        tokens, _ = batch(cfg)
        with torch.no_grad():
            err = rel_err(ours.logits(tokens), hf(input_ids=tokens).logits)
        check(err < 1e-5, f"logits equal transformers LlamaForCausalLM's (tied={tied}, GQA): rel err {err:.2e}")
        # The comparison is sensitive: a different RoPE base on our side must show.
        other = tr.Llama(dataclasses.replace(cfg, rotary_base=10000.0), "cpu", torch.float32)
        other.load_hf_state_dict(state)
        with torch.no_grad():
            err = rel_err(other.logits(tokens), hf(input_ids=tokens).logits)
        check(err > 1e-4, f"a wrong RoPE base is detected: rel err {err:.2e}")


def hf_grads(model) -> dict:
    """The gradient of every Hugging Face tensor (slices of the fused weights' gradients)."""
    for param in model.parameters():
        param.data = param.grad.clone()  # hf_views() then slices the gradients
    return {name: view.detach().clone() for name, view, _ in model.hf_views()}


def check_fused_vs_separate() -> None:
    cfg = small_config()
    tokens, labels = batch(cfg)
    mask = torch.ones(tokens.shape)
    losses, grads = [], []
    for fused in (True, False):
        model = tr.Llama(cfg, "cpu", torch.float32, fused=fused)
        model.init_weights(5)
        loss = model(tokens, labels, mask)
        loss.backward()
        losses.append(loss.item())
        grads.append(hf_grads(model))
    check(abs(losses[0] - losses[1]) < 1e-5 * abs(losses[1]), f"fused and separate projections: loss {losses}")
    check(grads[0].keys() == grads[1].keys(), "fused and separate projections: the same Hugging Face tensors")
    worst = max(rel_err(grads[0][k], grads[1][k]) for k in grads[0])
    check(worst < 1e-5, f"fused and separate projections: every gradient equal (worst rel err {worst:.2e})")


def step_grads(cfg: tr.BenchConfig, tokens, labels):
    model = tr.Llama(cfg, "cpu", torch.float32)
    model.init_weights(11)
    step = tr.TrainStep(model, cfg, "eager", seed=0)
    for m in range(cfg.num_microbatches):
        rows = slice(m * cfg.micro_batch_size, (m + 1) * cfg.micro_batch_size)
        step.tokens[m].copy_(tokens[rows])
        step.labels[m].copy_(labels[rows])
    with torch.no_grad():
        before = {n: v.detach().clone() for n, v, _ in model.hf_views()}
    loss = step().item()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    after = {n: v.detach().clone() for n, v, _ in model.hf_views()}
    return loss, grads, before, after, step


def check_accumulation_and_optimizer() -> None:
    two = small_config(**{"train.micro_batch_size": 2, "train.global_batch_size": 4, "optimizer.clip_grad": 0.0})
    one = dataclasses.replace(two, micro_batch_size=4)
    check(two.num_microbatches == 2 and one.num_microbatches == 1, "microbatch counts 2 and 1")
    tokens, labels = batch(two)
    loss2, grads2, _, _, _ = step_grads(two, tokens, labels)
    loss1, grads1, _, _, _ = step_grads(one, tokens, labels)
    check(abs(loss2 - loss1) < 1e-5 * loss1, f"step loss, 2 microbatches vs 1: {loss2:.6f} vs {loss1:.6f}")
    err = rel_err(grads2, grads1)
    check(err < 1e-5, f"gradients, 2 microbatches vs 1 (accumulation, 1/num_microbatches): rel err {err:.2e}")
    cfg = small_config(**{"optimizer.weight_decay": 0.5, "optimizer.lr": 1e-2})
    _, _, before, after, step = step_grads(cfg, *batch(cfg))
    decays = {g["weight_decay"] for g in step.opt.param_groups}
    no_decay = step.opt.param_groups[1]["params"]
    check(decays == {0.5, 0.0} and all(p.dim() == 1 for p in no_decay) and len(no_decay) == 2 * cfg.num_layers + 1,
          "AdamW groups: decay 0.5 on matrices, 0 on the 2L+1 norm weights")
    check(all(g.get("fused") for g in step.opt.param_groups), "AdamW is the fused implementation")
    moved = sum(not torch.equal(before[n], after[n]) for n in before)
    check(moved == len(before), f"one step updates every tensor ({moved}/{len(before)})")


def check_recipe_parsing() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.yaml")
        with open(path, "w") as f:
            f.write("model:\n  num_layers: 3\n  hidden_size: 128\n  num_attention_heads: 4\n  num_query_groups: 2\n"
                    "  layernorm_epsilon: 1e-6\n  seq_length: 64\n  share_embeddings_and_output_weights: true\n"
                    "  other_key: [1, 2]\ntrain:\n  micro_batch_size: 2\n  global_batch_size: 8\n"
                    "optimizer:\n  lr: 1e-3\n  clip_grad: 0.5\nscheduler:\n  lr_warmup_iters: 10\n")
        cfg = tr.load_config(path, {})
        check((cfg.num_layers, cfg.hidden_size, cfg.num_query_groups, cfg.seq_length) == (3, 128, 2, 64),
              "recipe model keys read")
        check(cfg.layernorm_epsilon == 1e-6 and cfg.lr == 1e-3 and isinstance(cfg.lr, float),
              "`1e-6` / `1e-3` (YAML strings) read as floats")
        check(cfg.share_embeddings_and_output_weights is True and cfg.num_microbatches == 4, "bool and batch keys")
        check(cfg.ffn_hidden_size == 512 and cfg.vocab_size == 8192 and cfg.adam_beta2 == 0.95,
              "missing keys take the defaults (ffn 4 x hidden, stepgraph's optimizer defaults)")
        cfg = tr.load_config(path, {"model.num_layers": 1, "optimizer.lr": "2e-4"})
        check(cfg.num_layers == 1 and cfg.lr == 2e-4, "--set overrides the recipe")
        for bad, expect in (({"model.num_layers": "many"}, "model.num_layers"),
                            ({"model.num_layer": 2}, "unknown key"),
                            ({"train.global_batch_size": 3}, "not a multiple of micro_batch_size"),
                            ({"model.num_query_groups": 3}, "num_query_groups")):
            try:
                tr.load_config(path, bad)
                check(False, f"bad config {bad} refused")
            except SystemExit as e:
                check(expect in str(e), f"bad config {bad} refused: {e}")
    try:
        tr.load_config("/nonexistent/recipe.yaml", {})
        check(False, "a missing recipe is refused")
    except SystemExit as e:
        check("cannot read recipe" in str(e), f"a missing recipe is refused: {e}")


def check_cli(skip_compile: bool) -> None:
    modes = "eager,cuda_graph,graphed_callables,compile_reduce_overhead" + ("" if skip_compile else ",compile")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        proc = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--shrink", "--steps", "3", "--warmup", "1",
                               "--modes", modes, "--json", out], capture_output=True, text=True, timeout=1800)
        print(proc.stderr[-3000:])
        print(proc.stdout)
        check(proc.returncode == 0, f"CLI exit code {proc.returncode}")
        report = json.load(open(out))
        by_mode = {r["mode"]: r for r in report["modes"]}
        check(list(by_mode) == modes.split(","), "one result per mode, in order")
        eager = by_mode["eager"]
        check(eager["status"] == "ok" and len(eager["step_ms"]) == 3 and eager["median_ms"] > 0,
              "eager ran 3 timed steps")
        check(len(eager["losses"]) == 1 + 1 + 3 and all(abs(x - 6.24) < 0.5 for x in eager["losses"]),
              f"eager losses near ln(512) = 6.24: {eager['losses']}")
        check(all(by_mode[m]["status"] == "skipped" for m in tr.CUDA_ONLY_MODES), "CUDA-only modes skipped on CPU")
        if not skip_compile:
            c = by_mode["compile"]
            check(c["status"] == "ok" and c["loss_rel_diff_vs_eager"] < 2e-2,
                  f"compile ran and its losses follow eager's: {c.get('error') or c.get('loss_rel_diff_vs_eager')}")
        check(report["tokens_per_step"] == 4 * 32 and report["num_microbatches"] == 2, "report header")
        lines = proc.stdout.strip().splitlines()
        header = next((i for i, line in enumerate(lines) if line.startswith("mode ")), None)
        check(header is not None and [line.split()[0] for line in lines[header + 1:header + 1 + len(by_mode)]]
              == list(by_mode) and lines[header + 1 + len(by_mode)].startswith("median/p90")
              and all(line.split(":")[0] in tr.CUDA_ONLY_MODES for line in lines[header + 2 + len(by_mode):]),
              "the table is printed last (then the reasons of the skipped modes)")
        # Bad values are refused before anything runs.
        proc = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--shrink", "--steps", "1", "--warmup", "0",
                               "--modes", "eager", "--set", "model.vocab_size=0"], capture_output=True, text=True)
        check(proc.returncode != 0 and "sizes must be positive" in proc.stderr, "bad --set refused with a message")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--skip-compile", action="store_true", help="leave torch.compile out of the CLI run (slow on CPU)")
    args = p.parse_args()
    torch.manual_seed(0)
    check_hf_parity()
    check_fused_vs_separate()
    check_accumulation_and_optimizer()
    check_recipe_parsing()
    check_cli(args.skip_compile)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
