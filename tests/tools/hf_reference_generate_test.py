#!/usr/bin/env python3
"""`stepgraph generate --cpu` against an independent float64 NumPy Llama with transformers' semantics,
Llama 3 RoPE scaling, Phi3's partial rotary and Phi-3.5's LongRoPE included (ctest tools/hf_reference_generate_test,
label cpu; no torch needed).

Why: the GPU parity run (tests/model/hf_generate_parity.py, docs/correctness.md) had its only failures on
the Llama-3-rope-scaling fixture, whose config transformers warns about (original_max_position_embeddings
8192 > max_position_embeddings 512). transformers' llama3 frequencies (modeling_rope_utils,
_compute_llama3_parameters, in both the 4.x and 5.x spellings) are what src/reference/rope_frequencies.h
computes, and that warning comes from its config validation only: it changes no frequency. So the
formula is not at fault. What was wrong is the fixture: a Llama 3 config needs the original context
below max_position_embeddings, and with 8192 only frequencies whose rotation over a short prompt is
negligible were rescaled, so the run could not tell scaling from none.

Here the folders are valid Llama 3 configs (original context 64 < 256) with head_dim 16 and rope_theta
5e5, so the three regimes (kept, interpolated, divided by the factor) all occur and matter at the prompt
positions. The reference below follows transformers' LlamaForCausalLM as documented (RMSNorm, rotate-half
RoPE with cat(freqs, freqs), grouped-query attention, SwiGLU, tied embeddings) and decodes greedily by
full recomputation. Checks, in both config spellings (transformers 4 rope_scaling, 5 rope_parameters):
  - stepgraph's greedy tokens equal the reference's until the reference meets a near tie (top-2 gap
    below 1e-4 of the logit range; none expected with these peaked logits);
  - the same reference WITHOUT the scaling disagrees with stepgraph somewhere (the check is sharp: a
    decoder that ignored rope_scaling would fail it).

    python3 tests/tools/hf_reference_generate_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import tool_test_common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKE_HF = os.path.join(ROOT, "tests", "checkpoint", "make_hf_llama.py")
STEPGRAPH = ""  # set from --stepgraph
NEW_TOKENS = 16
PROMPTS = [[3, 17, 42], [5, 9, 77, 100, 2, 64, 31, 8, 11, 90, 120], [1] * 6 + [50, 60, 70, 80, 90, 99, 7]]
SHAPE = ["--vocab", "128", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "96",
         "--max-pos", "256", "--std", "0.3", "--dtype", "fp32", "--tied", "--rope-theta", "500000",
         "--rope-scaling", "8", "--original-max-pos", "64"]


def run(*cmd: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}\nexited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def longrope_parameters(config: dict) -> dict | None:
    """Phi3's LongRoPE as transformers computes it (modeling_rope_utils' longrope parameters): the two factor lists
    (fp32, as its tensors), Phi3Config's top-level original_max_position_embeddings, and the attention factor."""
    scaling = config.get("rope_parameters") or config.get("rope_scaling")
    if not scaling or scaling.get("rope_type", scaling.get("type")) not in ("longrope", "su"):
        return None
    original = config.get("original_max_position_embeddings", 4096)
    factor = scaling.get("factor") or config["max_position_embeddings"] / original
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    lists = {k: np.asarray(scaling[k], dtype=np.float32).astype(np.float64) for k in ("short_factor", "long_factor")}
    return dict(lists, original=original, attention=attention)


def rope_parameters(config: dict) -> tuple[float, dict | None]:
    """(rope_theta, the llama3 parameters or None) from either spelling of config.json."""
    if "rope_parameters" in config:
        p = config["rope_parameters"]
        return p["rope_theta"], (p if p.get("rope_type") == "llama3" else None)
    scaling = config.get("rope_scaling")
    return config["rope_theta"], (scaling if scaling and scaling.get("rope_type") == "llama3" else None)


