#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses of tests/fuzz/ (scripts/fuzz_cpu.sh runs this): tiny valid files of
each format, written at run time so that no binary file lives in git. One folder per harness under --out; an input
that holds several files separates them with a "\n=====\n" line (tests/fuzz/fuzz_util.h split_parts), and the
indexed dataset's input is the .idx's byte count (4 bytes, little-endian), the .idx, then the .bin.

usage: scripts/fuzz_seeds.py --out DIR [--checkout PATH]
"""
import argparse
import json
import pathlib
import struct
import zlib

SEP = b"\n=====\n"


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] laid out in order."""
    header = {"__metadata__": {"format": "pt", **(metadata or {})}}
    offset = 0
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    yield "w_f32", safetensors([("w", "F32", [2, 2], f32)])
    yield "mixed", safetensors([
        ("a", "BF16", [3], struct.pack("<3H", 0x3F80, 0xBF80, 0x7F80)),
        ("b", "F16", [1, 2], struct.pack("<2H", 0x3C00, 0x7E00)),
        ("c", "I64", [2], struct.pack("<2q", 7, -1)),
        ("d", "I32", [], struct.pack("<i", 5)),
        ("e", "F32", [0, 4], b""),
    ], {"step": "3"})
    yield "nan", safetensors([("w", "F32", [2, 2], struct.pack("<4f", 1.0, float("nan"), 0.0, float("inf")))])
    yield "empty", safetensors([])


def indexed_dataset(documents, dtype_code=8, fmt="H"):
    size = struct.calcsize("<" + fmt)
    lengths = [len(d) for d in documents]
    offsets, pos = [], 0
    for n in lengths:
        offsets.append(pos)
        pos += n * size
    idx = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", dtype_code)
    idx += struct.pack("<QQ", len(documents), len(documents) + 1)
    idx += struct.pack(f"<{len(lengths)}i", *lengths)
    idx += struct.pack(f"<{len(offsets)}q", *offsets)
    idx += struct.pack(f"<{len(documents) + 1}q", *range(len(documents) + 1))
    bin_ = b"".join(struct.pack(f"<{len(d)}{fmt}", *d) for d in documents)
    return struct.pack("<I", len(idx)) + idx + bin_


def indexed_dataset_seeds():
    docs = [[1, 2, 3], [4, 5], [], [999, 0, 7, 7]]
    yield "uint16", indexed_dataset(docs)
    yield "int32", indexed_dataset(docs, 4, "i")
    yield "uint8", indexed_dataset(docs[:2], 1, "B")
    yield "int64", indexed_dataset([[3, 2000]], 5, "q")
    yield "empty", indexed_dataset([])


def train_state(version=2, sealed=True, checksums=True, iteration=100):
    config = b'{"model_type": "llama"}\n'  # what checkpoint_folder_fuzz.cpp writes as config.json
    j = {
        "format": "stepgraph-train-state",
        "version": version,
        "iteration": iteration,
        "consumed_samples": 800,
        "data_position": {"consumed_samples": 800, "per_source": [500, 300]},
        "rng_state": "00112233445566778899aabbccddeeff",
        "config_hash": "0123456789abcdef",
        "extra": {"scheduler": {"step": 100}, "loss_scale": 1.0},
    }
    if checksums:
        j["file_checksums"] = {"config.json": {"bytes": len(config), "crc32": "%08x" % zlib.crc32(config)}}
    if sealed:
        rest = json.dumps(j, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
        j["crc32c"] = "%08x" % crc32c(rest)
    return json.dumps(j, indent=2).encode()


def checkpoint_folder_seeds():
    yield "v2_latest", train_state() + SEP + b"100\n"
    yield "v2_no_latest", train_state()
    yield "v1_unsealed", train_state(version=1, sealed=False) + SEP + b"100\n"
    yield "v1_no_checksums", train_state(version=1, sealed=False, checksums=False)
    yield "wrong_iteration", train_state(iteration=7) + SEP + b"100\n"
    yield "latest_missing_folder", train_state() + SEP + b"42\n"


LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "hidden_act": "silu", "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False, "initializer_range": 0.02,
    "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": [2, 3],
}


