"""stepgraph's Llama training step in plain PyTorch: the recipe reader, the model and the step that
bench/torch_reference.py times (see its docstring for the math and the modes).
"""
from __future__ import annotations

import dataclasses
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_POOL_BATCHES = 4  # distinct batches, cycled: every mode sees the same batch at the same global step

# ----------------------------------------------------------------------------------------------- configuration
def _key(section: str, default):
    return dataclasses.field(default=default, metadata={"section": section})


@dataclasses.dataclass
class BenchConfig:
    """The recipe keys read (Megatron-Bridge names, recipe key = section.field); defaults as stepgraph's."""
    vocab_size: int = _key("model", 8192)
    num_layers: int = _key("model", 4)
    hidden_size: int = _key("model", 256)
    ffn_hidden_size: int = _key("model", None)  # None: 4 * hidden_size (Megatron)
    num_attention_heads: int = _key("model", 4)
    num_query_groups: int = _key("model", None)  # None: num_attention_heads (no GQA)
    seq_length: int = _key("model", 256)
    rotary_base: float = _key("model", 10000.0)
    layernorm_epsilon: float = _key("model", 1e-5)
    share_embeddings_and_output_weights: bool = _key("model", False)
    micro_batch_size: int = _key("train", 4)
    global_batch_size: int = _key("train", None)  # None: micro_batch_size (one microbatch)
    lr: float = _key("optimizer", 3e-4)
    weight_decay: float = _key("optimizer", 0.01)
    adam_beta1: float = _key("optimizer", 0.9)
    adam_beta2: float = _key("optimizer", 0.95)
    adam_eps: float = _key("optimizer", 1e-8)
    clip_grad: float = _key("optimizer", 1.0)  # <= 0: no clipping (Megatron)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def kv_dim(self) -> int:
        return self.head_dim * self.num_query_groups

    @property
    def num_microbatches(self) -> int:
        return self.global_batch_size // self.micro_batch_size

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_size * self.seq_length


RECIPE_KEYS = {f"{f.metadata['section']}.{f.name}": f for f in dataclasses.fields(BenchConfig)}
# --shrink: small enough for a CPU smoke run, still with GQA and two microbatches.
SHRINK_OVERRIDES = {"model.vocab_size": 512, "model.num_layers": 2, "model.hidden_size": 64,
                    "model.num_attention_heads": 4, "model.num_query_groups": 2, "model.ffn_hidden_size": 176,
                    "model.seq_length": 32, "train.micro_batch_size": 2, "train.global_batch_size": 4}


def _coerce(value, kind: str, where: str):
    """PyYAML reads `1e-5` (no dot) as a string, so numbers are converted here, with an error naming the key."""
    try:
        if kind == "bool":
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            if not isinstance(value, bool):
                raise ValueError
            return value
        if isinstance(value, bool):
            raise ValueError
        if kind == "int":
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise SystemExit(f"torch_reference: {where}: expected {kind}, got {value!r}") from None


def load_config(recipe: str | None, overrides: dict[str, object]) -> BenchConfig:
    cfg, doc = BenchConfig(), {}
    if recipe:
        import yaml  # only needed with a recipe
        try:
            with open(recipe, encoding="utf-8") as f:
                doc = yaml.safe_load(f) or {}
        except OSError as e:
            raise SystemExit(f"torch_reference: cannot read recipe {recipe}: {e.strerror}") from None
        if not isinstance(doc, dict):
            raise SystemExit(f"torch_reference: {recipe}: expected a mapping at the top level")
    model_section = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    for key in ("attention_dropout", "hidden_dropout"):
        if model_section.get(key):
            print(f"torch_reference: warning: {recipe}: model.{key} {model_section[key]} is ignored (no dropout here)",
                  file=sys.stderr)
    values = {}
    for key in RECIPE_KEYS:
        section = doc.get(key.split(".")[0])
        if isinstance(section, dict) and section.get(key.split(".")[1]) is not None:
            values[key] = (section[key.split(".")[1]], f"{recipe}: {key}")
    for key, value in overrides.items():
        if key not in RECIPE_KEYS:
            raise SystemExit(f"torch_reference: --set {key}: unknown key; known: {', '.join(RECIPE_KEYS)}")
        values[key] = (value, f"--set {key}")
    for key, (value, where) in values.items():
        field = RECIPE_KEYS[key]
        setattr(cfg, field.name, _coerce(value, field.type, where))
    if cfg.ffn_hidden_size is None:
        cfg.ffn_hidden_size = 4 * cfg.hidden_size
    if cfg.num_query_groups is None:
        cfg.num_query_groups = cfg.num_attention_heads
    if cfg.global_batch_size is None:
        cfg.global_batch_size = cfg.micro_batch_size
    problems = []
    if min(cfg.vocab_size, cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.num_attention_heads,
           cfg.num_query_groups, cfg.seq_length, cfg.micro_batch_size, cfg.global_batch_size) <= 0:
        problems.append("sizes must be positive")
    elif cfg.hidden_size % cfg.num_attention_heads or cfg.head_dim % 2:
        problems.append(f"hidden_size {cfg.hidden_size} / num_attention_heads {cfg.num_attention_heads} must be an "
                        "even head_dim (RoPE)")
    elif cfg.num_attention_heads % cfg.num_query_groups:
        problems.append(f"num_attention_heads {cfg.num_attention_heads} is not a multiple of num_query_groups "
                        f"{cfg.num_query_groups}")
    elif cfg.global_batch_size % cfg.micro_batch_size:
        problems.append(f"global_batch_size {cfg.global_batch_size} is not a multiple of micro_batch_size "
                        f"{cfg.micro_batch_size} (one GPU, no data parallelism)")
    if problems:
        raise SystemExit(f"torch_reference: {recipe or 'config'}: " + "; ".join(problems))
    return cfg


