"""A dropless Mixture-of-Experts MLP in plain PyTorch, as Megatron computes it, for bench/torch_reference.py.

Router (fp32, autocast off): logits = x W_r^T, as stepgraph's ref::moe_router_forward (src/reference/moe_router.h),
Megatron's topk_routing_with_score_function:
  softmax  moe_router_pre_softmax false: top-k of the logits, softmax over the k; true: softmax over all experts,
           top-k of that;
  sigmoid, sqrtsoftplus (score = sigmoid(logit) or sqrt(softplus(logit)))  the top-k of the logits (both scores are
           monotone), or with moe_router_enable_expert_bias the top-k of score + bias; probs = the score of the chosen
           experts over their sum (+1e-20) when k > 1;
then times moe_router_topk_scaling_factor. The expert bias (an fp32 buffer, no gradient) steers the choice only; after
each optimizer step it moves by rate * sign(mean - count) over the step's token counts (ExpertBiasStep: Megatron's
get_updated_expert_bias, stepgraph's ref::moe_expert_bias_update).
Load balancing (aux_loss, seq_aux_loss): stepgraph's ref::moe_aux_loss, Megatron's switch_load_balancing_loss_func
per group of S tokens (the microbatch, or each sequence), averaged over the G groups:
aux = coeff / G * sum_g E / (k S^2) * sum_e counts[g, e] * sum_{t in g} score[t, e], the scores softmax(logits) or
the elementwise scores / (their sum + 1e-20), the counts from the top-k WITHOUT the expert bias (Megatron routes with
the bias, balances without); the z-loss coeff * mean_t logsumexp(logits_t)^2. Both reach the gradients as Megatron's
MoEAuxLossAutoScaler does (identity on the layer output in the forward, d(loss)/d(aux) = the step's loss scale in the
backward), so the reported loss stays the LM loss.

Dispatch: the T x k (token, expert) pairs stably sorted by expert (a fixed T x k rows: dropless), the experts (SwiGLU:
FC1 [2F, H], rows gate|up; or Nemotron-H's squared ReLU, not gated: FC1 [F, H], relu(x)^2), then an unpermute by
gather and the probability-weighted sum over each token's k rows (no atomics in the forward), plus the shared expert
(moe_shared_expert_intermediate_size S: an MLP of width S with the experts' activation, on every token, not gated).
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
EXPERT_ACTIVATIONS = (("silu", True), ("squared_relu", False))  # (activation_func, gated_linear_unit)


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


def expert_activation(cfg: BenchConfig, h: torch.Tensor) -> torch.Tensor:
    """FC1's output -> FC2's input: silu(gate) * up (SwiGLU, rows gate|up) or relu(h)^2 (squared ReLU, not gated)."""
    if cfg.gated_linear_unit:
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up
    return F.relu(h).square()


def route(cfg: BenchConfig, logits: torch.Tensor,
          expert_bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 logits [T, E] (T: whole sequences of seq_length tokens, batch-major), the expert bias [E] or None ->
    (probs [T, k], expert ids [T, k], the load-balancing + z losses (a scalar)). torch.topk's order among equal values
    is unspecified (stepgraph's: the lower index first); only exactly equal fp32 keys tie."""
    k = cfg.moe_router_topk
    unbiased = None  # the top-k of the logits, what the aux loss balances
    if cfg.moe_router_score_function in ("sigmoid", "sqrtsoftplus"):
        scores = torch.sigmoid(logits) if cfg.moe_router_score_function == "sigmoid" else \
            torch.nn.functional.softplus(logits).sqrt()
        if expert_bias is not None:  # the bias steers the choice only: no gradient through the selection
            experts = torch.topk(scores.detach() + expert_bias, k, dim=-1).indices
        else:  # the scores are monotone: the logits choose as they do, without saturation ties
            unbiased = experts = torch.topk(logits, k, dim=-1).indices
        probs = scores.gather(1, experts)
        if k > 1:
            probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20)
    else:
        if expert_bias is not None:
            raise ValueError("model.moe_router_enable_expert_bias needs model.moe_router_score_function sigmoid or "
                             "sqrtsoftplus")
        scores = torch.softmax(logits, dim=-1)
        if cfg.moe_router_pre_softmax:
            probs, experts = torch.topk(scores, k, dim=-1)
        else:
            top_logits, experts = torch.topk(logits, k, dim=-1)
            probs = torch.softmax(top_logits, dim=-1)
        unbiased = experts
    if cfg.moe_router_topk_scaling_factor:
        probs = probs * cfg.moe_router_topk_scaling_factor
    aux = logits.new_zeros(())
    if cfg.moe_router_load_balancing_type in ("aux_loss", "seq_aux_loss") and cfg.moe_aux_loss_coeff:
        if unbiased is None:
            unbiased = torch.topk(logits, k, dim=-1).indices
        aux = aux + aux_loss(cfg, logits, scores, unbiased)
    if cfg.moe_z_loss_coeff:
        aux = aux + torch.logsumexp(logits, dim=-1).square().mean() * cfg.moe_z_loss_coeff
    return probs, experts, aux