def hf_config_seeds():
    yield "llama", json.dumps(LLAMA, indent=2).encode()
    yield "llama_generation", json.dumps(LLAMA).encode() + SEP + b'{"eos_token_id": [2, 9], "do_sample": true}'
    tf5 = dict(LLAMA)
    del tf5["rope_theta"], tf5["rope_scaling"]
    tf5["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    yield "llama_tf5", json.dumps(tf5).encode()
    mixtral = {k: v for k, v in LLAMA.items() if k not in ("rope_scaling", "head_dim")}
    mixtral.update(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0,
                   sliding_window=None)
    yield "mixtral", json.dumps(mixtral).encode()
    nemotron = (
        b'{"model_type": "nemotron_h", "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 4,\n'
        b' "hybrid_override_pattern": "M-*E", "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,\n'
        b' "intermediate_size": 128, "mlp_hidden_act": "relu2", "ssm_state_size": 16, "mamba_head_dim": 16,\n'
        b' "n_groups": 1, "mamba_num_heads": 8, "expand": 2, "conv_kernel": 4, "chunk_size": 32,\n'
        b' "time_step_limit": [0.0, Infinity], "time_step_min": 0.001, "time_step_max": 0.1,\n'
        b' "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,\n'
        b' "moe_shared_expert_intermediate_size": 32, "norm_topk_prob": true, "n_group": 1, "topk_group": 1,\n'
        b' "max_position_embeddings": 256, "layer_norm_epsilon": 1e-5, "eos_token_id": 2}')
    yield "nemotron_h", nemotron
    yield "nemotron_h_types", (
        b'{"model_type": "nemotron_h", "vocab_size": 256, "hidden_size": 64, "layers_block_type": ["mamba", '
        b'"attention", "mlp"], "intermediate_size": 128, "time_step_limit": [0.0, {"__float__": "Infinity"}]}')


def hf_tokenizer_seeds():
    bpe = {"version": "1.0", "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": True}],
           "model": {"type": "BPE", "vocab": {"<s>": 0, "a": 1, "b": 2}, "merges": ["a b"]}}
    yield "bpe", (json.dumps(bpe).encode() + SEP + b'{"eos_token": "<|endoftext|>", "bos_token": {"content": "<s>"}}'
                  + SEP + b'{"eos_token": "b"}')
    unigram = {"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["x", -1.5], ["</s>", -2.0]]}}
    yield "unigram", json.dumps(unigram).encode() + SEP + SEP + b'{"eos_token": "</s>", "bos_token": null}'
    yield "bare", json.dumps({"model": {"vocab": {"x": 0}}}).encode()


def config_yaml_seeds(checkout):
    for path in sorted((checkout / "recipes").rglob("*.yaml")):
        yield path.parent.name + "_" + path.stem, path.read_bytes()
    yield "small", b"model:\n  num_layers: 2\n  hidden_size: 64\n  cuda_graph_scope: [attn, mlp]\ntrain:\n  train_iters: 5\n"


def run_records_seeds():
    metrics = b"".join(
        json.dumps({"step": s, "loss": 5.0 / s, "grad_norm": 1.5, "lr": 3e-4, "step_ms": 12.5, "tokens_per_s": 1e5,
                    "tflops_per_gpu": 1.0, "mfu": 0.1, "device_memory_used": 1 << 30, "wall_time_s": s * 0.1,
                    "tokens": s * 512, **({"capture": True} if s == 3 else {})}).encode() + b"\n"
        for s in range(1, 9))
    metrics += b'{"step": 4, "val_loss": 2.5, "val_ppl": 12.18, "eval_batches": 2, "eval_ms": 3.0, "wall_time_s": 1}\n'
    config = b"# stepgraph config\nmodel:\n  num_layers: 2\ncheckpoint:\n  load: runs/x\n  save: ckpt\n"
    yield "run", metrics + SEP + config
    yield "torn", metrics + b'{"step": 9, "lo' + SEP + config
    yield "moe", (b'{"step": 1, "loss": 3.0, "moe_aux_loss": 0.1, "moe_tokens_per_expert": [[1, 2], [3, 4]]}\n'
                  + SEP + b"model:\n  num_layers: 2\n")


def config_overrides_seeds(checkout):
    """The first byte picks a recipe (sorted recipes/**/*.yaml), then one override or Bridge flag a line."""
    recipes = sorted(str(p) for p in (checkout / "recipes").rglob("*.yaml"))
    lines = {
        "scope": ["model.cuda_graph_scope=attn,mlp", "train.train_iters=50"],
        "null_save": ["checkpoint.save=null", "optimizer.lr=3e-4", "train.global_batch_size=8"],
        "quoted": ["model.hybrid_override_pattern=\"M*-M*-\"", "model.recompute_modules=[core_attn, mlp]"],
        "moe_freq": ["model.moe_layer_freq=([1]*3+[0])*2", "model.num_layers=8"],
        "recompute": ["model.recompute_granularity=full", "model.recompute_method=uniform",
                      "model.recompute_num_layers=1"],
        "bridge": ["-tp 1", "-rl 2", "--lr 1e-4", "-ms 10", "--data mock", "--wandb_project_name x"],
        "bridge_selective": ["--recompute_modules core_attn,mlp", "--num_layers 4", "-vp None"],
    }
    for i, (name, args) in enumerate(lines.items()):
        yield name, bytes([i % max(len(recipes), 1)]) + "\n".join(args).encode()
    for i, path in enumerate(recipes):
        yield "recipe_" + pathlib.Path(path).stem, bytes([i]) + b"train.train_iters=5\n"


def launcher_env_seeds():
    """One NAME=VALUE a line; the first line is also read as a Slurm hostlist."""
    yield "hostlist", b"gpu-[001-004,010],login1\nSLURM_PROCID=1\nSLURM_NTASKS=8\nSLURM_LOCALID=1\n" \
        b"SLURM_NTASKS_PER_NODE=4(x2)\nSLURM_JOB_NODELIST=gpu-[001-004,010],login1\nSLURM_JOB_ID=1234567\n" \
        b"SLURM_STEP_ID=0"
    yield "rack", b"rack[1-2]-node[07-08]\nSLURM_PROCID=0\nSLURM_NPROCS=2\nSLURM_LOCALID=0\n" \
        b"SLURM_STEP_NODELIST=rack[1-2]-node[07-08]\nMASTER_PORT=29500\nSTEPGRAPH_RENDEZVOUS_TIMEOUT=60"
    yield "torchrun", b"RANK=3\nWORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\nMASTER_ADDR=10.0.0.1\n" \
        b"MASTER_PORT=29500\nTORCHELASTIC_USE_AGENT_STORE=True\nTORCHELASTIC_RUN_ID=abc\nCUDA_VISIBLE_DEVICES=0,1"
    yield "store_port", b"RANK=0\nWORLD_SIZE=1\nLOCAL_RANK=0\nMASTER_ADDR=localhost\nMASTER_PORT=29500\n" \
        b"STEPGRAPH_STORE_PORT=29600\nSTEPGRAPH_RENDEZVOUS_FILE=/tmp/rdzv\nSTEPGRAPH_RUN_ID=x"
    yield "slurm_ip", b"node1\nSLURM_PROCID=0\nSLURM_NTASKS=1\nSLURM_LOCALID=0\nSLURM_LAUNCH_NODE_IPADDR=10.1.2.3"


def layer_patterns_seeds(checkout):
    """The first byte is model.num_layers, the rest a hybrid pattern or a moe_layer_freq."""
    yield "freq_expr", bytes([8]) + b"([1]*3+[0])*2+[1,1]"
    yield "freq_list", bytes([4]) + b"1,0,1,1"
    yield "freq_int", bytes([12]) + b"2"
    yield "freq_bracketed", bytes([3]) + b"[1, 0, 1]"
    yield "megatron_stages", bytes([8]) + b"M*-M|M*-M/MM"
    for path in sorted((checkout / "recipes").rglob("*.yaml")):
        for line in path.read_text().splitlines():
            key, _, value = line.strip().partition(":")
            if key in ("hybrid_override_pattern", "moe_layer_freq"):
                value = value.strip().strip('"')
                yield path.stem + "_" + key, bytes([len(value) % 256]) + value.encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--checkout", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    corpora = {
        "safetensors": safetensors_seeds(),
        "indexed_dataset": indexed_dataset_seeds(),
        "checkpoint_folder": checkpoint_folder_seeds(),
        "hf_config": hf_config_seeds(),
        "hf_tokenizer": hf_tokenizer_seeds(),
        "config_yaml": config_yaml_seeds(args.checkout),
        "run_records": run_records_seeds(),
        "config_overrides": config_overrides_seeds(args.checkout),
        "launcher_env": launcher_env_seeds(),
        "layer_patterns": layer_patterns_seeds(args.checkout),
    }
    for harness, seeds in corpora.items():
        folder = args.out / harness
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds:
            (folder / name).write_bytes(data)


if __name__ == "__main__":
    main()
