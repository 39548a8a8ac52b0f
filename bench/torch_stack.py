"""The MoE and hybrid models of bench/torch_reference.py: a decoder whose layers follow Megatron's layer pattern (one
letter per layer: * attention, - SwiGLU MLP, E MoE, M Mamba2), each a pre-norm residual x + f(RMSNorm(x)). A GPT
layout (no hybrid_override_pattern) is the pattern "*-" per block, "*E" for MoE blocks: for llama shapes the math
equals bench/torch_llama.py's Llama.

impl picks the implementation of the layers that have more than one: for MoE the experts (bench/torch_moe.py: loop,
grouped_mm), for hybrid models the Mamba2 mixer (bench/torch_mamba2.py: mamba_ssm, torch).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_config import BenchConfig
from torch_llama import DecoderLM, causal_attention, rms_norm, rope_tables
from torch_mamba2 import MAMBA_IMPLS, init_mixer, make_mixer
from torch_moe import EXPERT_IMPLS, MoEMLP

IMPLS = {"llama": ("fused", "separate"), "moe": EXPERT_IMPLS, "hybrid": MAMBA_IMPLS}


class AttentionLayer(nn.Module):
    def __init__(self, cfg: BenchConfig, rope):
        super().__init__()
        h, q, kv = cfg.hidden_size, cfg.q_dim, cfg.kv_dim
        self.cfg = cfg
        self.norm = nn.Parameter(torch.ones(h))
        self.qkv_proj = nn.Linear(h, q + 2 * kv, bias=False)
        self.o_proj = nn.Linear(q, h, bias=False)
        self.q_norm = nn.Parameter(torch.ones(cfg.head_dim)) if cfg.qk_layernorm else None
        self.k_norm = nn.Parameter(torch.ones(cfg.head_dim)) if cfg.qk_layernorm else None
        if rope is not None:
            self.register_buffer("cos", rope[0], persistent=False)
            self.register_buffer("sin", rope[1], persistent=False)
        self.rope = rope is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        q, k, v = self.qkv_proj(rms_norm(x, self.norm, cfg.layernorm_epsilon)).split(
            (cfg.q_dim, cfg.kv_dim, cfg.kv_dim), dim=-1)
        attn = causal_attention(cfg, q, k, v, (self.cos, self.sin) if self.rope else None, self.q_norm, self.k_norm)
        return x + self.o_proj(attn)


ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "squared_relu": lambda t: F.relu(t).square()}


class MLPLayer(nn.Module):
    """down(act(gate) * up) when gated (SwiGLU for silu; the rows of gate_up_proj are gate|up), else down(act(up))."""

    def __init__(self, cfg: BenchConfig):
        super().__init__()
        self.cfg, self.act = cfg, ACTIVATIONS[cfg.activation_func]
        self.norm = nn.Parameter(torch.ones(cfg.hidden_size))
        width = (2 if cfg.gated_linear_unit else 1) * cfg.ffn_hidden_size
        self.gate_up_proj = nn.Linear(cfg.hidden_size, width, bias=False)
        self.down_proj = nn.Linear(cfg.ffn_hidden_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.gate_up_proj(rms_norm(x, self.norm, self.cfg.layernorm_epsilon))
        if self.cfg.gated_linear_unit:
            gate, up = h.chunk(2, dim=-1)
            return x + self.down_proj(self.act(gate) * up)
        return x + self.down_proj(self.act(h))


class ResidualLayer(nn.Module):
    """x + body(RMSNorm(x)): the MoE and Mamba layers."""

    def __init__(self, cfg: BenchConfig, body: nn.Module):
        super().__init__()
        self.cfg = cfg
        self.norm = nn.Parameter(torch.ones(cfg.hidden_size))
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(rms_norm(x, self.norm, self.cfg.layernorm_epsilon))


class StackLM(DecoderLM):
    def __init__(self, cfg: BenchConfig, device, act_dtype=torch.bfloat16, impl: str | None = None,
                 mamba_src: str | None = None):
        family = cfg.family
        impl = impl or IMPLS[family][0]
        if family == "llama" or impl not in IMPLS[family]:
            raise ValueError(f"StackLM builds moe and hybrid models: impl {impl!r} for family {family!r}; choose from "
                             f"{', '.join(IMPLS[family])}")
        rope = rope_tables(cfg, device, act_dtype) if cfg.position_embedding_type == "rope" else None
        expert_impl = impl if family == "moe" else EXPERT_IMPLS[-1]  # E layers of a hybrid pattern: grouped_mm
        mamba_impl = impl if family == "hybrid" else None

        def make(index: int, letter: str) -> nn.Module:
            if letter == "*":
                return AttentionLayer(cfg, rope)
            if letter == "-":
                return MLPLayer(cfg)
            if letter == "E":
                return ResidualLayer(cfg, MoEMLP(cfg, expert_impl))
            return ResidualLayer(cfg, make_mixer(cfg, mamba_impl, mamba_src, index))

        super().__init__(cfg, device, act_dtype, lambda: [make(i, c) for i, c in enumerate(cfg.layer_pattern)])
        self.impl = impl
        for module in self.modules():
            if isinstance(module, MoEMLP):
                module.aux_grad_scale = 1.0 / cfg.num_microbatches  # the microbatch loss's weight in the step

    @torch.no_grad()
    def init_weights(self, seed: int, std: float = 0.02) -> None:
        """As Llama.init_weights: matrices normal(0, std), output projections std / sqrt(2 num_layers) (/ sqrt(num_layers)
        with model.is_hybrid_model), norms 1, the Mamba parameters as Megatron's; drawn in layer order, so every impl
        starts from the same values."""
        gen = torch.Generator(device=self.embed_tokens.weight.device).manual_seed(seed)
        out_std = std / self.cfg.output_init_std_divisor
        self.embed_tokens.weight.normal_(0.0, std, generator=gen)
        for layer in self.layers:
            for name, param in layer.named_parameters():
                if param.dim() == 1 and name.endswith("norm"):
                    param.fill_(1.0)
            if isinstance(layer, AttentionLayer):
                layer.qkv_proj.weight.normal_(0.0, std, generator=gen)
                layer.o_proj.weight.normal_(0.0, out_std, generator=gen)
            elif isinstance(layer, MLPLayer):
                layer.gate_up_proj.weight.normal_(0.0, std, generator=gen)
                layer.down_proj.weight.normal_(0.0, out_std, generator=gen)
            elif isinstance(layer.body, MoEMLP):
                layer.body.router.normal_(0.0, std, generator=gen)
                for view, output_projection in layer.body.expert_weights():
                    view.normal_(0.0, out_std if output_projection else std, generator=gen)
            else:
                init_mixer(layer.body, gen, std, out_std)
        self.norm.fill_(1.0)
        if self.lm_head is not None:
            self.lm_head.weight.normal_(0.0, std, generator=gen)
