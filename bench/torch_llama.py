"""stepgraph's Llama training step in plain PyTorch: the model and the step that bench/torch_reference.py times (see
its docstring for the math and the modes), and what the MoE and hybrid models (bench/torch_stack.py) share with it:
RMSNorm, RoPE, causal attention, the decoder's embedding/head/loss (DecoderLM) and the training step.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_config import BenchConfig

DATA_POOL_BATCHES = 4  # distinct batches, cycled: every mode sees the same batch at the same global step

# ----------------------------------------------------------------------------------------------------- model
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """y = w * (x * rsqrt(mean(x^2) + eps)) in fp32, returned in x's dtype (stepgraph's RMSNorm). Autocast is off
    here so that its policy for rms_norm cannot move the computation to bf16."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        return F.rms_norm(x.float(), (x.shape[-1],), weight, eps).to(x.dtype)


def rope_tables(cfg: BenchConfig, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [seq, 1, head_dim]: angle = pos * base^(-2i/d) for i < d/2, repeated for the second half."""
    d = cfg.head_dim
    inv_freq = cfg.rotary_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.outer(torch.arange(cfg.seq_length, dtype=torch.float64), inv_freq)
    angle = torch.cat((angle, angle), dim=-1)[:, None, :]
    return angle.cos().to(device=device, dtype=dtype), angle.sin().to(device=device, dtype=dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF rotate-half on x [batch, seq, heads, head_dim]: out = x cos + rotate_half(x) sin (in x's dtype, as HF)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def causal_attention(cfg: BenchConfig, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rope, q_norm=None,
                     k_norm=None) -> torch.Tensor:
    """q [b, s, heads x d], k, v [b, s, groups x d] -> [b, s, heads x d]: optional per-head RMSNorm of q and k
    (qk_layernorm), RoPE when rope = (cos, sin), causal SDPA with GQA."""
    b, s, _ = q.shape
    nh, ng, d = cfg.num_attention_heads, cfg.num_query_groups, cfg.head_dim
    q, k, v = q.reshape(b, s, nh, d), k.reshape(b, s, ng, d), v.reshape(b, s, ng, d)
    if q_norm is not None:
        q, k = rms_norm(q, q_norm, cfg.layernorm_epsilon), rms_norm(k, k_norm, cfg.layernorm_epsilon)
    if rope is not None:
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
    gqa = {"enable_gqa": True} if ng != nh else {}
    attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                          **gqa)
    return attn.transpose(1, 2).reshape(b, s, nh * d)


class Block(nn.Module):
    def __init__(self, cfg: BenchConfig, cos: torch.Tensor, sin: torch.Tensor, fused: bool):
        super().__init__()
        h, q, kv, f = cfg.hidden_size, cfg.q_dim, cfg.kv_dim, cfg.ffn_hidden_size
        self.cfg, self.fused = cfg, fused
        self.input_layernorm = nn.Parameter(torch.ones(h))
        self.post_attention_layernorm = nn.Parameter(torch.ones(h))
        if fused:  # stepgraph's GEMM shapes: weight rows q|k|v and gate|up
            self.qkv_proj = nn.Linear(h, q + 2 * kv, bias=False)
            self.gate_up_proj = nn.Linear(h, 2 * f, bias=False)
        else:  # Hugging Face's separate projections
            self.q_proj, self.k_proj, self.v_proj = (nn.Linear(h, n, bias=False) for n in (q, kv, kv))
            self.gate_proj, self.up_proj = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        self.o_proj = nn.Linear(q, h, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def hf_views(self, prefix: str) -> list[tuple[str, torch.Tensor, bool]]:
        """(Hugging Face name, view into a parameter of this block, is an output projection)."""
        q_dim, kv, f = self.cfg.q_dim, self.cfg.kv_dim, self.cfg.ffn_hidden_size
        if self.fused:
            w, gu = self.qkv_proj.weight, self.gate_up_proj.weight
            q, k, v, gate, up = w[:q_dim], w[q_dim:q_dim + kv], w[q_dim + kv:], gu[:f], gu[f:]
        else:
            q, k, v = self.q_proj.weight, self.k_proj.weight, self.v_proj.weight
            gate, up = self.gate_proj.weight, self.up_proj.weight
        views = [("self_attn.q_proj", q, False), ("self_attn.k_proj", k, False), ("self_attn.v_proj", v, False),
                 ("self_attn.o_proj", self.o_proj.weight, True), ("mlp.gate_proj", gate, False),
                 ("mlp.up_proj", up, False), ("mlp.down_proj", self.down_proj.weight, True),
                 ("input_layernorm", self.input_layernorm, False),
                 ("post_attention_layernorm", self.post_attention_layernorm, False)]
        return [(f"{prefix}{name}.weight", view, out) for name, view, out in views]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        q_dim, kv = cfg.q_dim, cfg.kv_dim
        n1 = rms_norm(x, self.input_layernorm, cfg.layernorm_epsilon)
        if self.fused:
            q, k, v = self.qkv_proj(n1).split((q_dim, kv, kv), dim=-1)
        else:
            q, k, v = self.q_proj(n1), self.k_proj(n1), self.v_proj(n1)
        x = x + self.o_proj(causal_attention(cfg, q, k, v, (self.cos, self.sin)))
        n2 = rms_norm(x, self.post_attention_layernorm, cfg.layernorm_epsilon)
        if self.fused:
            gate, up = self.gate_up_proj(n2).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(n2), self.up_proj(n2)
        return x + self.down_proj(F.silu(gate) * up)


class DecoderLM(nn.Module):
    """embedding -> the layers (each [b, s, hidden] -> same) -> RMSNorm -> LM head -> masked mean cross-entropy. The
    layers come from make_layers(), called on the target device."""

    def __init__(self, cfg: BenchConfig, device, act_dtype, make_layers):
        super().__init__()
        self.cfg, self.act_dtype = cfg, act_dtype
        with torch.device(device):
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
            self.layers = nn.ModuleList(make_layers())
            self.norm = nn.Parameter(torch.ones(cfg.hidden_size))
            self.lm_head = None if cfg.share_embeddings_and_output_weights else nn.Linear(
                cfg.hidden_size, cfg.vocab_size, bias=False)
        self.graphed_layers = None  # the graphed_callables mode's replacements of self.layers

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tokens).to(self.act_dtype)  # a bf16 residual stream, as stepgraph's activations
        for layer in self.graphed_layers or self.layers:
            x = layer(x)
        head = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(rms_norm(x, self.norm, self.cfg.layernorm_epsilon), head)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
        """Masked mean cross-entropy of one microbatch, sum(mask * ce) / max(sum(mask), 1), in fp32."""
        logits = self.logits(tokens)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), reduction="none")
        mask = loss_mask.reshape(-1)
        return (ce * mask).sum() / mask.sum().clamp(min=1.0)


class Llama(DecoderLM):
    def __init__(self, cfg: BenchConfig, device, act_dtype=torch.bfloat16, fused: bool = True):
        cos, sin = rope_tables(cfg, device, act_dtype)
        super().__init__(cfg, device, act_dtype, lambda: [Block(cfg, cos, sin, fused) for _ in range(cfg.num_layers)])

    def hf_views(self) -> list[tuple[str, torch.Tensor, bool]]:
        views = [("model.embed_tokens.weight", self.embed_tokens.weight, False)]
        for i, layer in enumerate(self.layers):
            views += layer.hf_views(f"model.layers.{i}.")
        views.append(("model.norm.weight", self.norm, False))
        if self.lm_head is not None:
            views.append(("lm_head.weight", self.lm_head.weight, False))
        return views

    @torch.no_grad()
    def init_weights(self, seed: int, std: float = 0.02) -> None:
        """stepgraph's scheme: matrices ~ normal(0, std), o_proj/down_proj with std / sqrt(2 L) (/ sqrt(L) with
        model.is_hybrid_model), norms 1; drawn per Hugging Face tensor in a fixed order, so fused and separate
        projections start from the same values."""
        gen = torch.Generator(device=self.embed_tokens.weight.device).manual_seed(seed)
        scaled_std = std / self.cfg.output_init_std_divisor
        for _, view, output_projection in self.hf_views():
            if view.dim() == 1:
                view.fill_(1.0)
            else:
                view.normal_(0.0, scaled_std if output_projection else std, generator=gen)

    @torch.no_grad()
    def load_hf_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for name, view, _ in self.hf_views():
            view.copy_(state[name])


def build_optimizer(model: DecoderLM, cfg: BenchConfig, capturable: bool) -> torch.optim.Optimizer:
    params = list(model.parameters())  # a tied embedding appears once
    # Decay on matrices (and the MoE experts' and Mamba conv's stacked ones); none on norms, biases, A_log, D, dt_bias.
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                             fused=True, capturable=capturable)


class TrainStep:
    """One optimizer step, as stepgraph's: zero the grads; per microbatch forward (autocast bf16) and backward of
    loss / num_microbatches; global-norm clipping; fused AdamW. It reads static per-microbatch input buffers that
    feed() fills from a seeded pool of batches. A call returns the step loss (the mean of the microbatch losses) as a
    device tensor, without a host sync."""

    def __init__(self, model: DecoderLM, cfg: BenchConfig, mode: str, seed: int):
        device = model.embed_tokens.weight.device
        self.model, self.cfg, self.mode, self.nmb = model, cfg, mode, cfg.num_microbatches
        self.opt = build_optimizer(model, cfg, capturable=(mode == "cuda_graph"))
        self.params = list(model.parameters())
        self.foreach_clip = True if device.type == "cuda" else None
        # graphed_callables and compile_reduce_overhead return parameter gradients in CUDA-graph memory that the
        # next replay overwrites, and autograd's first accumulation into a None .grad steals (aliases) it: with two
        # microbatches .grad would end as 2 g2 instead of g1 + g2. Persistent .grad buffers, zeroed at the start of
        # each step and added into (stepgraph's own scheme), avoid that; with one microbatch the default is safe.
        self.persistent_grads = self.nmb > 1 and mode in ("graphed_callables", "compile_reduce_overhead")
        if self.persistent_grads:
            for param in self.params:
                param.grad = torch.zeros_like(param)
        shape = (cfg.micro_batch_size, cfg.seq_length)
        self.tokens = [torch.zeros(shape, dtype=torch.long, device=device) for _ in range(self.nmb)]
        self.labels = [torch.zeros(shape, dtype=torch.long, device=device) for _ in range(self.nmb)]
        self.masks = [torch.ones(shape, dtype=torch.float32, device=device) for _ in range(self.nmb)]
        gen = torch.Generator().manual_seed(seed + 1)
        self.pool = torch.randint(0, cfg.vocab_size, (DATA_POOL_BATCHES, self.nmb, cfg.micro_batch_size,
                                                      cfg.seq_length + 1), generator=gen).to(device)
        self.forward = model
        if mode == "compile":
            self.forward = torch.compile(model)
        elif mode == "compile_reduce_overhead":
            self.forward = torch.compile(model, mode="reduce-overhead")

    def autocast(self):
        """One context per microbatch forward, the backward outside it (the AMP docs' pattern). The weight-cast
        cache is off: make_graphed_callables requires that, and with one forward per context it saves nothing."""
        return torch.autocast(device_type=self.model.embed_tokens.weight.device.type, dtype=torch.bfloat16,
                              enabled=self.model.act_dtype == torch.bfloat16, cache_enabled=False)

    def feed(self, global_step: int) -> None:
        batch = self.pool[global_step % DATA_POOL_BATCHES]
        for m in range(self.nmb):
            self.tokens[m].copy_(batch[m, :, :-1])
            self.labels[m].copy_(batch[m, :, 1:])

    def __call__(self) -> torch.Tensor:
        if self.mode == "compile_reduce_overhead":
            torch.compiler.cudagraph_mark_step_begin()
        # set_to_none is PyTorch's default; inside the whole-step capture it is host-only, the captured backward
        # allocates the grads from the graph's pool and every replay overwrites them.
        self.opt.zero_grad(set_to_none=not self.persistent_grads)
        total = None
        for m in range(self.nmb):
            with self.autocast():
                loss = self.forward(self.tokens[m], self.labels[m], self.masks[m])
            (loss / self.nmb).backward()
            total = loss.detach().clone() if total is None else total + loss.detach()  # not graph-owned memory
            del loss
        if self.cfg.clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_grad, foreach=self.foreach_clip)
        self.opt.step()
        return total / self.nmb
