"""The Mamba2 mixer (Megatron's MambaMixer math) for bench/torch_reference.py's hybrid model, two ways:

  mamba_ssm  mamba_ssm 2.3.2's Mamba2 module with its Triton SSD scan (mamba_chunk_scan_combined) and Triton gated
             RMSNorm: the fastest public Mamba2 a PyTorch user gets without the compiled causal_conv1d/selective_scan
             extensions: use_mem_eff_path=False and the nn.Conv1d fallback (bench/mamba_ssm_src.py loads it);
  torch      pure PyTorch, as Hugging Face's NemotronH/Mamba2 torch_forward: the chunked SSD as einsums over chunks.

Both have the same parameters under the same names (in_proj, conv1d, dt_bias, A_log, D, norm.weight, out_proj), so
one init gives both the same start. Math: in_proj -> [z, x, B, C, dt]; depthwise causal conv1d (width 4) + SiLU over
x|B|C; dt = softplus(dt + dt_bias); A = -exp(A_log); the SSD scan with the D skip; y = RMSNorm_grouped(y * silu(z))
(norm after the gate, groups of d_inner / ngroups); out_proj.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_config import BenchConfig

MAMBA_IMPLS = ("mamba_ssm", "torch")
CONV_WIDTH = 4
NORM_EPS = 1e-5  # mamba_ssm's and Megatron's gated RMSNorm epsilon


def ssd_chunked(x, dt, A, B, C, chunk: int) -> torch.Tensor:
    """The SSD chunked scan without the D skip. x [b, l, h, p], dt [b, l, h] (after softplus), A [h] (negative),
    B, C [b, l, g, n] -> y [b, l, h, p]: h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t^T, y_t = C_t h_t, computed per chunk
    of `chunk` steps: the intra-chunk part as a masked decay matrix, the chunk states passed between chunks."""
    b, length, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    pad = (-length) % chunk
    if pad:  # dt = 0 in the padding: no decay, no input
        x, dt, B, C = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, B, C))
    c = x.shape[1] // chunk
    xdt = (x * dt.unsqueeze(-1).to(x.dtype)).reshape(b, c, chunk, h, p)
    a_cum = torch.cumsum((dt.float() * A.float()).reshape(b, c, chunk, h).permute(0, 3, 1, 2), dim=-1)  # [b,h,c,q]
    B, C = B.reshape(b, c, chunk, g, n), C.reshape(b, c, chunk, g, n)
    B_h, C_h = (t.repeat_interleave(h // g, dim=3) for t in (B, C))  # each head reads its group's B, C

    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    decay = torch.exp((a_cum.unsqueeze(-1) - a_cum.unsqueeze(-2)).masked_fill(~causal, -math.inf))  # [b,h,c,i,j]
    scores = torch.einsum("bcign,bcjgn->bcgij", C, B).repeat_interleave(h // g, dim=2)  # [b,c,h,i,j]
    y_diag = torch.einsum("bchij,bcjhp->bcihp", scores * decay.permute(0, 2, 1, 3, 4).to(scores.dtype), xdt)

    decay_to_end = torch.exp(a_cum[..., -1:] - a_cum)  # [b,h,c,q]
    states = torch.einsum("bcjhn,bhcj,bcjhp->bchpn", B_h, decay_to_end.to(B_h.dtype), xdt)
    totals = F.pad(torch.cumsum(a_cum[..., -1], dim=-1), (1, 0))  # [b,h,c+1]: log-decay before each chunk
    before = torch.ones(c, c, dtype=torch.bool, device=x.device).tril(-1)
    carry = torch.exp((totals[..., :-1, None] - totals[..., None, 1:]).masked_fill(~before, -math.inf))  # [b,h,z,c]
    entering = torch.einsum("bhzc,bchpn->bzhpn", carry.to(states.dtype), states)  # the state entering chunk z
    y_off = torch.einsum("bcihn,bchpn,bhci->bcihp", C_h, entering, torch.exp(a_cum).to(C_h.dtype))
    return (y_diag + y_off).reshape(b, c * chunk, h, p)[:, :length]


def gated_rms_norm(y: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, group_size: int) -> torch.Tensor:
    """RMSNorm over groups of group_size channels of y * silu(z) (norm after the gate), in fp32, back in y's dtype."""
    with torch.autocast(device_type=y.device.type, enabled=False):
        gated = y.float() * F.silu(z.float())
        grouped = gated.reshape(*gated.shape[:-1], -1, group_size)
        normed = grouped * torch.rsqrt(grouped.square().mean(-1, keepdim=True) + NORM_EPS)
        return (normed.reshape(gated.shape) * weight).to(y.dtype)


