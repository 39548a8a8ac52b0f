"""The recipe reader of bench/torch_reference.py: the Megatron-Bridge keys it understands, their defaults (stepgraph's),
the checks with messages naming the key, the model family (llama, moe, hybrid) a recipe describes, its layer pattern
and its model FLOPs.
"""
from __future__ import annotations

import dataclasses
import math
import sys

FAMILIES = ("llama", "moe", "hybrid")
MLP_ACTIVATIONS = ("silu", "gelu", "squared_relu")
LAYER_LETTERS = "*-EM"  # Megatron's hybrid pattern: attention, MLP, MoE, Mamba


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
    kv_channels: int = _key("model", None)  # head dim; None: hidden_size / num_attention_heads
    qk_layernorm: bool = _key("model", False)  # RMSNorm over each query and key head (Qwen3)
    position_embedding_type: str = _key("model", None)  # rope or none; None: rope, none for hybrid (Megatron's)
    seq_length: int = _key("model", 256)
    rotary_base: float = _key("model", 10000.0)
    layernorm_epsilon: float = _key("model", 1e-5)
    share_embeddings_and_output_weights: bool = _key("model", False)
    # The MLP: Megatron's activation_func / gated_linear_unit pair; stepgraph's default SwiGLU. Other than SwiGLU only
    # in moe and hybrid models; the MoE experts (routed and shared) take the same pair: SwiGLU or Nemotron-H's
    # squared_relu, not gated.
    activation_func: str = _key("model", "silu")
    gated_linear_unit: bool = _key("model", True)
    # Mixture of Experts (the MLP of every GPT block, or the 'E' layers of a hybrid pattern); dropless only.
    num_moe_experts: int = _key("model", None)  # None or 0: dense
    moe_router_topk: int = _key("model", 2)
    moe_ffn_hidden_size: int = _key("model", None)  # None: ffn_hidden_size
    moe_layer_freq: int = _key("model", 1)  # every n-th GPT block is MoE (Megatron's int form)
    moe_router_score_function: str = _key("model", "softmax")  # softmax, sigmoid or sqrtsoftplus
    moe_router_pre_softmax: bool = _key("model", False)
    moe_router_topk_scaling_factor: float = _key("model", None)
    moe_router_load_balancing_type: str = _key("model", "aux_loss")  # aux_loss, seq_aux_loss or none
    moe_aux_loss_coeff: float = _key("model", 0.0)
    moe_z_loss_coeff: float = _key("model", None)
    moe_expert_capacity_factor: float = _key("model", None)  # None: dropless (the only kind timed here)
    moe_shared_expert_intermediate_size: int = _key("model", None)  # None or 0: no shared expert
    # The aux-loss-free balancing (sigmoid routing only): a per-expert bias on the selection, moved after every step.
    moe_router_enable_expert_bias: bool = _key("model", False)
    moe_router_bias_update_rate: float = _key("model", 0.001)
    # Hybrid Mamba2 models (Megatron's names); the chunk size is Megatron's fixed 128 unless overridden.
    hybrid_override_pattern: str = _key("model", None)
    # Megatron's is_hybrid_model: the output projections start with std / sqrt(num_layers), else / sqrt(2 num_layers).
    is_hybrid_model: bool = _key("model", False)
    mamba_state_dim: int = _key("model", 128)
    mamba_head_dim: int = _key("model", 64)
    mamba_num_groups: int = _key("model", 8)
    mamba_num_heads: int = _key("model", None)  # None: mamba_expand x hidden_size / mamba_head_dim
    mamba_expand: int = _key("model", 2)
    mamba_chunk_size: int = _key("model", 128)
    micro_batch_size: int = _key("train", 4)
    global_batch_size: int = _key("train", None)  # None: micro_batch_size (one microbatch)
    lr: float = _key("optimizer", 3e-4)
    weight_decay: float = _key("optimizer", 0.01)
    adam_beta1: float = _key("optimizer", 0.9)
    adam_beta2: float = _key("optimizer", 0.95)
    adam_eps: float = _key("optimizer", 1e-8)
    clip_grad: float = _key("optimizer", 1.0)  # <= 0: no clipping (Megatron)

    @property
    def output_init_std_divisor(self) -> float:
        """sqrt(num_layers) with is_hybrid_model, else sqrt(2 num_layers): stepgraph's (Megatron's) output-projection
        init is std over this."""
        return math.sqrt((1 if self.is_hybrid_model else 2) * self.num_layers)

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def q_dim(self) -> int:
        return self.head_dim * self.num_attention_heads

    @property
    def kv_dim(self) -> int:
        return self.head_dim * self.num_query_groups

    @property
    def num_microbatches(self) -> int:
        return self.global_batch_size // self.micro_batch_size

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_size * self.seq_length

    @property
    def family(self) -> str:
        if self.hybrid_override_pattern:
            return "hybrid"
        return "moe" if self.num_moe_experts else "llama"

    @property
    def layer_pattern(self) -> str:
        """One letter per layer: the hybrid pattern, or the GPT layout's attention + (MLP or MoE) per block."""
        if self.hybrid_override_pattern:
            return self.hybrid_override_pattern
        moe = [bool(self.num_moe_experts) and i % self.moe_layer_freq == 0 for i in range(self.num_layers)]
        return "".join("*E" if is_moe else "*-" for is_moe in moe)

    @property
    def mamba_d_inner(self) -> int:
        return self.mamba_num_heads * self.mamba_head_dim