def inv_frequencies(head_dim: int, theta: float, llama3: dict | None) -> np.ndarray:
    """transformers' default inverse frequencies, then its llama3 rule: wavelengths below
    original/high_freq_factor kept, above original/low_freq_factor divided by factor, interpolated between."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if llama3 is None:
        return inv
    factor, low, high = llama3["factor"], llama3["low_freq_factor"], llama3["high_freq_factor"]
    original = llama3["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    smooth = (original / wavelen - low) / (high - low)
    out = np.where(wavelen > original / low, inv / factor, inv)
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    return np.where(medium, (1 - smooth) * inv / factor + smooth * inv, out)


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """F32 and BF16 tensors as float64 (numpy has no bfloat16: its bits are a float32's upper half)."""
    with open(path, "rb") as f:
        data = f.read()
    header_len = int.from_bytes(data[:8], "little")
    header, base = json.loads(data[8:8 + header_len]), 8 + header_len
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = (base + o for o in e["data_offsets"])
        if e["dtype"] == "F32":
            values = np.frombuffer(data[begin:end], dtype="<f4")
        elif e["dtype"] == "BF16":
            values = (np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise AssertionError(f"{path}: {name} is {e['dtype']}")
        out[name] = values.reshape(e["shape"]).astype(np.float64)
    return out


class ReferenceLlama:
    def __init__(self, folder: str, scaled: bool = True, partial: bool = True, longrope: str = "by length"):
        """`scaled` False: no RoPE scaling; `partial` False: RoPE on the whole head; `longrope` "by length" takes
        LongRoPE's long factors for a sequence longer than the original context, as transformers' Phi3 does (its
        generate recomputes the sequence when it gets there), "short" or "long" always that list."""
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        c = self.config
        self.w = read_safetensors(os.path.join(folder, "model.safetensors"))
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c["hidden_size"] // self.heads
        self.split_phi3_tensors()
        # Phi3's partial rotary: RoPE on the first int(head_dim x partial_rotary_factor) dimensions, frequencies over
        # that many (transformers' _compute_default_rope_parameters); `partial` False rotates the whole head.
        factor = c.get("partial_rotary_factor", 1.0) if partial else 1.0
        self.rotary_dim = int(self.head_dim * factor)
        theta, llama3 = rope_parameters(c)
        self.inv_freq = inv_frequencies(self.rotary_dim, theta, llama3 if scaled else None)
        self.longrope, self.longrope_choice = (longrope_parameters(c) if scaled else None), longrope
        self.attention_factor = 1.0

    def choose_frequencies(self, length: int):
        """LongRoPE's frequencies for a sequence of `length` tokens: 1 / (factor_i theta^(2i/d)), cos and sin scaled."""
        if self.longrope is None:
            return
        r = self.longrope
        use_long = self.longrope_choice == "long" or (self.longrope_choice == "by length" and length > r["original"])
        default = inv_frequencies(self.rotary_dim, rope_parameters(self.config)[0], None)
        self.inv_freq = default / r["long_factor" if use_long else "short_factor"]
        self.attention_factor = r["attention"]

    def split_phi3_tensors(self):
        """Phi3's qkv_proj rows are q, k, v stacked and gate_up_proj's gate then up (its chunk(2))."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for name in [n for n in self.w if n.endswith("self_attn.qkv_proj.weight")]:
            fused, p = self.w.pop(name), name[:-len("qkv_proj.weight")]
            self.w[p + "q_proj.weight"], self.w[p + "k_proj.weight"], self.w[p + "v_proj.weight"] = \
                fused[:q], fused[q:q + kv], fused[q + kv:]
        for name in [n for n in self.w if n.endswith("mlp.gate_up_proj.weight")]:
            fused, p = self.w.pop(name), name[:-len("gate_up_proj.weight")]
            self.w[p + "gate_proj.weight"], self.w[p + "up_proj.weight"] = np.split(fused, 2)

    def norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.config["rms_norm_eps"]) * self.w[name]

    def rope(self, x: np.ndarray) -> np.ndarray:  # x [T, heads, d]
        angles = np.arange(x.shape[0], dtype=np.float64)[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(np.concatenate([angles] * 2, -1))[:, None], np.sin(np.concatenate([angles] * 2, -1))[:, None]
        cos, sin = cos * self.attention_factor, sin * self.attention_factor
        r, half = x[..., :self.rotary_dim], self.rotary_dim // 2
        rotated = np.concatenate([-r[..., half:], r[..., :half]], -1)
        return np.concatenate([r * cos + rotated * sin, x[..., self.rotary_dim:]], -1)

    def logits(self, tokens: list[int]) -> np.ndarray:
        """The last position's logits."""
        T, d = len(tokens), self.head_dim
        self.choose_frequencies(T)
        x = self.w["model.embed_tokens.weight"][tokens]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for i in range(self.config["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self.norm(x, p + "input_layernorm.weight")
            q = self.rope((h @ self.w[p + "self_attn.q_proj.weight"].T).reshape(T, self.heads, d))
            k = self.rope((h @ self.w[p + "self_attn.k_proj.weight"].T).reshape(T, self.kv_heads, d))
            v = (h @ self.w[p + "self_attn.v_proj.weight"].T).reshape(T, self.kv_heads, d)
            group = self.heads // self.kv_heads
            out = np.empty((T, self.heads, d))
            for head in range(self.heads):
                kv = head // group
                scores = q[:, head] @ k[:, kv].T / math.sqrt(d) + mask
                probs = np.exp(scores - scores.max(-1, keepdims=True))
                out[:, head] = (probs / probs.sum(-1, keepdims=True)) @ v[:, kv]
            x = x + out.reshape(T, -1) @ self.w[p + "self_attn.o_proj.weight"].T
            h = self.norm(x, p + "post_attention_layernorm.weight")
            gate = h @ self.w[p + "mlp.gate_proj.weight"].T
            up = h @ self.w[p + "mlp.up_proj.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ self.w[p + "mlp.down_proj.weight"].T
        head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        return self.norm(x[-1:], "model.norm.weight")[0] @ head.T

    def greedy(self, prompt: list[int], n: int) -> tuple[list[int], int]:
        """n greedy tokens, and how many of them are decided without a near tie."""
        tokens, decided = list(prompt), None
        for step in range(n):
            logits = self.logits(tokens)
            top2 = np.sort(logits)[-2:]
            if decided is None and top2[1] - top2[0] < 1e-4 * (logits.max() - logits.min()):
                decided = step
            tokens.append(int(np.argmax(logits)))
        return tokens[len(prompt):], n if decided is None else decided


class HfReferenceGenerate(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sg_hf_reference_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def check_folder(self, spelling: list[str]):
        folder = os.path.join(self.dir, "hf" + "".join(spelling))
        run(sys.executable, MAKE_HF, "--out", folder, *SHAPE, *spelling)
        reference = ReferenceLlama(folder)
        theta, llama3 = rope_parameters(reference.config)
        self.assertIsNotNone(llama3)
        # A valid Llama 3 config (transformers warns otherwise), with pairs in all three regimes.
        self.assertLess(llama3["original_max_position_embeddings"], reference.config["max_position_embeddings"])
        wavelen = 2 * math.pi * theta ** (np.arange(0, reference.head_dim, 2) / reference.head_dim)
        original = llama3["original_max_position_embeddings"]
        self.assertTrue((wavelen < original / llama3["high_freq_factor"]).any())
        self.assertTrue((wavelen > original / llama3["low_freq_factor"]).any())
        self.assertTrue(((wavelen >= original / 4) & (wavelen <= original)).any())

        self.expect_reference_tokens(folder, reference, ReferenceLlama(folder, scaled=False), "the scaling")

    def expect_reference_tokens(self, folder: str, reference: ReferenceLlama, without: ReferenceLlama, what: str):
        """stepgraph's greedy tokens for PROMPTS are `reference`'s until its first near tie, and `without` (the
        reference without `what`) disagrees somewhere, so the check sees `what`."""
        cmd = [STEPGRAPH, "generate", folder, "--cpu", "--json", "--ignore-eos", "--max-new-tokens", str(NEW_TOKENS)]
        for p in PROMPTS:
            cmd += ["--prompt-tokens", ",".join(map(str, p))]
        ours = json.loads(run(*cmd).stdout)["tokens"]
        self.assertEqual(len(ours), len(PROMPTS))
        differs_without = False
        for prompt, got in zip(PROMPTS, ours):
            want, decided = reference.greedy(prompt, NEW_TOKENS)
            self.assertGreater(decided, NEW_TOKENS // 2, f"prompt {prompt}: a near tie at step {decided}")
            self.assertEqual(got[:decided], want[:decided], f"prompt {prompt}")
            differs_without |= without.greedy(prompt, NEW_TOKENS)[0] != got
        self.assertTrue(differs_without, f"the reference without {what} agrees too: the check would not see it")

    def test_transformers4_rope_scaling(self):
        self.check_folder([])

    def test_transformers5_rope_parameters(self):
        self.check_folder(["--rope-parameters"])

    def test_phi3_partial_rotary(self):
        """Phi-4-mini's partial_rotary_factor 0.75 (12 of 16 dimensions rotated, frequencies over 12), q, k, v and
        gate, up fused: stepgraph's tokens are the reference's, and a reference rotating the whole head disagrees."""
        folder = os.path.join(self.dir, "phi3_partial")
        run(sys.executable, MAKE_HF, "--out", folder, *SHAPE[:SHAPE.index("--rope-scaling")], "--phi3", "0",
            "--partial-rotary", "0.75")
        reference = ReferenceLlama(folder)
        self.assertEqual((reference.head_dim, reference.rotary_dim), (16, 12))
        self.assertIn("model.layers.0.self_attn.q_proj.weight", reference.w)
        self.expect_reference_tokens(folder, reference, ReferenceLlama(folder, partial=False), "partial rotary")

    def test_phi3_partial_rotary_save(self):
        """What stepgraph saves after training a partial-rotary model (Phi3Config, q, k, v and gate, up fused) is the
        same Phi-3 for the reference: stepgraph's tokens from the saved folder are the reference's."""
        source = os.path.join(self.dir, "phi3_source")
        run(sys.executable, MAKE_HF, "--out", source, *SHAPE[:SHAPE.index("--tied")], "--phi3", "0",
            "--partial-rotary", "0.75")
        saves = os.path.join(self.dir, "saves")
        run(STEPGRAPH, "train", "llama/tiny", f"checkpoint.pretrained_checkpoint={source}", "model.num_layers=0",
            "model.hidden_size=0", "model.num_attention_heads=0", "model.num_query_groups=null",
            "model.ffn_hidden_size=null", "model.vocab_size=null", "model.seq_length=16", "dataset.seq_length=16",
            "train.micro_batch_size=2", "train.global_batch_size=2", "train.train_iters=2", "optimizer.lr=1e-3",
            "scheduler.lr_warmup_iters=0",
            "model.rotary_percent=0.75", f"checkpoint.save={saves}", "--cpu", "--plain",
            "--run-dir", os.path.join(self.dir, "run"))
        folder = os.path.join(saves, "iter_0000002")
        reference = ReferenceLlama(folder)
        self.assertEqual(reference.config["model_type"], "phi3")
        self.assertEqual(reference.rotary_dim, 12)
        self.assertIn("model.layers.0.self_attn.q_proj.weight", reference.w)  # split from the saved qkv_proj
        self.expect_reference_tokens(folder, reference, ReferenceLlama(folder, partial=False), "partial rotary")

    def test_phi3_longrope(self):
        """Phi-3.5's LongRoPE on Phi-4-mini's 0.75 of each head: with the original context past every sequence (64)
        stepgraph's tokens are the reference's with the short factors, and with it below every prompt (2: the long
        factors from the first token on, as transformers too) the long ones'; a reference with the other list, or
        without the scaling, disagrees."""
        for original, used, other in ((64, "short", "long"), (2, "long", "short")):
            with self.subTest(original=original):
                folder = os.path.join(self.dir, f"phi3_longrope_{original}")
                run(sys.executable, MAKE_HF, "--out", folder, *SHAPE[:SHAPE.index("--rope-scaling")], "--phi3", "0",
                    "--partial-rotary", "0.75", "--longrope", "--original-max-pos", str(original))
                reference = ReferenceLlama(folder)
                self.assertEqual(len(reference.longrope["long_factor"]), 6)
                self.assertGreater(reference.longrope["attention"], 1.0)
                self.expect_reference_tokens(folder, reference, ReferenceLlama(folder, longrope=other),
                                             f"the {used} factors")
                self.expect_reference_tokens(folder, reference, ReferenceLlama(folder, scaled=False), "LongRoPE")


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
