"""A dropless Mixture-of-Experts MLP in plain PyTorch, as Megatron computes it, for bench/torch_reference.py.

Router (fp32, autocast off): logits = x W_r^T; softmax top-k as Megatron's topk_routing_with_score_function (with
moe_router_pre_softmax false: top-k of the logits, softmax over the k; true: softmax over all experts, top-k of
that), times moe_router_topk_scaling_factor. Load balancing (aux_loss): Megatron's switch_load_balancing_loss_func,
aux = E * coeff / (k * T^2) * sum_e (sum_t softmax(logits)_te) * tokens_e, and the z-loss coeff * mean_t
logsumexp(logits_t)^2; both reach the gradients as Megatron's MoEAuxLossAutoScaler does (identity on the layer output
in the forward, d(loss)/d(aux) = the step's loss scale in the backward), so the reported loss stays the LM loss.

Dispatch: the T x k (token, expert) pairs stably sorted by expert (a fixed T x k rows: dropless), SwiGLU experts,
then an unpermute by gather and the probability-weighted sum over each token's k rows (no atomics in the forward).
Experts, two ways a PyTorch user writes them:
  loop        one nn.Linear pair per expert (Hugging Face's Mixtral/Qwen3-MoE layout), a Python loop over the experts
              on host-side token counts (one .tolist() sync per layer): data-dependent shapes;
  grouped_mm  stacked [E, ...] expert weights and torch._grouped_mm (torch >= 2.8, bf16, int32 cumulative offsets
              read on the device): static shapes, no host sync.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_config import BenchConfig

EXPERT_IMPLS = ("loop", "grouped_mm")


def grouped_mm_unavailable(device: torch.device) -> str | None:
    """Why torch._grouped_mm cannot run here, or None (probed once on a tiny problem)."""
    if not hasattr(torch, "_grouped_mm"):
        return f"torch {torch.__version__} has no torch._grouped_mm (needs torch >= 2.8)"
    try:
        a = torch.zeros(16, 16, dtype=torch.bfloat16, device=device)
        b = torch.zeros(2, 16, 16, dtype=torch.bfloat16, device=device)
        torch._grouped_mm(a, b, offs=torch.tensor([8, 16], dtype=torch.int32, device=device))
    except Exception as e:  # e.g. a GPU older than sm_80, or a build without the kernel
        return f"torch._grouped_mm fails on {device}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return None


class AuxLossScaler(torch.autograd.Function):
    """Megatron's MoEAuxLossAutoScaler: returns output unchanged; in the backward the aux loss gets the gradient
    `scale` (1 / num_microbatches: the weight of the microbatch's LM loss in the step), so it trains without being
    added to the reported loss."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux_loss: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(aux_loss)
        ctx.scale = scale
        return output

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (aux_loss,) = ctx.saved_tensors
        return grad_output, torch.full_like(aux_loss, ctx.scale), None


def route(cfg: BenchConfig, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 logits [T, E] -> (probs [T, k], expert ids [T, k], the load-balancing + z losses (a scalar))."""
    k, num_experts = cfg.moe_router_topk, cfg.num_moe_experts
    scores = torch.softmax(logits, dim=-1)
    if cfg.moe_router_pre_softmax:
        probs, experts = torch.topk(scores, k, dim=-1)
    else:
        top_logits, experts = torch.topk(logits, k, dim=-1)
        probs = torch.softmax(top_logits, dim=-1)
    if cfg.moe_router_topk_scaling_factor:
        probs = probs * cfg.moe_router_topk_scaling_factor
    aux = logits.new_zeros(())
    if cfg.moe_router_load_balancing_type == "aux_loss" and cfg.moe_aux_loss_coeff:
        tokens = logits.shape[0]
        per_expert = torch.zeros(num_experts, dtype=logits.dtype, device=logits.device)
        per_expert = per_expert.index_add(0, experts.reshape(-1), torch.ones_like(probs).reshape(-1))
        aux = aux + (scores.sum(0) * per_expert).sum() * (num_experts * cfg.moe_aux_loss_coeff /
                                                          (k * tokens * tokens))
    if cfg.moe_z_loss_coeff:
        aux = aux + torch.logsumexp(logits, dim=-1).square().mean() * cfg.moe_z_loss_coeff
    return probs, experts, aux


class MoEMLP(nn.Module):
    """[b, s, hidden] -> [b, s, hidden]: router, dispatch, SwiGLU experts (impl: loop or grouped_mm), combine."""

    def __init__(self, cfg: BenchConfig, impl: str):
        super().__init__()
        if impl not in EXPERT_IMPLS:
            raise ValueError(f"expert implementation {impl!r}: choose from {', '.join(EXPERT_IMPLS)}")
        h, f, e = cfg.hidden_size, cfg.moe_ffn_hidden_size, cfg.num_moe_experts
        self.cfg, self.impl = cfg, impl
        self.router = nn.Parameter(torch.empty(e, h))  # fp32, used in fp32
        self.aux_grad_scale = 1.0  # set by the model: 1 / num_microbatches
        if impl == "grouped_mm":  # rows gate|up per expert, as nn.Linear's [out, in]
            self.fc1 = nn.Parameter(torch.empty(e, 2 * f, h))
            self.fc2 = nn.Parameter(torch.empty(e, h, f))
        else:
            self.fc1 = nn.ParameterList(nn.Parameter(torch.empty(2 * f, h)) for _ in range(e))
            self.fc2 = nn.ParameterList(nn.Parameter(torch.empty(h, f)) for _ in range(e))

    def expert_weights(self) -> list[tuple[torch.Tensor, bool]]:
        """(per-expert weight view, is an output projection) in a fixed order: every impl initialises alike."""
        views = []
        for e in range(self.cfg.num_moe_experts):
            views += [(self.fc1[e], False), (self.fc2[e], True)]
        return views

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        shape, k = x.shape, cfg.moe_router_topk
        x = x.reshape(-1, shape[-1])
        with torch.autocast(device_type=x.device.type, enabled=False):
            probs, experts, aux = route(cfg, F.linear(x.float(), self.router))
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)  # the (token, slot) pairs grouped by expert, token order kept
        permuted = x[order // k]  # [T k, hidden]
        counts = torch.zeros(cfg.num_moe_experts, dtype=torch.int32, device=x.device)
        counts = counts.index_add(0, flat, torch.ones_like(flat, dtype=torch.int32))
        if self.impl == "grouped_mm":
            y = self._grouped(permuted, counts)
        else:
            y = self._loop(permuted, counts)
        unpermuted = torch.empty_like(y).index_copy(0, order, y)  # back to (token, slot) order: a permutation
        out = (unpermuted.reshape(-1, k, shape[-1]) * probs.unsqueeze(-1).to(y.dtype)).sum(dim=1)
        out = out.reshape(shape)
        return AuxLossScaler.apply(out, aux, self.aux_grad_scale) if aux.requires_grad else out

    def _grouped(self, permuted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)  # each expert's end row, on the device
        bf16 = torch.bfloat16  # _grouped_mm takes bf16 only and has no autocast rule: cast as autocast would
        with torch.autocast(device_type=permuted.device.type, enabled=False):
            gate_up = torch._grouped_mm(permuted.to(bf16), self.fc1.to(bf16).transpose(-2, -1), offs=offsets)
            gate, up = gate_up.chunk(2, dim=-1)
            y = torch._grouped_mm(F.silu(gate) * up, self.fc2.to(bf16).transpose(-2, -1), offs=offsets)
        return y.to(permuted.dtype)

    def _loop(self, permuted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        outputs = []
        for e, rows in enumerate(permuted.split(counts.tolist())):  # the host sync: data-dependent sizes
            gate, up = F.linear(rows, self.fc1[e]).chunk(2, dim=-1)
            outputs.append(F.linear(F.silu(gate) * up, self.fc2[e]))
        return torch.cat(outputs)
