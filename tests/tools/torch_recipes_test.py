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
        forward = 2 * t * (L * (h * (h + 2 * kv) + h * h + 3 * h * f) + h * v) + L * 4 * b * s * s * h
        self.assertEqual(torch_config.model_flops_per_step(cfg), 3 * forward)

    def test_moe_flops_count_the_routed_experts(self):
        cfg = torch_config.load_config(recipe("llama", "tiny"), {"model.num_moe_experts": 8, "model.kv_channels": 32,
                                                                 "model.moe_ffn_hidden_size": 128})
        h, q, kv, v, L = cfg.hidden_size, cfg.q_dim, cfg.kv_dim, cfg.vocab_size, cfg.num_layers
        t, b, s, k, e = cfg.tokens_per_step, cfg.global_batch_size, cfg.seq_length, cfg.moe_router_topk, 8
        per_layer = h * (q + 2 * kv) + q * h + h * e + k * 3 * h * 128
        forward = 2 * t * (L * per_layer + h * v) + L * 4 * b * s * s * q
        self.assertEqual(cfg.family, "moe")
        self.assertEqual(torch_config.model_flops_per_step(cfg), 3 * forward)

    def test_nemotron3_style_moe_loads_and_flops(self):
        """Nemotron 3's MoE settings load without refusal; FLOPs as stepgraph's MoeLayer::flops_per_token: router
        H E + 2 H (F k + S) multiply-adds per token (not gated: 2 linears per unit of width)."""
        keys = {"model.hybrid_override_pattern": "MEM*EMEM", "model.num_layers": 8, "model.num_moe_experts": 8,
                "model.moe_router_topk": 2, "model.moe_ffn_hidden_size": 96,
                "model.moe_shared_expert_intermediate_size": 160, "model.activation_func": "squared_relu",
                "model.gated_linear_unit": False, "model.moe_router_score_function": "sigmoid",
                "model.moe_router_enable_expert_bias": True, "model.moe_router_bias_update_rate": 0.002,
                "model.moe_router_topk_scaling_factor": 2.5, "model.moe_router_load_balancing_type": "seq_aux_loss",
                "model.moe_aux_loss_coeff": 1e-4}
        cfg = torch_config.load_config(recipe("llama", "tiny"), keys)
        self.assertEqual((cfg.family, cfg.moe_router_enable_expert_bias, cfg.moe_router_bias_update_rate),
                         ("hybrid", True, 0.002))
        h, q, kv, v = cfg.hidden_size, cfg.q_dim, cfg.kv_dim, cfg.vocab_size
        t, b, s = cfg.tokens_per_step, cfg.global_batch_size, cfg.seq_length
        moe = h * 8 + 2 * h * (96 * 2 + 160)  # multiply-adds per token
        mamba = torch_config._mamba_forward_flops_per_token(cfg) // 2  # (FLOPs: 2 x its multiply-adds)
        per_token = 4 * mamba + 3 * moe + (h * (q + 2 * kv) + q * h)  # MEM*EMEM: 4 M, 3 E, 1 attention
        forward = 2 * t * (per_token + h * v) + 4 * b * s * s * q
        self.assertEqual(torch_config.model_flops_per_step(cfg), 3 * forward)
        gated = torch_config.load_config(recipe("llama", "tiny"), {**keys, "model.activation_func": "silu",
                                                                    "model.gated_linear_unit": True})
        self.assertEqual(torch_config.model_flops_per_step(gated) - torch_config.model_flops_per_step(cfg),
                         3 * 2 * t * 3 * h * (96 * 2 + 160))  # SwiGLU experts: one linear more per unit of width
        self.assertEqual(torch_config.load_config(recipe("llama", "tiny"), {
            "model.num_moe_experts": 8, "model.moe_router_score_function": "sigmoid"}).moe_router_bias_update_rate,
            0.001)

    def test_moe_refusals(self):
        moe = {"model.num_moe_experts": 4}
        for bad, why in (({"model.moe_expert_capacity_factor": 1.0}, "model.moe_expert_capacity_factor"),
                         ({"model.moe_router_enable_expert_bias": True}, "model.moe_router_score_function sigmoid"),
                         ({"model.moe_router_score_function": "sigmoid", "model.moe_router_enable_expert_bias": True,
                           "model.moe_router_bias_update_rate": 0}, "model.moe_router_bias_update_rate"),
                         ({"model.moe_router_score_function": "sparsemixer"}, "model.moe_router_score_function"),
                         ({"model.moe_router_load_balancing_type": "sinkhorn"}, "model.moe_router_load_balancing_type"),
                         ({"model.activation_func": "gelu"}, "the MoE experts here are"),
                         ({"model.activation_func": "squared_relu", "model.gated_linear_unit": True},
                          "the MoE experts here are")):
            with self.subTest(bad=bad), self.assertRaises(SystemExit) as raised:
                torch_config.load_config(recipe("llama", "tiny"), {**moe, **bad})
            self.assertIn(why, str(raised.exception))

    def test_shrink_keeps_a_hybrid_recipes_moe_layers(self):
        cfg = torch_config.load_config(recipe("hybrid", "tiny_hybrid_moe"), {}, shrink="auto")
        self.assertEqual((cfg.family, cfg.layer_pattern), ("hybrid", "ME*M"))
        self.assertEqual((cfg.num_moe_experts, cfg.moe_ffn_hidden_size, cfg.moe_shared_expert_intermediate_size),
                         (4, 32, 48))
        self.assertEqual(torch_config.load_config(recipe("hybrid", "tiny_hybrid"), {}, shrink="auto").layer_pattern,
                         "M*-M")

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