def aux_loss(cfg: BenchConfig, logits: torch.Tensor, scores: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """stepgraph's ref::moe_aux_loss: G groups of S tokens (aux_loss: the microbatch; seq_aux_loss: each sequence),
    coeff / G * sum_g E / (k S^2) * sum_e counts[g, e] * sum_{t in g} score[t, e], counts held constant."""
    tokens, num_experts = logits.shape
    k = experts.shape[1]
    group = cfg.seq_length if cfg.moe_router_load_balancing_type == "seq_aux_loss" else tokens
    if tokens % group:
        raise ValueError(f"seq_aux_loss: {tokens} tokens are not whole sequences of model.seq_length {group}")
    groups = tokens // group
    if cfg.moe_router_score_function in ("sigmoid", "sqrtsoftplus"):  # normalised over all E experts
        scores = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
    index = experts  # each (token, slot)'s row of counts [G, E], flattened
    if groups > 1:
        index = torch.arange(tokens, device=logits.device).div(group, rounding_mode="floor").unsqueeze(1) * \
            num_experts + experts
    counts = torch.zeros(groups * num_experts, dtype=logits.dtype, device=logits.device).index_add(
        0, index.reshape(-1), torch.ones(tokens * k, dtype=logits.dtype, device=logits.device))
    per_group = scores.reshape(groups, group, num_experts).sum(dim=1) * counts.reshape(groups, num_experts)
    return per_group.sum() * (num_experts * cfg.moe_aux_loss_coeff / (k * group * group * groups))


class MoEMLP(nn.Module):
    """[b, s, hidden] -> [b, s, hidden]: router, dispatch, experts (impl: loop or grouped_mm), combine, + the shared
    expert."""

    def __init__(self, cfg: BenchConfig, impl: str):
        super().__init__()
        if impl not in EXPERT_IMPLS:
            raise ValueError(f"expert implementation {impl!r}: choose from {', '.join(EXPERT_IMPLS)}")
        if (cfg.activation_func, cfg.gated_linear_unit) not in EXPERT_ACTIVATIONS:
            raise ValueError(f"model.activation_func {cfg.activation_func} with gated_linear_unit "
                             f"{cfg.gated_linear_unit}: the experts here are silu gated (SwiGLU) or squared_relu not "
                             "gated (Nemotron-H)")
        h, f, e = cfg.hidden_size, cfg.moe_ffn_hidden_size, cfg.num_moe_experts
        width = (2 if cfg.gated_linear_unit else 1) * f  # FC1's rows: gate|up, or up alone
        self.cfg, self.impl = cfg, impl
        self.router = nn.Parameter(torch.empty(e, h))  # fp32, used in fp32
        self.aux_grad_scale = 1.0  # set by the model: 1 / num_microbatches
        if impl == "grouped_mm":  # as nn.Linear's [out, in] per expert
            self.fc1 = nn.Parameter(torch.empty(e, width, h))
            self.fc2 = nn.Parameter(torch.empty(e, h, f))
        else:
            self.fc1 = nn.ParameterList(nn.Parameter(torch.empty(width, h)) for _ in range(e))
            self.fc2 = nn.ParameterList(nn.Parameter(torch.empty(h, f)) for _ in range(e))
        shared = cfg.moe_shared_expert_intermediate_size or 0
        self.shared_fc1 = nn.Linear(h, (2 if cfg.gated_linear_unit else 1) * shared, bias=False) if shared else None
        self.shared_fc2 = nn.Linear(shared, h, bias=False) if shared else None
        bias = cfg.moe_router_enable_expert_bias  # buffers (None without): no gradient, not the optimizer's
        self.register_buffer("expert_bias", torch.zeros(e, dtype=torch.float32) if bias else None)
        self.register_buffer("step_counts", torch.zeros(e, dtype=torch.int64) if bias else None)

    def expert_weights(self) -> list[tuple[torch.Tensor, bool]]:
        """(per-expert weight view, is an output projection) in a fixed order, every impl initialises alike; the
        shared expert last (FC1, FC2: as a dense MLP's)."""
        views = []
        for e in range(self.cfg.num_moe_experts):
            views += [(self.fc1[e], False), (self.fc2[e], True)]
        if self.shared_fc1 is not None:
            views += [(self.shared_fc1.weight, False), (self.shared_fc2.weight, True)]
        return views

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        shape, k = x.shape, cfg.moe_router_topk
        x = x.reshape(-1, shape[-1])
        with torch.autocast(device_type=x.device.type, enabled=False):
            probs, experts, aux = route(cfg, F.linear(x.float(), self.router), self.expert_bias)
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)  # the (token, slot) pairs grouped by expert, token order kept
        permuted = x[order // k]  # [T k, hidden]
        counts = torch.zeros(cfg.num_moe_experts, dtype=torch.int32, device=x.device)
        counts = counts.index_add(0, flat, torch.ones_like(flat, dtype=torch.int32))
        if self.step_counts is not None:  # the step's tokens per expert (all microbatches), on the device
            self.step_counts.add_(counts)
        if self.impl == "grouped_mm":
            y = self._grouped(permuted, counts)
        else:
            y = self._loop(permuted, counts)
        unpermuted = torch.empty_like(y).index_copy(0, order, y)  # back to (token, slot) order: a permutation
        out = (unpermuted.reshape(-1, k, shape[-1]) * probs.unsqueeze(-1).to(y.dtype)).sum(dim=1)
        if self.shared_fc1 is not None:  # on every token, added ungated
            out = out + self.shared_fc2(expert_activation(cfg, self.shared_fc1(x)))
        out = out.reshape(shape)
        return AuxLossScaler.apply(out, aux, self.aux_grad_scale) if aux.requires_grad else out

    @torch.no_grad()
    def update_expert_bias(self) -> None:
        """bias += rate * sign(mean(counts) - counts) in exact integers (total - E count), as stepgraph's
        ref::moe_expert_bias_update; device ops only (no host sync), so a captured step can hold it."""
        diff = self.step_counts.sum() - self.cfg.num_moe_experts * self.step_counts
        self.expert_bias.add_(torch.sign(diff).to(self.expert_bias.dtype), alpha=self.cfg.moe_router_bias_update_rate)

    def _grouped(self, permuted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)  # each expert's end row, on the device
        bf16 = torch.bfloat16  # _grouped_mm takes bf16 only and has no autocast rule: cast as autocast would
        with torch.autocast(device_type=permuted.device.type, enabled=False):
            h = torch._grouped_mm(permuted.to(bf16), self.fc1.to(bf16).transpose(-2, -1), offs=offsets)
            y = torch._grouped_mm(expert_activation(self.cfg, h), self.fc2.to(bf16).transpose(-2, -1), offs=offsets)
        return y.to(permuted.dtype)

    def _loop(self, permuted: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        outputs = []
        for e, rows in enumerate(permuted.split(counts.tolist())):  # the host sync: data-dependent sizes
            outputs.append(F.linear(expert_activation(self.cfg, F.linear(rows, self.fc1[e])), self.fc2[e]))
        return torch.cat(outputs)


class ExpertBiasStep:
    """A training step (bench/torch_llama.py's TrainStep; its other attributes pass through) with the aux-loss-free
    expert-bias update: the counts zeroed, the step (every microbatch's forward adds its counts), then each MoE layer's
    update_expert_bias after the optimizer step, as stepgraph's MoeLayer::step_begin / step_end. All of it is device
    work without a host sync, so the whole-step capture (cuda_graph) records and replays it with the step; in
    graphed_callables and compile* modes the layers' forwards add the counts inside their graphs (buffers: static
    addresses) and the zeroing and the update run eagerly around the step. Zeroing first also drops the counts of
    untimed forwards (make_graphed_callables' warmup)."""

    def __init__(self, step, layers: list[MoEMLP]):
        self.step, self.layers = step, layers

    def __getattr__(self, name: str):
        return getattr(self.step, name)

    def __call__(self) -> torch.Tensor:
        for layer in self.layers:
            layer.step_counts.zero_()
        loss = self.step()
        for layer in self.layers:
            layer.update_expert_bias()
        return loss


def with_expert_bias_update(step, model: nn.Module):
    """The step itself, or an ExpertBiasStep around it where the model's MoE layers have the expert bias."""
    layers = [m for m in model.modules() if isinstance(m, MoEMLP) and m.expert_bias is not None]
    return ExpertBiasStep(step, layers) if layers else step
