#!/usr/bin/env python3
"""Writes a small synthetic Hugging Face Llama folder, as transformers' save_pretrained lays it out:
config.json and model.safetensors, or shards model-0000i-of-0000N.safetensors with
model.safetensors.index.json; BF16, F16 or F32 tensors; tied or untied embeddings; optional Llama 3
rope_scaling (transformers 4 spelling) or rope_parameters (transformers 5 spelling); with --qwen2 a Qwen2 folder
(model_type qwen2: each attention's q_proj, k_proj and v_proj with a bias); with --bias-linear a Llama folder with
attention_bias and mlp_bias (a bias on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj); with
--qwen3 a Qwen3 folder (model_type qwen3: each attention's q_norm and k_norm, head_dim in config.json), with
--experts a Qwen3-MoE folder (model_type qwen3_moe: mlp.gate and mlp.experts.j.gate_proj / up_proj / down_proj in
the blocks not listed in --mlp-only, whose MLP stays dense); --qwen2 --experts E --shared-ffn S a Qwen2-MoE folder
(model_type qwen2_moe: the same experts plus mlp.shared_expert.gate_proj / up_proj / down_proj and
mlp.shared_expert_gate in the MoE blocks).

Also writes expected.safetensors: every tensor in F32 with exactly the values the model files hold
(rounded to bf16 or fp16 first), so a loader's result can be compared element by element.

  python3 tests/checkpoint/make_hf_llama.py --out DIR [--dtype bf16|fp16|fp32] [--shards N] [--tied]
      [--vocab 64 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --ffn 48] [--rope-scaling FACTOR]
      [--rope-parameters] [--phi3 WINDOW [--partial-rotary F] [--longrope --original-max-pos N]] [--qwen2]
      [--bias-linear]
      [--qwen3 [--experts E --topk K --moe-ffn F --mlp-only 1,3 --norm-topk]]
      [--qwen2 --experts E --shared-ffn S ...] [--std 0.3]
      [--seed 0] [--break DEFECT]

--break writes a folder with one defect, for the loaders' error messages: missing, extra, shape (a tensor);
bias, act, yarn, head_dim, sliding (config.json; sliding: a Qwen2 or Qwen3 use_sliding_window); nan, inf (model.layers.1.mlp.down_proj.weight element 7 is NaN,
element 7 and 9 of model.norm.weight are +inf); f64 (two tensors stored as F64); stale (a model.safetensors
beside the shards' index); shard_missing, shard_outside (a shard name ../NAME), index_moved (the index maps
a tensor to another shard), index_ghost (the index names a tensor no shard holds), index_unlisted (a shard
tensor the index does not name) - the shard defects need --shards 2 or more. Needs numpy and safetensors
(scripts/setup.sh installs both). F32 files are written with safetensors.numpy; numpy has no bfloat16,
so BF16 files are written by the small writer below in the same format, and every file is read back
with safetensors.safe_open to check it.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (as the C++ side and torch do)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_bf16_safetensors(path, tensors):
    """tensors: name -> uint16 bits array. The safetensors layout: u64 header length, JSON, data."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, bits in tensors.items():
        data = np.ascontiguousarray(bits, dtype="<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(bits.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def mlp_only(a):
    return [int(x) for x in a.mlp_only.split(",") if x]


def tensor_specs(a):
    """(name, shape) in Hugging Face state-dict order."""
    head_dim = a.hidden // a.heads
    specs = [("model.embed_tokens.weight", (a.vocab, a.hidden))]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        specs += [
            (p + "self_attn.q_proj.weight", (a.heads * head_dim, a.hidden)),
            (p + "self_attn.k_proj.weight", (a.kv_heads * head_dim, a.hidden)),
            (p + "self_attn.v_proj.weight", (a.kv_heads * head_dim, a.hidden)),
            (p + "self_attn.o_proj.weight", (a.hidden, a.heads * head_dim)),
        ]
        if a.qwen2 or a.bias_linear:
            specs += [(p + "self_attn.q_proj.bias", (a.heads * head_dim,)),
                      (p + "self_attn.k_proj.bias", (a.kv_heads * head_dim,)),
                      (p + "self_attn.v_proj.bias", (a.kv_heads * head_dim,))]
        if a.bias_linear:
            specs.append((p + "self_attn.o_proj.bias", (a.hidden,)))
        if a.qwen3:
            specs += [(p + "self_attn.q_norm.weight", (head_dim,)), (p + "self_attn.k_norm.weight", (head_dim,))]
        specs += [
        ]
        if a.experts and i not in mlp_only(a):
            specs.append((p + "mlp.gate.weight", (a.experts, a.hidden)))
            for j in range(a.experts):
                e = f"{p}mlp.experts.{j}."
                specs += [(e + "gate_proj.weight", (a.moe_ffn, a.hidden)), (e + "up_proj.weight", (a.moe_ffn, a.hidden)),
                          (e + "down_proj.weight", (a.hidden, a.moe_ffn))]
            if a.shared_ffn:
                s = p + "mlp.shared_expert."
                specs += [(s + "gate_proj.weight", (a.shared_ffn, a.hidden)),
                          (s + "up_proj.weight", (a.shared_ffn, a.hidden)),
                          (s + "down_proj.weight", (a.hidden, a.shared_ffn)),
                          (p + "mlp.shared_expert_gate.weight", (1, a.hidden))]
        else:
            specs += [(p + "mlp.gate_proj.weight", (a.ffn, a.hidden)), (p + "mlp.up_proj.weight", (a.ffn, a.hidden)),
                      (p + "mlp.down_proj.weight", (a.hidden, a.ffn))]
            if a.bias_linear:
                specs += [(p + "mlp.gate_proj.bias", (a.ffn,)), (p + "mlp.up_proj.bias", (a.ffn,)),
                          (p + "mlp.down_proj.bias", (a.hidden,))]
        specs += [
            (p + "input_layernorm.weight", (a.hidden,)),
            (p + "post_attention_layernorm.weight", (a.hidden,)),
        ]
    specs.append(("model.norm.weight", (a.hidden,)))
    if not a.tied:
        specs.append(("lm_head.weight", (a.vocab, a.hidden)))
    return specs


def fuse_phi3(tensors):
    """Phi-3's files: each layer's q, k and v stacked into qkv_proj, gate and up into gate_up_proj (in that order)."""
    fusions = [("self_attn.qkv_proj.weight", ["self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                              "self_attn.v_proj.weight"]),
               ("mlp.gate_up_proj.weight", ["mlp.gate_proj.weight", "mlp.up_proj.weight"])]
    out = {}
    for name, t in tensors.items():
        for fused, parts in fusions:
            if name.endswith(parts[0]):
                prefix = name[:-len(parts[0])]
                out[prefix + fused] = np.concatenate([tensors[prefix + q] for q in parts], axis=0)
        if not any(name.endswith(q) for _, parts in fusions for q in parts):
            out[name] = t
    return out


def make_config(a):
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": a.vocab,
        "hidden_size": a.hidden, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "hidden_act": "silu",
        "max_position_embeddings": a.max_pos, "rms_norm_eps": 1e-5, "tie_word_embeddings": a.tied,
        "attention_bias": False, "mlp_bias": False, "initializer_range": 0.02, "use_cache": True,
        "torch_dtype": {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[a.dtype], "bos_token_id": None,
        "eos_token_id": a.eos,
    }
    if a.bias_linear:
        config.update(attention_bias=True, mlp_bias=True)
    if a.phi3 is not None:
        config.update(architectures=["Phi3ForCausalLM"], model_type="phi3", partial_rotary_factor=a.partial_rotary,
                      resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
                      original_max_position_embeddings=a.max_pos, pad_token_id=None)
        del config["attention_bias"], config["mlp_bias"]  # Phi3Config has neither
        if a.phi3 >= 0:
            config["sliding_window"] = a.phi3 or None
    if a.mistral is not None:
        config.update(architectures=["MistralForCausalLM"], model_type="mistral", head_dim=a.hidden // a.heads)
        del config["attention_bias"], config["mlp_bias"]  # MistralConfig has neither
        if a.mistral >= 0:
            config["sliding_window"] = a.mistral or None
    if a.qwen2:
        config.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2", use_sliding_window=False,
                      sliding_window=None, max_window_layers=a.layers)
        del config["mlp_bias"], config["attention_bias"]
        if a.experts:
            config.update(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", num_experts=a.experts,
                          num_experts_per_tok=a.topk, moe_intermediate_size=a.moe_ffn,
                          shared_expert_intermediate_size=a.shared_ffn, norm_topk_prob=a.norm_topk,
                          decoder_sparse_step=1, mlp_only_layers=mlp_only(a), router_aux_loss_coef=0.001,
                          output_router_logits=False, qkv_bias=True)
    if a.qwen3:
        config.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=a.hidden // a.heads,
                      use_sliding_window=False, sliding_window=None, max_window_layers=a.layers)
        del config["mlp_bias"]
        if a.experts:
            config.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=a.experts,
                          num_experts_per_tok=a.topk, moe_intermediate_size=a.moe_ffn, norm_topk_prob=a.norm_topk,
                          decoder_sparse_step=1, mlp_only_layers=mlp_only(a), router_aux_loss_coef=0.001,
                          output_router_logits=False)
    scaling = None
    if a.rope_scaling:
        scaling = {"rope_type": "llama3", "factor": a.rope_scaling, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": a.original_max_pos}
    if a.longrope:  # Phi-3.5's: one factor per rotated pair for short and for long sequences
        pairs = int(a.hidden // a.heads * a.partial_rotary) // 2
        scaling = {"rope_type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(pairs)],
                   "long_factor": [1.0 + 1.5 * i for i in range(pairs)]}
        config["original_max_position_embeddings"] = a.original_max_pos
    if a.rope_parameters:  # transformers 5
        config["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=a.rope_theta)
    else:
        config["rope_theta"] = a.rope_theta
        config["rope_scaling"] = scaling
    defect = a.break_
    if defect == "bias":
        config["attention_bias"] = True
    elif defect == "act":
        config["hidden_act"] = "gelu"
    elif defect == "yarn":
        config["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
    elif defect == "head_dim":
        config["head_dim"] = a.hidden // a.heads * 2
    elif defect == "sliding":
        config["use_sliding_window"] = True
    return config


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--tied", action="store_true")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=48)
    p.add_argument("--max-pos", type=int, default=256)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--rope-scaling", type=float, default=0.0, help="llama3 factor (0: none)")
    p.add_argument("--original-max-pos", type=int, default=64,
                   help="llama3's or longrope's original_max_position_embeddings")
    p.add_argument("--rope-parameters", action="store_true", help="transformers 5 rope_parameters spelling")
    p.add_argument("--mistral", type=int, default=None, metavar="WINDOW",
                   help="a Mistral folder (Llama's tensors) with this sliding_window; 0 writes null (no window), -1 "
                        "leaves the key out (MistralConfig's 4096)")
    p.add_argument("--phi3", type=int, default=None, metavar="WINDOW",
                   help="a Phi-3 folder (q, k and v in one qkv_proj, gate and up in one gate_up_proj) with this "
                        "sliding_window; 0 writes null, -1 leaves the key out (Phi3Config's none)")
    p.add_argument("--partial-rotary", type=float, default=1.0, metavar="FACTOR",
                   help="with --phi3: partial_rotary_factor, the share of each head RoPE rotates (Phi-4-mini's 0.75)")
    p.add_argument("--longrope", action="store_true",
                   help="with --phi3: LongRoPE scaling (Phi-3.5's rope_type longrope, factor lists for sequences up to "
                        "--original-max-pos and longer), original_max_position_embeddings --original-max-pos")
    p.add_argument("--qwen2", action="store_true", help="a Qwen2 folder: q, k and v biases in every attention")
    p.add_argument("--bias-linear", action="store_true",
                   help="a Llama folder with attention_bias and mlp_bias: a bias on every linear")
    p.add_argument("--qwen3", action="store_true", help="a Qwen3 folder: q_norm and k_norm in every attention")
    p.add_argument("--experts", type=int, default=0, help="with --qwen3: a Qwen3-MoE folder of this many experts")
    p.add_argument("--topk", type=int, default=2, help="its num_experts_per_tok")
    p.add_argument("--moe-ffn", type=int, default=16, help="its moe_intermediate_size")
    p.add_argument("--mlp-only", default="", help="its mlp_only_layers, comma-separated (dense blocks)")
    p.add_argument("--norm-topk", action="store_true", help="its norm_topk_prob (else false)")
    p.add_argument("--shared-ffn", type=int, default=0,
                   help="with --qwen2 --experts: the gated shared expert's shared_expert_intermediate_size")
    p.add_argument("--eos", type=int, default=None, help="eos_token_id")
    p.add_argument("--std", type=float, default=0.3, help="std of the matrices (large: peaked logits)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--break", dest="break_", default=None,
                   choices=["missing", "extra", "shape", "bias", "act", "yarn", "head_dim", "sliding", "nan", "inf", "f64",
                            "stale", "shard_missing", "shard_outside", "index_moved", "index_ghost",
                            "index_unlisted"])
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    values = {}
    for name, shape in tensor_specs(a):
        if name.endswith(".bias"):
            v = 0.3 * rng.standard_normal(shape)
        elif len(shape) == 1:
            v = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            v = a.std * rng.standard_normal(shape)
        values[name] = v.astype(np.float32)
    if a.break_ == "missing":
        del values["model.layers.0.mlp.up_proj.weight"]
    elif a.break_ == "extra":
        values["model.layers.0.self_attn.q_proj.bias"] = np.zeros((a.hidden,), np.float32)
    elif a.break_ == "shape":
        values["model.norm.weight"] = np.ones((a.hidden + 1,), np.float32)
    if a.break_ == "nan":
        values["model.layers.1.mlp.down_proj.weight"].reshape(-1)[7] = np.nan
    elif a.break_ == "inf":
        values["model.norm.weight"][[7, 9]] = np.inf
    if a.dtype == "bf16":
        bits = {k: bf16_bits(v) for k, v in values.items()}
        values = {k: bf16_values(b).reshape(values[k].shape) for k, b in bits.items()}
    elif a.dtype == "fp16":
        values = {k: v.astype(np.float16) for k, v in values.items()}  # written as F16, compared as F32
    f64 = {"model.norm.weight", "model.layers.0.input_layernorm.weight"} if a.break_ == "f64" else set()
    expected = dict(values)  # by the model's names; a Phi-3 folder's files hold some of them fused
    if a.phi3 is not None:
        values, bits = fuse_phi3(values), (fuse_phi3(bits) if a.dtype == "bf16" else None)

    os.makedirs(a.out, exist_ok=True)
    names = list(values)
    shard_names = [names[i::a.shards] for i in range(a.shards)]  # interleaved: every shard holds a bit of all
    files = []
    for i, shard in enumerate(shard_names):
        fname = "model.safetensors" if a.shards == 1 else f"model-{i + 1:05d}-of-{a.shards:05d}.safetensors"
        path = os.path.join(a.out, fname)
        if a.dtype == "bf16":
            write_bf16_safetensors(path, {k: bits[k] for k in shard})
        else:
            save_file({k: values[k].astype(np.float64) if k in f64 else values[k] for k in shard}, path,
                      metadata={"format": "pt"})
        files.append((fname, shard))
    if a.shards > 1:
        total = int(sum(v.size for v in values.values()) * (4 if a.dtype == "fp32" else 2))
        weight_map = {k: fname for fname, shard in files for k in shard}
        if a.break_ == "shard_missing":
            os.remove(os.path.join(a.out, files[-1][0]))
        elif a.break_ == "shard_outside":
            weight_map[files[0][1][0]] = "../" + files[0][0]
        elif a.break_ == "index_moved":
            weight_map[files[0][1][0]] = files[1][0]
        elif a.break_ == "index_ghost":
            weight_map["model.layers.9.mlp.up_proj.weight"] = files[0][0]
        elif a.break_ == "index_unlisted":
            del weight_map[files[1][1][0]]
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
        if a.break_ == "stale":  # an earlier single-file save left behind
            save_file({k: v.astype(np.float32) for k, v in values.items()}, os.path.join(a.out, "model.safetensors"),
                      metadata={"format": "pt"})
    save_file({k: v.astype(np.float32) for k, v in expected.items()}, os.path.join(a.out, "expected.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(make_config(a), f, indent=2)
    for fname, shard in files:  # read every file back with the safetensors library
        if not os.path.exists(os.path.join(a.out, fname)):
            continue  # --break shard_missing
        with safe_open(os.path.join(a.out, fname), framework="numpy") as f:
            assert sorted(f.keys()) == sorted(shard), fname
            for k in shard:
                assert tuple(f.get_slice(k).get_shape()) == values[k].shape, k
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