RECIPE_KEYS = {f"{f.metadata['section']}.{f.name}": f for f in dataclasses.fields(BenchConfig)}
# --shrink: small enough for a CPU smoke run, still with GQA and two microbatches; per family.
SHRINK_OVERRIDES = {"model.vocab_size": 512, "model.num_layers": 2, "model.hidden_size": 64,
                    "model.num_attention_heads": 4, "model.num_query_groups": 2, "model.ffn_hidden_size": 176,
                    "model.seq_length": 32, "train.micro_batch_size": 2, "train.global_batch_size": 4}
SHRINK_FAMILY_OVERRIDES = {
    "llama": {},
    "moe": {"model.num_moe_experts": 4, "model.moe_router_topk": 2, "model.moe_ffn_hidden_size": 32,
            "model.moe_aux_loss_coeff": 0.01, "model.moe_z_loss_coeff": 0.001},
    "hybrid": {"model.hybrid_override_pattern": "M*-M", "model.num_layers": 4, "model.mamba_state_dim": 16,
               "model.mamba_head_dim": 16, "model.mamba_num_groups": 2, "model.mamba_chunk_size": 8},
}


def _coerce(value, kind: str, where: str):
    """PyYAML reads `1e-5` (no dot) as a string, so numbers are converted here, with an error naming the key."""
    try:
        if kind == "bool":
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            if not isinstance(value, bool):
                raise ValueError
            return value
        if kind == "str":
            if not isinstance(value, str):
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


