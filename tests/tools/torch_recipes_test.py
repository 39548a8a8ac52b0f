#!/usr/bin/env python3
"""Every shipped recipe is one that bench/torch_reference.py (the PyTorch side of the benchmarks) can read, as the model
family of its folder, with the model FLOPs of the formulas written out here (ctest tools/torch_recipes_test, label cpu).
Needs only PyYAML: bench/torch_config.py imports no torch.

    python3 tests/tools/torch_recipes_test.py [-v]
"""
from __future__ import annotations

import glob
import os
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torch_config  # noqa: E402

RECIPES = sorted(glob.glob(os.path.join(ROOT, "recipes", "*", "*.yaml")))


def recipe(family: str, name: str) -> str:
    return os.path.join(ROOT, "recipes", family, f"{name}.yaml")


class TorchRecipesTest(unittest.TestCase):
    def test_every_recipe_loads_as_its_folder_family(self):
        self.assertTrue(any("llama" in path for path in RECIPES), "no recipes found")
        for path in RECIPES:
            folder = os.path.basename(os.path.dirname(path))
            with self.subTest(recipe=os.path.relpath(path, ROOT)):
                cfg = torch_config.load_config(path, {})
                self.assertEqual(cfg.family, folder)
                self.assertEqual(len(cfg.layer_pattern), cfg.num_layers if cfg.family == "hybrid"
                                 else 2 * cfg.num_layers)
                self.assertGreater(torch_config.model_flops_per_step(cfg), 0)

    def test_llama_flops_formula(self):
        cfg = torch_config.load_config(recipe("llama", "small"), {})
        h, kv, f, v, L = cfg.hidden_size, cfg.kv_dim, cfg.ffn_hidden_size, cfg.vocab_size, cfg.num_layers
        t, b, s = cfg.tokens_per_step, cfg.global_batch_size, cfg.seq_length
        forward = 2 * t * (L * (h * (h + 2 * kv) + h * h + 3 * h * f) + h * v) + L * 2 * b * s * s * h
        self.assertEqual(torch_config.model_flops_per_step(cfg), 3 * forward)

    def test_moe_flops_count_the_routed_experts(self):
        cfg = torch_config.load_config(recipe("llama", "tiny"), {"model.num_moe_experts": 8, "model.kv_channels": 32,
                                                                 "model.moe_ffn_hidden_size": 128})
        h, q, kv, v, L = cfg.hidden_size, cfg.q_dim, cfg.kv_dim, cfg.vocab_size, cfg.num_layers
        t, b, s, k, e = cfg.tokens_per_step, cfg.global_batch_size, cfg.seq_length, cfg.moe_router_topk, 8
        per_layer = h * (q + 2 * kv) + q * h + h * e + k * 3 * h * 128
        forward = 2 * t * (L * per_layer + h * v) + L * 2 * b * s * s * q
        self.assertEqual(cfg.family, "moe")
        self.assertEqual(torch_config.model_flops_per_step(cfg), 3 * forward)

    def test_hybrid_defaults_and_refusals(self):
        pattern = {"model.hybrid_override_pattern": "M*-M", "model.num_layers": 4}
        cfg = torch_config.load_config(recipe("llama", "tiny"), pattern)
        self.assertEqual((cfg.family, cfg.position_embedding_type), ("hybrid", "none"))
        self.assertEqual(cfg.mamba_num_heads, 2 * cfg.hidden_size // cfg.mamba_head_dim)
        for bad, why in (({"model.num_layers": 5}, "has 4 layers"),
                         ({"model.hybrid_override_pattern": "M*|-M"}, "letters"),
                         ({"model.moe_expert_capacity_factor": 1.25, "model.num_moe_experts": 4}, "dropless")):
            with self.subTest(bad=bad), self.assertRaises(SystemExit) as raised:
                torch_config.load_config(recipe("llama", "tiny"), {**pattern, **bad})
            self.assertIn(why, str(raised.exception))


if __name__ == "__main__":
    argv = [a for i, a in enumerate(sys.argv) if a != "--stepgraph" and (i == 0 or sys.argv[i - 1] != "--stepgraph")]
    unittest.main(argv=argv)
