#!/usr/bin/env python3
"""Reads a stepgraph checkpoint folder with the `safetensors` package (numpy backend) and checks it is
what Hugging Face LlamaForCausalLM expects: config.json is a LlamaConfig, model.safetensors holds
exactly the Llama parameter names with the shapes config.json implies, in the dtype it names, with
"format": "pt" metadata; the optimizer files hold the same names in F32.

With --pattern, every model value must equal ((7 j + len(name)) % 13) * 0.25 - 1.5 (+ --salt), the
pattern tests/checkpoint/checkpoint_test_util.h writes, so the byte layout is checked too.
Run by tests/checkpoint/checkpoint_python_test.cpp; exit status 0 ok, 1 check failed, 2 missing packages.
"""
import argparse
import json
import os
import struct
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file
except ImportError as e:  # scripts/setup.sh installs both; a missing package is a failure, not a skip
    print(f"error: {e}: run scripts/setup.sh (pip install safetensors numpy)", file=sys.stderr)
    sys.exit(2)


def llama_shapes(cfg):
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or h // heads
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (heads * d, h),
            p + "self_attn.k_proj.weight": (kv * d, h),
            p + "self_attn.v_proj.weight": (kv * d, h),
            p + "self_attn.o_proj.weight": (h, heads * d),
            p + "post_attention_layernorm.weight": (h,),
            p + "mlp.gate_proj.weight": (f, h),
            p + "mlp.up_proj.weight": (f, h),
            p + "mlp.down_proj.weight": (h, f),
        })
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (v, h)
    return shapes


def raw_bf16_as_float32(path):
    """numpy has no bfloat16: decode BF16 tensors from the raw file (upper 16 bits of a float32)."""
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
        data = fh.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "BF16":
            continue
        b, end = e["data_offsets"]
        bits = np.frombuffer(data[b:end], dtype="<u2").astype(np.uint32) << 16
        out[name] = bits.view(np.float32).reshape(e["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--pattern", action="store_true")
    ap.add_argument("--salt", type=float, default=0.0)
    args = ap.parse_args()
    errors = []

    with open(os.path.join(args.folder, "config.json")) as fh:
        cfg = json.load(fh)
    if cfg.get("architectures") != ["LlamaForCausalLM"] or cfg.get("model_type") != "llama":
        errors.append(f"config.json: architectures {cfg.get('architectures')}, model_type {cfg.get('model_type')}")
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps",
                "rope_theta", "tie_word_embeddings", "torch_dtype", "head_dim", "hidden_act"):
        if key not in cfg:
            errors.append(f"config.json: missing {key}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    want_dtype = {"bfloat16": "BF16", "float32": "F32"}.get(cfg["torch_dtype"])
    expected = llama_shapes(cfg)

    model_path = os.path.join(args.folder, "model.safetensors")
    with safe_open(model_path, framework="np") as f:
        meta = f.metadata() or {}
        if meta.get("format") != "pt":
            errors.append(f"model.safetensors: metadata format {meta.get('format')!r}, transformers needs 'pt'")
        found = {}
        for name in f.keys():
            s = f.get_slice(name)
            found[name] = (tuple(s.get_shape()), s.get_dtype())
    for name in sorted(set(expected) - set(found)):
        errors.append(f"missing {name} {expected[name]}")
    for name in sorted(set(found) - set(expected)):
        errors.append(f"unexpected {name} {found[name][0]}")
    for name in sorted(set(found) & set(expected)):
        shape, dtype = found[name]
        if shape != expected[name]:
            errors.append(f"shape {name}: file {shape}, Llama expects {expected[name]}")
        if dtype != want_dtype:
            errors.append(f"dtype {name}: file {dtype}, config.json torch_dtype says {want_dtype}")

    if not errors and args.pattern:
        values = load_file(model_path) if want_dtype == "F32" else raw_bf16_as_float32(model_path)
        for name, arr in values.items():
            j = np.arange(arr.size, dtype=np.int64)
            want = (((7 * j + len(name)) % 13) * 0.25 - 1.5 + args.salt).astype(np.float32)
            if not np.array_equal(arr.reshape(-1).astype(np.float32), want):
                bad = int(np.argmax(arr.reshape(-1) != want))
                errors.append(f"values {name}: element {bad} is {arr.reshape(-1)[bad]}, expected {want[bad]}")

    for opt in ("optimizer_main_params", "optimizer_exp_avg", "optimizer_exp_avg_sq"):
        path = os.path.join(args.folder, opt + ".safetensors")
        tensors = load_file(path)
        if set(tensors) != set(expected):
            errors.append(f"{opt}: names differ from the model's: {sorted(set(tensors) ^ set(expected))[:5]}")
        for name, arr in tensors.items():
            if arr.dtype != np.float32 or tuple(arr.shape) != expected.get(name):
                errors.append(f"{opt} {name}: {arr.dtype} {tuple(arr.shape)}, expected float32 {expected.get(name)}")

    with open(os.path.join(args.folder, "train_state.json")) as fh:
        state = json.load(fh)
    if state.get("format") != "stepgraph-train-state" or "iteration" not in state:
        errors.append("train_state.json: not a stepgraph train state")

    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    print(f"ok: {len(found)} tensors, LlamaForCausalLM layout, dtype {want_dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