def _read_recipe(recipe: str | None) -> dict:
    if not recipe:
        return {}
    import yaml  # only needed with a recipe
    try:
        with open(recipe, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    except OSError as e:
        raise SystemExit(f"torch_reference: cannot read recipe {recipe}: {e.strerror}") from None
    if not isinstance(doc, dict):
        raise SystemExit(f"torch_reference: {recipe}: expected a mapping at the top level")
    return doc


def load_config(recipe: str | None, overrides: dict[str, object], shrink: str | None = None) -> BenchConfig:
    """The recipe's keys, then --set overrides; shrink (a family, or "auto": the recipe's) applies the --shrink sizes
    after the recipe and before --set."""
    cfg, doc = BenchConfig(), _read_recipe(recipe)
    model_section = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    for key in ("attention_dropout", "hidden_dropout"):
        if model_section.get(key):
            print(f"torch_reference: warning: {recipe}: model.{key} {model_section[key]} is ignored (no dropout here)",
                  file=sys.stderr)
    values = {}
    for key in RECIPE_KEYS:
        section = doc.get(key.split(".")[0])
        name = key.split(".")[1]
        # Megatron writes `moe_expert_capacity_factor: null` for dropless: a null is the default, as if absent.
        if isinstance(section, dict) and section.get(name) is not None:
            values[key] = (section[name], f"{recipe}: {key}")
    if model_section.get("hybrid_override_pattern") is None and model_section.get("hybrid_layer_pattern"):
        values["model.hybrid_override_pattern"] = (model_section["hybrid_layer_pattern"],
                                                   f"{recipe}: model.hybrid_layer_pattern")
    if shrink:
        family = shrink
        if family == "auto":
            pattern = values.get("model.hybrid_override_pattern", (None,))[0]
            family = "hybrid" if pattern else "moe" if values.get("model.num_moe_experts", (0,))[0] else "llama"
        if family not in FAMILIES:
            raise SystemExit(f"torch_reference: --shrink {shrink}: choose auto or one of {', '.join(FAMILIES)}")
        pattern = values.get("model.hybrid_override_pattern", (None,))[0] or ""
        shrunk = {**SHRINK_OVERRIDES, **SHRINK_FAMILY_OVERRIDES[family]}
        if family == "hybrid" and "E" in pattern:  # keep the MoE layers (Nemotron 3's style), at the MoE sizes
            shrunk.update({**SHRINK_FAMILY_OVERRIDES["moe"], "model.hybrid_override_pattern": "ME*M"})
        if values.get("model.moe_shared_expert_intermediate_size", (None,))[0]:
            shrunk["model.moe_shared_expert_intermediate_size"] = 48
        for key, value in shrunk.items():
            values[key] = (value, f"--shrink {key}")
    for key, value in overrides.items():
        if key not in RECIPE_KEYS:
            raise SystemExit(f"torch_reference: --set {key}: unknown key; known: {', '.join(RECIPE_KEYS)}")
        values[key] = (value, f"--set {key}")
    for key, (value, where) in values.items():
        field = RECIPE_KEYS[key]
        setattr(cfg, field.name, None if value is None else _coerce(value, field.type, where))
    if cfg.ffn_hidden_size is None:
        cfg.ffn_hidden_size = 4 * cfg.hidden_size
    if cfg.num_query_groups is None:
        cfg.num_query_groups = cfg.num_attention_heads
    if cfg.global_batch_size is None:
        cfg.global_batch_size = cfg.micro_batch_size
    if cfg.moe_ffn_hidden_size is None:
        cfg.moe_ffn_hidden_size = cfg.ffn_hidden_size
    if cfg.position_embedding_type is None:
        cfg.position_embedding_type = "none" if cfg.hybrid_override_pattern else "rope"
    if cfg.mamba_num_heads is None and cfg.mamba_head_dim > 0:
        cfg.mamba_num_heads = cfg.mamba_expand * cfg.hidden_size // cfg.mamba_head_dim
    problems = _problems(cfg)
    if problems:
        raise SystemExit(f"torch_reference: {recipe or 'config'}: " + "; ".join(problems))
    return cfg


def _problems(cfg: BenchConfig) -> list[str]:
    if min(cfg.vocab_size, cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.num_attention_heads,
           cfg.num_query_groups, cfg.seq_length, cfg.micro_batch_size, cfg.global_batch_size) <= 0:
        return ["sizes must be positive"]
    if cfg.kv_channels is None and cfg.hidden_size % cfg.num_attention_heads:
        return [f"hidden_size {cfg.hidden_size} is not a multiple of num_attention_heads {cfg.num_attention_heads} "
                "(or set model.kv_channels)"]
    if cfg.position_embedding_type not in ("rope", "none"):
        return [f"model.position_embedding_type {cfg.position_embedding_type!r}: rope or none"]
    if cfg.activation_func not in MLP_ACTIVATIONS:
        return [f"model.activation_func {cfg.activation_func!r}: one of {', '.join(MLP_ACTIVATIONS)}"]
    if (cfg.activation_func, cfg.gated_linear_unit) != ("silu", True) and cfg.family == "llama":
        return [f"model.activation_func {cfg.activation_func} with gated_linear_unit {cfg.gated_linear_unit}: the "
                "llama models here are SwiGLU (silu, gated) only; other MLPs only in moe and hybrid models"]
    if cfg.position_embedding_type == "none" and cfg.family == "llama":
        return ["model.position_embedding_type none: the Llama models here always use RoPE"]
    if cfg.position_embedding_type == "rope" and cfg.head_dim % 2:
        return [f"head dim {cfg.head_dim} must be even (RoPE)"]
    if cfg.num_attention_heads % cfg.num_query_groups:
        return [f"num_attention_heads {cfg.num_attention_heads} is not a multiple of num_query_groups "
                f"{cfg.num_query_groups}"]
    if cfg.global_batch_size % cfg.micro_batch_size:
        return [f"global_batch_size {cfg.global_batch_size} is not a multiple of micro_batch_size "
                f"{cfg.micro_batch_size} (one GPU, no data parallelism)"]
    problems = []
    pattern = cfg.hybrid_override_pattern
    if pattern is not None:
        if any(c not in LAYER_LETTERS for c in pattern) or not pattern:
            problems.append(f"model.hybrid_override_pattern {pattern!r}: letters {LAYER_LETTERS} only "
                            "(M Mamba, * attention, - MLP, E MoE; no pipeline separators)")
        elif len(pattern) != cfg.num_layers:
            problems.append(f"model.hybrid_override_pattern {pattern!r} has {len(pattern)} layers but "
                            f"model.num_layers is {cfg.num_layers}: set them equal")
        if "E" in pattern and not cfg.num_moe_experts:
            problems.append("model.hybrid_override_pattern has E layers: set model.num_moe_experts")
    if "M" in cfg.layer_pattern:
        if min(cfg.mamba_state_dim, cfg.mamba_head_dim, cfg.mamba_num_groups, cfg.mamba_num_heads or 0,
               cfg.mamba_chunk_size) <= 0:
            problems.append("the mamba_* sizes must be positive")
        elif cfg.mamba_num_heads % cfg.mamba_num_groups:
            problems.append(f"model.mamba_num_heads {cfg.mamba_num_heads} is not a multiple of "
                            f"model.mamba_num_groups {cfg.mamba_num_groups}")
    if cfg.num_moe_experts:
        problems += _moe_problems(cfg)
    return problems


def _moe_problems(cfg: BenchConfig) -> list[str]:
    """What this PyTorch MoE does not implement is refused by name, never silently timed as something else."""
    problems = []
    if not 0 < cfg.moe_router_topk <= cfg.num_moe_experts:
        problems.append(f"model.moe_router_topk {cfg.moe_router_topk} must be in 1..num_moe_experts "
                        f"{cfg.num_moe_experts}")
    if cfg.moe_ffn_hidden_size <= 0 or cfg.moe_layer_freq <= 0:
        problems.append("model.moe_ffn_hidden_size and model.moe_layer_freq must be positive")
    if (cfg.activation_func, cfg.gated_linear_unit) not in (("silu", True), ("squared_relu", False)):
        problems.append(f"model.activation_func {cfg.activation_func} with gated_linear_unit {cfg.gated_linear_unit}: "
                        "the MoE experts here are silu with gated_linear_unit true (SwiGLU) or squared_relu with "
                        "gated_linear_unit false (Nemotron-H), as stepgraph's")
    if cfg.moe_router_score_function not in ("softmax", "sigmoid"):
        problems.append(f"model.moe_router_score_function {cfg.moe_router_score_function!r}: softmax or sigmoid here")
    if cfg.moe_router_load_balancing_type not in ("aux_loss", "seq_aux_loss", "none"):
        problems.append(f"model.moe_router_load_balancing_type {cfg.moe_router_load_balancing_type!r}: aux_loss, "
                        "seq_aux_loss or none here")
    if cfg.moe_router_enable_expert_bias and cfg.moe_router_score_function != "sigmoid":
        problems.append(f"model.moe_router_enable_expert_bias needs model.moe_router_score_function sigmoid, not "
                        f"{cfg.moe_router_score_function!r} (as Megatron)")
    if cfg.moe_router_enable_expert_bias and cfg.moe_router_bias_update_rate <= 0:
        problems.append(f"model.moe_router_bias_update_rate {cfg.moe_router_bias_update_rate}: must be > 0")
    if (cfg.moe_shared_expert_intermediate_size or 0) < 0:
        problems.append(f"model.moe_shared_expert_intermediate_size {cfg.moe_shared_expert_intermediate_size}: must "
                        "be positive (or null/0: no shared expert)")
    if cfg.moe_expert_capacity_factor is not None:
        problems.append("model.moe_expert_capacity_factor is set: only dropless MoE is timed here (set it to null)")
    return problems


def _mamba_forward_flops_per_token(cfg: BenchConfig) -> int:
    """in_proj, depthwise conv, out_proj, and the SSD chunked scan: per chunk of Q tokens, C B^T per group and
    (C B^T . decay) X per head over the causal half, plus each head's chunk state (B^T X) and its read-out (C state)."""
    h, d_inner, g, n = cfg.hidden_size, cfg.mamba_d_inner, cfg.mamba_num_groups, cfg.mamba_state_dim
    nh, p, q = cfg.mamba_num_heads, cfg.mamba_head_dim, cfg.mamba_chunk_size
    d_in_proj = 2 * d_inner + 2 * g * n + nh
    conv_dim = d_inner + 2 * g * n
    ssd = g * q * n + nh * q * p + 2 * nh * n * p  # multiply-adds; the causal halves of the Q x Q products
    return 2 * (h * d_in_proj + d_inner * h + 4 * conv_dim + ssd)


def model_flops_per_step(cfg: BenchConfig) -> int:
    """Model FLOPs of one step: 3 x forward (backward = 2 x forward); forward = 2 x tokens x matmul parameters (LM
    head included, embedding lookup not; for MoE the router, the top-k experts a token visits and the shared expert)
    + attention, QK^T and PV over the whole seq x seq square: 4 x batch x seq^2 x (heads x head_dim) per attention
    layer, the causal mask not discounted, as stepgraph's training_flops_per_step (train/metrics.h) and Megatron's
    MFU count it, so that both sides' TFLOP/s and MFU columns compare + the Mamba layers' scan
    (_mamba_forward_flops_per_token). Attention recompute in the backward is not counted."""
    h, tokens = cfg.hidden_size, cfg.tokens_per_step
    per_token = {"*": 2 * (h * (cfg.q_dim + 2 * cfg.kv_dim) + cfg.q_dim * h),
                 "-": 2 * (3 if cfg.gated_linear_unit else 2) * h * cfg.ffn_hidden_size}
    if cfg.num_moe_experts:  # stepgraph's MoeLayer::flops_per_token: router, k routed experts, the shared expert
        linears = 3 if cfg.gated_linear_unit else 2
        per_token["E"] = 2 * (h * cfg.num_moe_experts + linears * h * (
            cfg.moe_router_topk * cfg.moe_ffn_hidden_size + (cfg.moe_shared_expert_intermediate_size or 0)))
    if "M" in cfg.layer_pattern:
        per_token["M"] = _mamba_forward_flops_per_token(cfg)
    pattern = cfg.layer_pattern
    forward = tokens * (sum(per_token[c] for c in pattern) + 2 * h * cfg.vocab_size)
    forward += pattern.count("*") * 4 * cfg.global_batch_size * cfg.seq_length ** 2 * cfg.q_dim
    return 3 * forward