def model_flops_per_step(cfg: BenchConfig) -> int:
    """Model FLOPs of one step: 3 x forward (backward = 2 x forward); forward = 2 x tokens x matmul parameters (LM
    head included, embedding lookup not) + causal attention, QK^T and PV over the lower triangle: 2 x batch x seq^2
    x hidden per layer. Attention recompute in the backward is not counted."""
    h = cfg.hidden_size
    per_layer = h * (h + 2 * cfg.kv_dim) + h * h + 3 * h * cfg.ffn_hidden_size
    forward = 2 * cfg.tokens_per_step * (cfg.num_layers * per_layer + h * cfg.vocab_size)
    forward += cfg.num_layers * 2 * cfg.global_batch_size * cfg.seq_length ** 2 * h
    return 3 * forward


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


class Block(nn.Module):
    def __init__(self, cfg: BenchConfig, cos: torch.Tensor, sin: torch.Tensor, fused: bool):
        super().__init__()
        h, kv, f = cfg.hidden_size, cfg.kv_dim, cfg.ffn_hidden_size
        self.cfg, self.fused = cfg, fused
        self.input_layernorm = nn.Parameter(torch.ones(h))
        self.post_attention_layernorm = nn.Parameter(torch.ones(h))
        if fused:  # stepgraph's GEMM shapes: weight rows q|k|v and gate|up
            self.qkv_proj = nn.Linear(h, h + 2 * kv, bias=False)
            self.gate_up_proj = nn.Linear(h, 2 * f, bias=False)
        else:  # Hugging Face's separate projections
            self.q_proj, self.k_proj, self.v_proj = (nn.Linear(h, n, bias=False) for n in (h, kv, kv))
            self.gate_proj, self.up_proj = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        self.o_proj = nn.Linear(h, h, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def hf_views(self, prefix: str) -> list[tuple[str, torch.Tensor, bool]]:
        """(Hugging Face name, view into a parameter of this block, is an output projection)."""
        h, kv, f = self.cfg.hidden_size, self.cfg.kv_dim, self.cfg.ffn_hidden_size
        if self.fused:
            w, gu = self.qkv_proj.weight, self.gate_up_proj.weight
            q, k, v, gate, up = w[:h], w[h:h + kv], w[h + kv:], gu[:f], gu[f:]
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
        b, s, h = x.shape
        nh, ng, d, kv = cfg.num_attention_heads, cfg.num_query_groups, cfg.head_dim, cfg.kv_dim
        n1 = rms_norm(x, self.input_layernorm, cfg.layernorm_epsilon)
        if self.fused:
            q, k, v = self.qkv_proj(n1).split((h, kv, kv), dim=-1)
        else:
            q, k, v = self.q_proj(n1), self.k_proj(n1), self.v_proj(n1)
        q = apply_rope(q.reshape(b, s, nh, d), self.cos, self.sin).transpose(1, 2)
        k = apply_rope(k.reshape(b, s, ng, d), self.cos, self.sin).transpose(1, 2)
        v = v.reshape(b, s, ng, d).transpose(1, 2)
        gqa = {"enable_gqa": True} if ng != nh else {}
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, s, h))
        n2 = rms_norm(x, self.post_attention_layernorm, cfg.layernorm_epsilon)
        if self.fused:
            gate, up = self.gate_up_proj(n2).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(n2), self.up_proj(n2)
        return x + self.down_proj(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, cfg: BenchConfig, device, act_dtype=torch.bfloat16, fused: bool = True):
        super().__init__()
        self.cfg, self.act_dtype = cfg, act_dtype
        cos, sin = rope_tables(cfg, device, act_dtype)
        with torch.device(device):
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
            self.layers = nn.ModuleList(Block(cfg, cos, sin, fused) for _ in range(cfg.num_layers))
            self.norm = nn.Parameter(torch.ones(cfg.hidden_size))
            self.lm_head = None if cfg.share_embeddings_and_output_weights else nn.Linear(
                cfg.hidden_size, cfg.vocab_size, bias=False)
        self.graphed_layers = None  # the graphed_callables mode's replacements of self.layers

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
        """stepgraph's scheme: matrices ~ normal(0, std), o_proj/down_proj with std / sqrt(2 L), norms 1; drawn per
        Hugging Face tensor in a fixed order, so fused and separate projections start from the same values."""
        gen = torch.Generator(device=self.embed_tokens.weight.device).manual_seed(seed)
        scaled_std = std / math.sqrt(2 * self.cfg.num_layers)
        for _, view, output_projection in self.hf_views():
            if view.dim() == 1:
                view.fill_(1.0)
            else:
                view.normal_(0.0, scaled_std if output_projection else std, generator=gen)

    @torch.no_grad()
    def load_hf_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for name, view, _ in self.hf_views():
            view.copy_(state[name])

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


def build_optimizer(model: Llama, cfg: BenchConfig, capturable: bool) -> torch.optim.Optimizer:
    params = list(model.parameters())  # a tied embedding appears once
    groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                             fused=True, capturable=capturable)


class TrainStep:
    """One optimizer step, as stepgraph's: zero the grads; per microbatch forward (autocast bf16) and backward of
    loss / num_microbatches; global-norm clipping; fused AdamW. It reads static per-microbatch input buffers that
    feed() fills from a seeded pool of batches. A call returns the step loss (the mean of the microbatch losses) as a
    device tensor, without a host sync."""

    def __init__(self, model: Llama, cfg: BenchConfig, mode: str, seed: int):
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