class _GatedNormWeight(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


class TorchMamba2(nn.Module):
    """The pure-PyTorch mixer; parameters as mamba_ssm's Mamba2 (bias-free projections, conv with bias)."""

    def __init__(self, cfg: BenchConfig):
        super().__init__()
        h, d_inner, g, n, nh = (cfg.hidden_size, cfg.mamba_d_inner, cfg.mamba_num_groups, cfg.mamba_state_dim,
                                cfg.mamba_num_heads)
        self.cfg = cfg
        self.conv_dim = d_inner + 2 * g * n
        self.in_proj = nn.Linear(h, 2 * d_inner + 2 * g * n + nh, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, CONV_WIDTH, groups=self.conv_dim,
                                padding=CONV_WIDTH - 1, bias=True)
        self.dt_bias = nn.Parameter(torch.zeros(nh))
        self.A_log = nn.Parameter(torch.zeros(nh))
        self.D = nn.Parameter(torch.ones(nh))
        self.norm = _GatedNormWeight(d_inner)
        self.out_proj = nn.Linear(d_inner, h, bias=False)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        b, length, _ = u.shape
        d_inner, gn, nh, p = cfg.mamba_d_inner, cfg.mamba_num_groups * cfg.mamba_state_dim, cfg.mamba_num_heads, \
            cfg.mamba_head_dim
        z, xbc, dt = self.in_proj(u).split((d_inner, self.conv_dim, nh), dim=-1)
        xbc = F.silu(self.conv1d(xbc.transpose(1, 2))[..., :length].transpose(1, 2))
        x, B, C = xbc.split((d_inner, gn, gn), dim=-1)
        dt = F.softplus(dt.float() + self.dt_bias.float())
        A = -torch.exp(self.A_log.float())
        x = x.reshape(b, length, nh, p)
        y = ssd_chunked(x, dt, A, B.reshape(b, length, cfg.mamba_num_groups, -1),
                        C.reshape(b, length, cfg.mamba_num_groups, -1), cfg.mamba_chunk_size)
        y = y + x * self.D.to(x.dtype).unsqueeze(-1)
        y = gated_rms_norm(y.reshape(b, length, d_inner), z, self.norm.weight, d_inner // cfg.mamba_num_groups)
        return self.out_proj(y)


def mamba_ssm_mixer(cfg: BenchConfig, src_root: str | None, layer_idx: int) -> nn.Module:
    """mamba_ssm's Mamba2 with Megatron's MambaMixer settings, loaded from source (bench/mamba_ssm_src.py)."""
    import mamba_ssm_src
    module = mamba_ssm_src.load("modules.mamba2", src_root)
    module.causal_conv1d_fn = None  # the nn.Conv1d fallback even where the causal_conv1d package is installed
    d_inner, h = cfg.mamba_d_inner, cfg.hidden_size
    if d_inner % h:
        raise ValueError(f"mamba_ssm's Mamba2 needs d_inner = expand x hidden: mamba_num_heads {cfg.mamba_num_heads} x "
                         f"mamba_head_dim {cfg.mamba_head_dim} = {d_inner} is not a multiple of hidden_size {h}")
    return module.Mamba2(d_model=h, d_state=cfg.mamba_state_dim, d_conv=CONV_WIDTH, expand=d_inner // h,
                         headdim=cfg.mamba_head_dim, ngroups=cfg.mamba_num_groups, rmsnorm=True,
                         norm_before_gate=False, bias=False, conv_bias=True, chunk_size=cfg.mamba_chunk_size,
                         use_mem_eff_path=False, layer_idx=layer_idx)


def make_mixer(cfg: BenchConfig, impl: str, src_root: str | None, layer_idx: int) -> nn.Module:
    if impl == "torch":
        return TorchMamba2(cfg)
    if impl == "mamba_ssm":
        return mamba_ssm_mixer(cfg, src_root, layer_idx)
    raise ValueError(f"Mamba2 implementation {impl!r}: choose from {', '.join(MAMBA_IMPLS)}")


@torch.no_grad()
def init_mixer(mixer: nn.Module, gen: torch.Generator, std: float, out_std: float) -> None:
    """Megatron's MambaMixer init, drawn from gen in a fixed order: projections normal, conv uniform(+-1/sqrt(width))
    (PyTorch's default bound for a depthwise conv), dt = exp(uniform(log 0.001, log 0.1)) floored at 1e-4 stored as
    softplus^-1, A = uniform(1, 16) stored as log, D and the norm weight 1."""
    mixer.in_proj.weight.normal_(0.0, std, generator=gen)
    mixer.out_proj.weight.normal_(0.0, out_std, generator=gen)
    bound = 1.0 / math.sqrt(CONV_WIDTH)
    mixer.conv1d.weight.uniform_(-bound, bound, generator=gen)
    mixer.conv1d.bias.uniform_(-bound, bound, generator=gen)
    u = torch.rand(mixer.dt_bias.shape, generator=gen, device=gen.device)
    dt = torch.exp(u * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
    mixer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
    mixer.A_log.copy_(torch.log(torch.empty_like(mixer.A_log).uniform_(1.0, 16.0, generator=gen)))
    mixer.D.fill_(1.0)
    mixer.norm.weight.fill_(1.0)
