#!/usr/bin/env python3
"""CPU checks of bench/torch_reference.py's MoE and hybrid models (not run in CI: it needs torch; the mamba_ssm
checks need scripts/fetch_mamba_ssm.sh's third_party/mamba_ssm-2.3.2, else they are skipped).

  python3 tests/bench/torch_models_smoke.py [--skip-cli]

  1. the SSD chunked scan (torch path) equals a step-by-step recurrence in fp64 (several chunks, a ragged last chunk,
     grouped B/C), and mamba_ssm's own ssd_minimal_discrete;
  2. the gated grouped RMSNorm equals mamba_ssm's rms_norm_ref (norm after the gate);
  3. the pure-PyTorch mixer equals mamba_ssm's Mamba2 module (same state dict, its Triton calls replaced by
     mamba_ssm's pure-PyTorch references): split order, conv, dt, D, norm, projections; and transformers'
     NemotronH Mamba2 mixer (its PyTorch path), when transformers is installed;
  4. MoE: routing and aux/z losses against Megatron's formulas written out (softmax; sigmoid with and without the
     expert bias; seq_aux_loss); the aux loss reaches the gradients with the microbatch's weight but not the loss;
     the shared expert and squared-ReLU experts written out; loop and grouped_mm experts give the same outputs and
     gradients (SwiGLU, and Nemotron 3's squared ReLU with a shared expert), also with an expert that gets no token;
     the expert-bias update after a step of two microbatches;
  5. a GPT-layout stack with dense MLPs equals Llama with the same weights;
  6. recipe checks: MoE/hybrid keys, refused settings;
  7. the CLI end to end for a MoE and a hybrid model, and both with Nemotron 3's MoE settings (CUDA modes skipped on
     the CPU).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a clear line instead of a traceback (--help included) where PyTorch is missing
    sys.exit(f"error: {e}: tests/bench/torch_models_smoke.py needs PyTorch, which the GPU machine has")

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, BENCH)
sys.dont_write_bytecode = True  # no __pycache__ in bench/
import mamba_ssm_src  # noqa: E402
import torch_moe  # noqa: E402
from torch_config import load_config  # noqa: E402
from torch_config import model_flops_per_step  # noqa: E402
from torch_llama import Llama, TrainStep  # noqa: E402
from torch_mamba2 import TorchMamba2, gated_rms_norm, init_mixer, mamba_ssm_mixer, ssd_chunked  # noqa: E402
from torch_stack import StackLM  # noqa: E402
from smoke_util import check, finish, rel_err  # noqa: E402  (this folder is on sys.path: the script's own)

HAVE_MAMBA_SRC = os.path.isdir(os.path.join(mamba_ssm_src.DEFAULT_SRC, "mamba_ssm"))


def ssd_recurrence(x, dt, A, B, C):
    """h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T per head; y_t = h_t C_t; fp64, one step at a time."""
    b, length, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    x, dt, A, B, C = (t.double() for t in (x, dt, A, B, C))
    state = torch.zeros(b, h, p, n, dtype=torch.float64)
    ys = []
    for t in range(length):
        Bh, Ch = B[:, t].repeat_interleave(h // g, 1), C[:, t].repeat_interleave(h // g, 1)  # [b, h, n]
        state = torch.exp(dt[:, t] * A)[..., None, None] * state + (dt[:, t, :, None] * x[:, t])[..., None] * \
            Bh[:, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", state, Ch))
    return torch.stack(ys, dim=1)


def random_ssd_inputs(b=2, length=37, h=4, p=8, g=2, n=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, length, h, p, generator=gen)
    dt = 0.001 + 0.2 * torch.rand(b, length, h, generator=gen)
    A = -(1.0 + 7.0 * torch.rand(h, generator=gen))
    B, C = (0.5 * torch.randn(b, length, g, n, generator=gen) for _ in range(2))
    return x, dt, A, B, C


def check_ssd() -> None:
    x, dt, A, B, C = random_ssd_inputs()
    want = ssd_recurrence(x, dt, A, B, C)
    for chunk in (8, 16, 64):
        err = rel_err(ssd_chunked(x, dt, A, B, C, chunk), want)
        check(err < 1e-5, f"SSD chunked scan (chunk {chunk}, seq 37) equals the recurrence: rel err {err:.1e}")
    wrong = rel_err(ssd_chunked(x, dt, A * 1.01, B, C, 8), want)
    check(wrong > 1e-4, f"the comparison sees a 1% change of A: rel err {wrong:.1e}")
    if not HAVE_MAMBA_SRC:
        print("SKIP mamba_ssm ssd_minimal comparison (bash scripts/fetch_mamba_ssm.sh GIT_DIR first)")
        return
    minimal = mamba_ssm_src.load("modules.ssd_minimal")
    x, dt, A, B, C = random_ssd_inputs(length=32, g=4)  # ssd_minimal: whole chunks, B/C per head
    y_min, _ = minimal.ssd_minimal_discrete(x * dt[..., None], A * dt, B, C, 8)
    err = rel_err(ssd_chunked(x, dt, A, B, C, 8), y_min)
    check(err < 1e-5, f"SSD chunked scan equals mamba_ssm's ssd_minimal_discrete: rel err {err:.1e}")


def check_gated_norm() -> None:
    if not HAVE_MAMBA_SRC:
        print("SKIP gated RMSNorm vs mamba_ssm (no third_party/mamba_ssm-2.3.2)")
        return
    ref = mamba_ssm_src.load("ops.triton.layernorm_gated").rms_norm_ref
    gen = torch.Generator().manual_seed(1)
    y, z = torch.randn(3, 5, 32, generator=gen), torch.randn(3, 5, 32, generator=gen)
    w = 1.0 + 0.1 * torch.randn(32, generator=gen)
    want = ref(y, w, None, z=z, eps=1e-5, group_size=8, norm_before_gate=False)
    check(rel_err(gated_rms_norm(y, z, w, 8), want) < 1e-6, "gated grouped RMSNorm equals mamba_ssm's rms_norm_ref")
    check(rel_err(gated_rms_norm(y, z, w, 32), want) > 1e-3, "... and the group size matters")


def check_mixers_agree() -> None:
    if not HAVE_MAMBA_SRC:
        print("SKIP TorchMamba2 vs mamba_ssm Mamba2 (no third_party/mamba_ssm-2.3.2)")
        return
    cfg = load_config(None, {"model.seq_length": 20}, shrink="hybrid")
    ours = TorchMamba2(cfg)
    theirs = mamba_ssm_mixer(cfg, None, 0)
    init_mixer(ours, torch.Generator().manual_seed(2), 0.02, 0.01)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    module = sys.modules["mamba_ssm.modules.mamba2"]
    norm_module = sys.modules["mamba_ssm.ops.triton.layernorm_gated"]
    minimal = mamba_ssm_src.load("modules.ssd_minimal")

    def scan_reference(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, dt_softplus=False, **_):
        dt = F.softplus(dt + dt_bias) if dt_softplus else dt + dt_bias
        length, pad = x.shape[1], (-x.shape[1]) % chunk_size
        rep = x.shape[2] // B.shape[2]
        Bh, Ch = B.repeat_interleave(rep, 2), C.repeat_interleave(rep, 2)
        xs, dts, Bs, Cs = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, Bh, Ch))
        y, _ = minimal.ssd_minimal_discrete(xs * dts[..., None], A * dts, Bs, Cs, chunk_size)
        return y[:, :length] + x * D[:, None]

    saved = module.mamba_chunk_scan_combined, norm_module.rmsnorm_fn
    module.mamba_chunk_scan_combined = scan_reference  # the Triton kernels need a GPU: their references instead
    norm_module.rmsnorm_fn = lambda x, weight, bias, z=None, eps=1e-6, group_size=None, norm_before_gate=True: \
        norm_module.rms_norm_ref(x, weight, bias, z=z, eps=eps, group_size=group_size,
                                 norm_before_gate=norm_before_gate)
    try:
        u = torch.randn(2, cfg.seq_length, cfg.hidden_size, generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            err = rel_err(ours(u), theirs(u))
    finally:
        module.mamba_chunk_scan_combined, norm_module.rmsnorm_fn = saved
    check(err < 1e-5,
          f"TorchMamba2 equals mamba_ssm's Mamba2 (use_mem_eff_path=False, conv fallback): rel err {err:.1e}")


def check_nemotronh_mixer() -> None:
    """The pure-PyTorch mixer against transformers' NemotronH Mamba2 mixer (its PyTorch path), same state dict."""
    try:
        from transformers import NemotronHConfig
        from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer
    except ImportError:
        print("SKIP TorchMamba2 vs transformers' NemotronHMamba2Mixer (transformers with NemotronH not installed)")
        return
    cfg = load_config(None, {"model.seq_length": 20}, shrink="hybrid")
    hf_cfg = NemotronHConfig(hidden_size=cfg.hidden_size, mamba_num_heads=cfg.mamba_num_heads,
                             mamba_head_dim=cfg.mamba_head_dim, ssm_state_size=cfg.mamba_state_dim,
                             n_groups=cfg.mamba_num_groups, chunk_size=cfg.mamba_chunk_size, conv_kernel=4,
                             use_conv_bias=True, use_bias=False, mamba_hidden_act="silu", time_step_min=0.0,
                             layer_norm_epsilon=1e-5, hybrid_override_pattern="M", num_hidden_layers=1)
    hf = NemotronHMamba2Mixer(hf_cfg, layer_idx=0)
    ours = TorchMamba2(cfg)
    init_mixer(ours, torch.Generator().manual_seed(2), 0.02, 0.01)
    hf.load_state_dict(ours.state_dict(), strict=True)
    u = torch.randn(2, cfg.seq_length, cfg.hidden_size, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        theirs = hf(u)
        err = rel_err(ours(u), theirs[0] if isinstance(theirs, tuple) else theirs)
    check(err < 1e-5, f"TorchMamba2 equals transformers' NemotronHMamba2Mixer: rel err {err:.1e}")


def moe_config(**changes):
    return load_config(None, changes, shrink="moe")


def check_router() -> None:
    cfg = moe_config()
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(10, cfg.num_moe_experts, generator=gen)
    probs, experts, aux = torch_moe.route(cfg, logits)
    scores = logits.softmax(-1)
    top = logits.topk(cfg.moe_router_topk, dim=-1)
    counts = torch.zeros(cfg.num_moe_experts).index_add_(0, top.indices.reshape(-1), torch.ones(20))
    e, k, t = cfg.num_moe_experts, cfg.moe_router_topk, logits.shape[0]
    want_aux = (scores.sum(0) * counts).sum() * e * cfg.moe_aux_loss_coeff / (k * t * t)
    want_z = torch.logsumexp(logits, -1).square().mean() * cfg.moe_z_loss_coeff
    check(torch.equal(experts, top.indices) and torch.allclose(probs, top.values.softmax(-1)),
          "router: top-k of the logits, softmax over the k (moe_router_pre_softmax false)")
    check(abs(aux.item() - (want_aux + want_z).item()) < 1e-6, f"router: aux + z loss {aux.item():.6f} "
          f"= Megatron's {want_aux.item():.6f} + {want_z.item():.6f}")
    pre = moe_config(**{"model.moe_router_pre_softmax": True, "model.moe_router_topk_scaling_factor": 2.0})
    probs, _, _ = torch_moe.route(pre, logits)
    check(torch.allclose(probs, 2.0 * scores.topk(k, dim=-1).values), "router: pre-softmax and the scaling factor")


# Nemotron 3's MoE settings (as --set overrides): sigmoid routing with the expert bias, a shared expert, squared-ReLU
# experts, per-sequence load balancing.
NEMOTRON3_MOE = {"model.moe_router_score_function": "sigmoid", "model.moe_router_enable_expert_bias": True,
                 "model.moe_router_topk_scaling_factor": 2.5, "model.moe_router_load_balancing_type": "seq_aux_loss",
                 "model.moe_shared_expert_intermediate_size": 48, "model.activation_func": "squared_relu",
                 "model.gated_linear_unit": False, "model.moe_router_bias_update_rate": 0.01}


def check_sigmoid_router() -> None:
    cfg = moe_config(**{"model.moe_router_score_function": "sigmoid", "model.moe_router_topk_scaling_factor": 2.5,
                        "model.moe_z_loss_coeff": 0.0})
    e, k = cfg.num_moe_experts, cfg.moe_router_topk
    logits = torch.randn(16, e, generator=torch.Generator().manual_seed(20))
    sig = torch.sigmoid(logits)

    def renormalised(ids):
        chosen = sig.gather(1, ids)
        return 2.5 * chosen / (chosen.sum(-1, keepdim=True) + 1e-20)

    def aux_of(ids):  # Megatron's aux_loss with the sigmoid scores normalised over all experts
        counts = torch.zeros(e).index_add_(0, ids.reshape(-1), torch.ones(ids.numel()))
        scores = sig / (sig.sum(-1, keepdim=True) + 1e-20)
        return (scores.sum(0) * counts).sum() * e * cfg.moe_aux_loss_coeff / (k * 16 * 16)

    probs, experts, aux = torch_moe.route(cfg, logits)
    top = logits.topk(k, dim=-1).indices
    check(torch.equal(experts, top) and torch.allclose(probs, renormalised(top), rtol=1e-6)
          and abs(aux.item() - aux_of(top).item()) < 1e-7,
          "sigmoid router: top-k of the logits, sigmoids over their sum x the scaling factor, aux on sigmoid/sum")
    bias = torch.tensor([0.0, 0.0, 0.0, 0.6])
    probs_b, experts_b, aux_b = torch_moe.route(cfg, logits, bias)
    want = (sig + bias).topk(k, dim=-1).indices
    check(torch.equal(experts_b, want) and not torch.equal(experts_b, top)
          and torch.allclose(probs_b, renormalised(want), rtol=1e-6),
          "sigmoid router with the expert bias: chooses by sigmoid + bias (the choice changes), probs without it")
    check(abs(aux_b.item() - aux_of(top).item()) < 1e-7 and abs(aux_of(want).item() - aux_of(top).item()) > 1e-6,
          f"the aux loss balances the choice without the bias: {aux_b.item():.6f} (with it: {aux_of(want).item():.6f})")
    one = moe_config(**{"model.moe_router_score_function": "sigmoid", "model.moe_router_topk": 1})
    probs_1, experts_1, _ = torch_moe.route(one, logits)
    check(torch.allclose(probs_1, sig.gather(1, experts_1)), "sigmoid router, top-1: the sigmoid, not renormalised")
    try:
        torch_moe.route(moe_config(), logits, bias)
        check(False, "softmax routing with an expert bias is refused")
    except ValueError as err:
        check("sigmoid" in str(err), f"softmax routing with an expert bias is refused: {err}")


def check_seq_aux_loss() -> None:
    seq, nseq = 8, 3
    logits = torch.randn(seq * nseq, 4, generator=torch.Generator().manual_seed(21), requires_grad=True)
    for score in ("softmax", "sigmoid"):
        cfg = moe_config(**{"model.seq_length": seq, "model.moe_router_load_balancing_type": "seq_aux_loss",
                            "model.moe_router_score_function": score, "model.moe_z_loss_coeff": 0.0})
        e, k, coeff = cfg.num_moe_experts, cfg.moe_router_topk, cfg.moe_aux_loss_coeff
        _, _, aux = torch_moe.route(cfg, logits)
        want = 0.0  # the mean of the per-sequence losses (whole: the one-group loss, aux_loss's)
        with torch.no_grad():
            if score == "softmax":
                scores = logits.softmax(-1)
            else:
                scores = torch.sigmoid(logits) / (torch.sigmoid(logits).sum(-1, keepdim=True) + 1e-20)
            top = logits.topk(k, dim=-1).indices
            for g in range(nseq):
                counts = torch.bincount(top[g * seq:(g + 1) * seq].reshape(-1), minlength=e).float()
                want += e * coeff / (k * seq * seq) * (counts * scores[g * seq:(g + 1) * seq].sum(0)).sum() / nseq
            counts = torch.bincount(top.reshape(-1), minlength=e).float()
            whole = e * coeff / (k * (seq * nseq) ** 2) * (counts * scores.sum(0)).sum()
        grad = torch.autograd.grad(aux, logits)[0]
        check(abs(aux.item() - want.item()) < 1e-8 and abs(aux.item() - whole.item()) > 1e-6 and grad.abs().sum() > 0,
              f"seq_aux_loss ({score}): {aux.item():.7f} = the mean over {nseq} sequences {want.item():.7f} "
              f"(one group: {whole.item():.7f}), with a gradient")


def check_moe_written_out() -> None:
    """The layer (loop impl, fp32) equals sum_j p_j expert_{e_j}(x) + shared(x), written out per token."""
    for act, gated in (("silu", True), ("squared_relu", False)):
        cfg = moe_config(**{"model.moe_shared_expert_intermediate_size": 24, "model.activation_func": act,
                            "model.gated_linear_unit": gated, "model.moe_ffn_hidden_size": 16})
        layer = moe_pair(cfg)["loop"]
        x = torch.randn(1, 6, cfg.hidden_size, generator=torch.Generator().manual_seed(22))

        def mlp(w1, w2, v):
            h = F.linear(v, w1)
            return F.linear(F.silu(h[:h.shape[0] // 2]) * h[h.shape[0] // 2:] if gated else F.relu(h) ** 2, w2)
        with torch.no_grad():
            probs, experts, _ = torch_moe.route(cfg, F.linear(x[0], layer.router))
            want = torch.stack([sum(probs[t, j] * mlp(layer.fc1[experts[t, j]], layer.fc2[experts[t, j]], x[0, t])
                                    for j in range(cfg.moe_router_topk))
                                + mlp(layer.shared_fc1.weight, layer.shared_fc2.weight, x[0, t]) for t in range(6)])
            err = rel_err(layer(x)[0], want)
        shapes = (tuple(layer.fc1[0].shape), tuple(layer.shared_fc1.weight.shape), tuple(layer.shared_fc2.weight.shape))
        width = 2 if gated else 1
        check(err < 1e-6 and shapes == ((width * 16, 64), (width * 24, 64), (64, 24)),
              f"MoE layer {act} gated={gated} with a shared expert of 24, written out: rel err {err:.1e}, FC1/shared "
              f"shapes {shapes}")


def moe_pair(cfg, seed=5):
    layers = {impl: torch_moe.MoEMLP(cfg, impl) for impl in torch_moe.EXPERT_IMPLS}
    for layer in layers.values():
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            layer.router.normal_(0.0, 0.5, generator=gen)
            for view, _ in layer.expert_weights():
                view.normal_(0.0, 0.1, generator=gen)
            if layer.expert_bias is not None:
                layer.expert_bias.normal_(0.0, 0.1, generator=gen)
    return layers


def grads_of(layer) -> torch.Tensor:
    """The router's, every expert's and the shared expert's gradients, flattened in one order for both impls."""
    shared = [] if layer.shared_fc1 is None else [layer.shared_fc1.weight.grad.reshape(-1),
                                                  layer.shared_fc2.weight.grad.reshape(-1)]
    return torch.cat([layer.router.grad.reshape(-1)] + [
        (torch.stack([p.grad for p in params]) if layer.impl == "loop" else params.grad).reshape(-1)
        for params in (layer.fc1, layer.fc2)] + shared)


def check_moe_impls() -> None:
    reason = torch_moe.grouped_mm_unavailable(torch.device("cpu"))
    if reason:
        print(f"SKIP loop vs grouped_mm: {reason}")
        return
    for name, changes in (("SwiGLU", {}), ("Nemotron 3 (squared ReLU, shared, sigmoid + bias, seq_aux_loss)",
                                          {**NEMOTRON3_MOE, "model.seq_length": 9})):
        cfg = moe_config(**changes)
        layers = moe_pair(cfg)
        gen = torch.Generator().manual_seed(6)
        x = torch.randn(2, 9, cfg.hidden_size, generator=gen).to(torch.bfloat16)
        x[1, :5] = x[0, 0]  # several identical tokens: ties in the sort
        outs, grads = {}, {}
        dy = torch.randn(x.shape, generator=gen).to(torch.bfloat16)
        for impl, layer in layers.items():
            xi = x.clone().requires_grad_()
            with torch.autocast("cpu", dtype=torch.bfloat16):  # as in the model: the loop's linears in bf16
                out = layer(xi)
            out.backward(dy)
            outs[impl], grads[impl] = out.float(), grads_of(layer)
            grads[impl + "_x"] = xi.grad.float()
        check(rel_err(outs["grouped_mm"], outs["loop"]) < 2e-2, f"loop and grouped_mm experts, {name}: same output")
        check(rel_err(grads["grouped_mm"], grads["loop"]) < 2e-2 and rel_err(grads["grouped_mm_x"], grads["loop_x"])
              < 2e-2, f"loop and grouped_mm experts, {name}: same router, expert and input gradients (bf16)")
    cfg = moe_config()
    # An expert nobody picks (its router row far below the others on all-ones tokens): zero gradients, not missing.
    layers = moe_pair(cfg, seed=8)
    for layer in layers.values():
        with torch.no_grad():
            layer.router[0] = -1e3
    x = torch.ones(1, 4, cfg.hidden_size, dtype=torch.bfloat16)
    for impl, layer in layers.items():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x)
        out.float().sum().backward()
        g = layer.fc1.grad[0] if impl == "grouped_mm" else layer.fc1[0].grad
        check(g is not None and torch.count_nonzero(g).item() == 0, f"{impl}: an expert with no token gets zero grads")


def check_grouped_mm_missing() -> None:
    """Without torch._grouped_mm the grouped_mm rows fail with the reason and point at the loop."""
    import torch_reference
    saved = torch._grouped_mm
    del torch._grouped_mm
    try:
        torch_reference.build_model(moe_config(), argparse.Namespace(mamba_src=None), "grouped_mm",
                                    torch.device("cpu"))
        check(False, "grouped_mm without torch._grouped_mm is refused")
    except RuntimeError as e:
        check("no torch._grouped_mm" in str(e) and "--impls loop" in str(e),
              f"grouped_mm without torch._grouped_mm is refused: {e}")
    finally:
        torch._grouped_mm = saved


def check_aux_gradient() -> None:
    cfg = moe_config(**{"model.moe_z_loss_coeff": 0.0})
    layer = torch_moe.MoEMLP(cfg, "loop")
    with torch.no_grad():
        layer.router.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(9))
        for view, _ in layer.expert_weights():
            view.zero_()  # the experts output 0: the router's gradient is the aux loss's alone
    layer.aux_grad_scale = 0.5
    x = torch.randn(7, cfg.hidden_size, generator=torch.Generator().manual_seed(10))
    out = layer(x.unsqueeze(0))
    check(torch.count_nonzero(out).item() == 0, "experts of zeros: the layer output is zero (aux not added)")
    out.sum().backward()
    router = layer.router.detach().clone().requires_grad_()
    _, _, aux = torch_moe.route(cfg, F.linear(x, router))
    (0.5 * aux).backward()
    err = rel_err(layer.router.grad, router.grad)
    check(err < 1e-6 and router.grad.abs().sum() > 0,
          f"the aux loss trains the router with the microbatch weight 0.5: rel err {err:.1e}")


def check_expert_bias_step() -> None:
    """One step of two microbatches: the counts of both (chosen with the bias as it was) sum, then the bias moves by
    rate * sign(mean - count); the bias is a buffer (no gradient, not the optimizer's)."""
    cfg = load_config(None, {**NEMOTRON3_MOE, "model.hybrid_override_pattern": "E*E", "model.num_layers": 3,
                             "model.num_moe_experts": 4, "model.moe_router_topk": 2, "model.moe_ffn_hidden_size": 32,
                             "model.moe_aux_loss_coeff": 0.01}, shrink="hybrid")
    model = StackLM(cfg, "cpu", torch.float32, impl="torch")
    model.init_weights(30)
    layers = [m for m in model.modules() if isinstance(m, torch_moe.MoEMLP)]
    seen = {id(layer): [] for layer in layers}

    def record(layer, inputs, _):  # the dispatch counts of this microbatch, written out
        logits = F.linear(inputs[0].reshape(-1, cfg.hidden_size).float(), layer.router)
        ids = (torch.sigmoid(logits) + layer.expert_bias).topk(cfg.moe_router_topk, dim=-1).indices
        seen[id(layer)].append(torch.bincount(ids.reshape(-1), minlength=cfg.num_moe_experts))
    gen = torch.Generator().manual_seed(31)
    for layer in layers:
        layer.register_forward_hook(record)
        layer.expert_bias.copy_(0.05 * torch.randn(cfg.num_moe_experts, generator=gen))
        layer.step_counts.fill_(1000)  # stale counts: the step must start from zero
    before = [layer.expert_bias.clone() for layer in layers]
    step = torch_moe.with_expert_bias_update(TrainStep(model, cfg, "eager", 32), model)
    step.feed(0)
    step()
    tokens = cfg.micro_batch_size * cfg.seq_length
    for i, (layer, old) in enumerate(zip(layers, before)):
        c1, c2 = seen[id(layer)]
        counts = (c1 + c2).double()
        want = old + cfg.moe_router_bias_update_rate * torch.sign(counts.mean() - counts).float()
        check(cfg.num_microbatches == 2 and torch.equal(layer.step_counts, c1 + c2) and not torch.equal(c1, c2)
              and counts.sum() == 2 * tokens * cfg.moe_router_topk,
              f"MoE layer {i}: the step's counts {layer.step_counts.tolist()} = microbatch 1 {c1.tolist()} + 2 "
              f"{c2.tolist()}")
        check(torch.equal(layer.expert_bias, want) and not torch.equal(want, old),
              f"MoE layer {i}: bias += 0.01 sign(mean - count): {old.tolist()} -> {layer.expert_bias.tolist()}")
        check(layer.expert_bias.grad is None and not layer.expert_bias.requires_grad
              and all(p is not layer.expert_bias for p in model.parameters()) and layer.router.grad.abs().sum() > 0,
              f"MoE layer {i}: the expert bias is a buffer without gradient; the router trains")


def check_stack_equals_llama() -> None:
    cfg = load_config(None, {}, shrink="llama")
    llama = Llama(cfg, "cpu", torch.float32)
    llama.init_weights(12)
    pattern = {"model.hybrid_override_pattern": "*-*-", "model.num_layers": 4, "model.position_embedding_type": "rope"}
    stack = StackLM(load_config(None, pattern, shrink="llama"), "cpu", torch.float32, impl="torch")
    with torch.no_grad():
        stack.embed_tokens.weight.copy_(llama.embed_tokens.weight)
        stack.lm_head.weight.copy_(llama.lm_head.weight)
        for i, block in enumerate(llama.layers):
            attn, mlp = stack.layers[2 * i], stack.layers[2 * i + 1]
            attn.norm.copy_(block.input_layernorm)
            attn.qkv_proj.weight.copy_(block.qkv_proj.weight)
            attn.o_proj.weight.copy_(block.o_proj.weight)
            mlp.norm.copy_(block.post_attention_layernorm)
            mlp.gate_up_proj.weight.copy_(block.gate_up_proj.weight)
            mlp.down_proj.weight.copy_(block.down_proj.weight)
    tokens = torch.randint(0, cfg.vocab_size, (2, cfg.seq_length), generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        err = rel_err(stack.logits(tokens), llama.logits(tokens))
    check(err < 1e-6,
          f"a GPT-layout stack of attention and MLP layers equals Llama: rel err {err:.1e}")


def check_mlp_activations() -> None:
    """Nemotron-H's MLP (squared ReLU, not gated) and SwiGLU, written out."""
    from torch_stack import MLPLayer
    x = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(14))
    for act, gated in (("squared_relu", False), ("silu", True)):
        cfg = load_config(None, {"model.activation_func": act, "model.gated_linear_unit": gated}, shrink="hybrid")
        layer = MLPLayer(cfg)
        with torch.no_grad():
            n = F.rms_norm(x, (64,), layer.norm, cfg.layernorm_epsilon)
            h = F.linear(n, layer.gate_up_proj.weight)
            inner = F.silu(h[..., :cfg.ffn_hidden_size]) * h[..., cfg.ffn_hidden_size:] if gated else F.relu(h) ** 2
            err = rel_err(layer(x), x + F.linear(inner, layer.down_proj.weight))
        check(err < 1e-6 and layer.gate_up_proj.weight.shape[0] == (2 if gated else 1) * cfg.ffn_hidden_size,
              f"MLP layer {act} gated={gated}: rel err {err:.1e}")


def check_config() -> None:
    cfg = load_config(None, {"model.kv_channels": 32, "model.num_moe_experts": 8}, shrink="llama")
    check(cfg.family == "moe" and cfg.layer_pattern == "*E*E" and cfg.q_dim == 128 and cfg.kv_dim == 64,
          "moe family, GPT pattern *E per block, kv_channels sets the head dim")
    cfg = load_config(None, {}, shrink="hybrid")
    check(cfg.family == "hybrid" and cfg.mamba_num_heads == 8 and cfg.mamba_d_inner == 128
          and cfg.position_embedding_type == "none",
          "hybrid family: mamba heads from expand 2 x hidden / head dim, no RoPE by default (Megatron's)")
    cfg = load_config(None, {"model.position_embedding_type": "rope"}, shrink="hybrid")
    check(cfg.position_embedding_type == "rope", "hybrid family: RoPE when the recipe asks")
    cfg = moe_config(**NEMOTRON3_MOE)
    check(cfg.moe_router_enable_expert_bias and cfg.moe_router_bias_update_rate == 0.01
          and moe_config().moe_router_bias_update_rate == 0.001, "moe family: Nemotron 3's MoE keys load")
    for family, bad, expect in (("moe", {"model.moe_expert_capacity_factor": 1.0}, "dropless"),
                                ("moe", {"model.moe_router_score_function": "sparsemixer"}, "softmax or sigmoid"),
                                ("moe", {"model.moe_router_enable_expert_bias": True},
                                 "needs model.moe_router_score_function sigmoid"),
                                ("moe", {"model.moe_router_load_balancing_type": "sinkhorn"}, "seq_aux_loss or none"),
                                ("moe", {"model.moe_router_topk": 9}, "moe_router_topk"),
                                ("hybrid", {"model.num_layers": 5}, "has 4 layers"),
                                ("hybrid", {"model.hybrid_override_pattern": "M*X-"}, "letters"),
                                ("hybrid", {"model.mamba_num_groups": 3}, "multiple of"),
                                ("llama", {"model.position_embedding_type": "none"}, "always use RoPE"),
                                ("moe", {"model.activation_func": "squared_relu"}, "the MoE experts here are"),
                                ("llama", {"model.activation_func": "squared_relu", "model.gated_linear_unit": False},
                                 "SwiGLU (silu, gated) only"),
                                ("hybrid", {"model.activation_func": "relu2"}, "one of")):
        try:
            load_config(None, bad, shrink=family)
            check(False, f"{family}: {bad} refused")
        except SystemExit as e:
            check(expect in str(e), f"{family}: {bad} refused: {e}")


def run_cli(args: list) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        proc = subprocess.run([sys.executable, os.path.join(BENCH, "torch_reference.py"), "--device", "cpu", "--steps",
                               "2", "--warmup", "1", "--json", out] + args, capture_output=True, text=True,
                              timeout=1800, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        print(proc.stderr[-2000:] if proc.returncode else "", proc.stdout)
        return proc, (json.load(open(out)) if os.path.exists(out) else None)


def check_cli() -> None:
    proc, report = run_cli(["--shrink", "moe", "--modes", "eager,cuda_graph"])
    check(proc.returncode == 0 and report["family"] == "moe", f"moe CLI exit code {proc.returncode}")
    rows = {(r["impl"], r["mode"]): r for r in report["modes"]}
    check(list(rows) == [("loop", "eager"), ("loop", "cuda_graph"), ("grouped_mm", "eager"),
                         ("grouped_mm", "cuda_graph")], "moe: every impl in every mode, in order")
    losses = [rows[(impl, "eager")]["losses"] for impl in ("loop", "grouped_mm")]
    check(all(abs(a - b) < 0.02 * a for a, b in zip(*losses)) and abs(losses[0][0] - math.log(512)) < 0.5,
          f"moe: loop and grouped_mm train alike from ln(512): {losses}")
    check("loop/eager" in proc.stdout and "grouped_mm/cuda_graph  skipped" in proc.stdout, "moe: table rows impl/mode")

    def sets(keys: dict) -> list:  # YAML's true/false for booleans
        return [f"--set={key}={str(v).lower() if isinstance(v, bool) else v}" for key, v in keys.items()]
    proc, report = run_cli(["--shrink", "moe", "--modes", "eager"] + sets(NEMOTRON3_MOE))
    rows = {r["impl"]: r for r in report["modes"]} if report else {}
    ok = proc.returncode == 0 and all(rows.get(impl, {}).get("status") == "ok" for impl in ("loop", "grouped_mm"))
    check(ok and all(abs(a - b) < 0.02 * a for a, b in zip(rows["loop"]["losses"], rows["grouped_mm"]["losses"])),
          "moe CLI with Nemotron 3's MoE settings: loop and grouped_mm train alike")
    hybrid = {**NEMOTRON3_MOE, "model.hybrid_override_pattern": "MEM*EMEM", "model.num_layers": 8,
              "model.num_moe_experts": 4, "model.moe_ffn_hidden_size": 32, "model.moe_aux_loss_coeff": 0.001}
    proc, report = run_cli(["--shrink", "hybrid", "--modes", "eager", "--impls", "torch"] + sets(hybrid))
    row = report["modes"][0] if report else {}
    check(row.get("status") == "ok" and report["layer_pattern"] == "MEM*EMEM"
          and report["model_flops_per_step"] == model_flops_per_step(load_config(None, hybrid, shrink="hybrid"))
          and abs(row["losses"][0] - math.log(512)) < 0.5,
          f"hybrid CLI, Nemotron 3 style (MEM*EMEM, squared ReLU, shared expert, sigmoid + bias, seq_aux_loss): "
          f"{row.get('status')} {row.get('error', '')}")
    impls = "torch,mamba_ssm"
    proc, report = run_cli(["--shrink", "hybrid", "--modes", "eager", "--impls", impls])
    rows = {r["impl"]: r for r in report["modes"]}
    check(report["layer_pattern"] == "M*-M" and rows["torch"]["status"] == "ok",
          f"hybrid CLI: torch impl ran ({rows['torch'].get('error')})")
    check(rows["mamba_ssm"]["status"] == "failed" and rows["mamba_ssm"].get("error"),
          f"hybrid CLI: mamba_ssm (Triton) on the CPU fails with a reason: {rows['mamba_ssm'].get('error')}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--skip-cli", action="store_true", help="leave the CLI runs out (slow on a busy CPU)")
    args = p.parse_args()
    torch.manual_seed(0)
    # NemotronH first: once mamba_ssm's sources are imported, transformers takes mamba_ssm for installed and calls its
    # fused path (which needs the compiled causal_conv1d).
    checks = [check_nemotronh_mixer, check_ssd, check_gated_norm, check_mixers_agree, check_router,
              check_sigmoid_router, check_seq_aux_loss, check_moe_written_out, check_moe_impls,
              check_grouped_mm_missing, check_aux_gradient, check_expert_bias_step, check_stack_equals_llama,
              check_mlp_activations, check_config] + ([] if args.skip_cli else [check_cli])
    for run in checks:
        run()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
