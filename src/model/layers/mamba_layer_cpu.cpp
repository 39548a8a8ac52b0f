// The Mamba layer's CPU fp32 twin (the declarations and the GPU side: mamba_layer.cpp).
#include <algorithm>

#include "model/layers/mamba_layer.h"
#include "reference/causal_conv1d.h"
#include "reference/gated_rmsnorm.h"
#include "reference/linear.h"
#include "reference/mamba_dt.h"
#include "reference/ssd_scan.h"

namespace sg::model {

namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }

// The scan's operands are column slices of the conv output row [x | B | C]; the reference scan reads
// contiguous tensors. `column` is where the slice starts, `width` its columns, `stride` the row.
void gather_columns(float* dst, const float* rows, int64_t T, int64_t stride, int64_t column, int64_t width) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < width; ++j) dst[t * width + j] = rows[t * stride + column + j];
  }
}
void scatter_columns(float* rows, const float* src, int64_t T, int64_t stride, int64_t column, int64_t width) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < width; ++j) rows[t * stride + column + j] = src[t * width + j];
  }
}

ref::SsdScanShape scan_shape(const MambaDims& d) {
  return {.batch = d.batch,
          .seqlen = d.seq,
          .nheads = d.heads,
          .headdim = d.head_dim,
          .ngroups = d.groups,
          .dstate = d.state};
}

}  // namespace

CpuLayerFootprint MambaLayerCpu::host_footprint(const ModelSpec& m, const BatchSpec& b) {
  // plan()'s buffers below: saved, then scratch.
  const double H = static_cast<double>(m.hidden_size);
  const double T = static_cast<double>(b.micro_batch_size) * static_cast<double>(m.seq_length);
  const double P = static_cast<double>(m.mamba_in_proj_dim()), C = static_cast<double>(m.mamba_conv_dim());
  const double D = static_cast<double>(m.mamba_inner()), heads = static_cast<double>(m.mamba_heads());
  const double G = static_cast<double>(m.mamba.num_groups), BC = C - D;
  return {.params = P * H + 5.0 * C + H * D + 3.0 * heads + D,
          .saved = T * (P + C + D + BC + heads + 2.0 * D + G) + heads,
          .scratch = T * (3.0 * D + BC + C + P + heads) + 2.0 * heads};
}

void MambaLayerCpu::plan(const ModelSpec& model, const BatchSpec& batch) {
  model_ = model;
  dims_ = MambaDims::of(model, batch);
  const MambaDims& d = dims_;
  zxbcdt_.resize(sz(d.T * d.in_proj));
  xbc_.resize(sz(d.T * d.conv));
  x_.resize(sz(d.T * d.inner));
  Bm_.resize(sz(d.T * d.groups * d.state));
  Cm_.resize(sz(d.T * d.groups * d.state));
  dt_.resize(sz(d.T * d.heads));
  A_.resize(sz(d.heads));
  y_.resize(sz(d.T * d.inner));
  normed_.resize(sz(d.T * d.inner));
  rstd_.resize(sz(d.T * d.groups));
  d_normed_.resize(sz(d.T * d.inner));
  d_y_.resize(sz(d.T * d.inner));
  d_x_.resize(sz(d.T * d.inner));
  d_Bm_.resize(sz(d.T * d.groups * d.state));
  d_Cm_.resize(sz(d.T * d.groups * d.state));
  d_xbc_.resize(sz(d.T * d.conv));
  d_zxbcdt_.resize(sz(d.T * d.in_proj));
  ddt_.resize(sz(d.T * d.heads));
  dA_.resize(sz(d.heads));
  dD_.resize(sz(d.heads));
}

void MambaLayerCpu::forward(const CpuLayerIO& io) {
  const MambaDims& d = dims_;
  const MambaSpec& m = model_.mamba;
  const int64_t bc = d.groups * d.state;
  const float* xbc_in = zxbcdt_.data() + d.inner;
  const float* dt_raw = zxbcdt_.data() + d.inner + d.conv;
  ref::linear_forward(zxbcdt_.data(), io.input, io.weight(decl_.in_proj), d.T, d.H, d.in_proj);
  ref::causal_conv1d_silu_forward(xbc_.data(), xbc_in, d.in_proj, io.weight(decl_.conv_weight),
                                  io.weight(decl_.conv_bias), d.batch, d.seq, d.conv);
  gather_columns(x_.data(), xbc_.data(), d.T, d.conv, 0, d.inner);
  gather_columns(Bm_.data(), xbc_.data(), d.T, d.conv, d.inner, bc);
  gather_columns(Cm_.data(), xbc_.data(), d.T, d.conv, d.inner + bc, bc);
  ref::mamba_dt_forward(dt_.data(), dt_raw, d.in_proj, io.weight(decl_.dt_bias), d.T, d.heads,
                        static_cast<float>(m.dt_limit_min), static_cast<float>(m.dt_limit_max));
  ref::mamba_a_forward(A_.data(), io.weight(decl_.A_log), d.heads);
  ref::ssd_scan_forward(y_.data(), x_.data(), dt_.data(), A_.data(), Bm_.data(), Cm_.data(), io.weight(decl_.D),
                        scan_shape(d));
  ref::gated_rmsnorm_forward(normed_.data(), rstd_.data(), y_.data(), zxbcdt_.data(), d.in_proj,
                             io.weight(decl_.norm), d.T, d.inner, d.groups,
                             static_cast<float>(model_.layernorm_epsilon));
  ref::linear_forward(io.output, normed_.data(), io.weight(decl_.out_proj), d.T, d.inner, d.H);
}

void MambaLayerCpu::backward(const CpuLayerIO& io) {
  const MambaDims& d = dims_;
  const MambaSpec& m = model_.mamba;
  const int64_t bc = d.groups * d.state;
  ref::linear_backward_input(d_normed_.data(), io.d_output, io.weight(decl_.out_proj), d.T, d.inner, d.H);
  ref::linear_backward_weight(io.grad(decl_.out_proj), io.d_output, normed_.data(), d.T, d.inner, d.H);
  ref::gated_rmsnorm_backward(d_y_.data(), d_zxbcdt_.data(), d.in_proj, io.grad(decl_.norm), d_normed_.data(),
                              y_.data(), zxbcdt_.data(), d.in_proj, io.weight(decl_.norm), rstd_.data(), d.T,
                              d.inner, d.groups);
  ref::ssd_scan_backward(d_x_.data(), ddt_.data(), dA_.data(), d_Bm_.data(), d_Cm_.data(), dD_.data(), d_y_.data(),
                         x_.data(), dt_.data(), A_.data(), Bm_.data(), Cm_.data(), io.weight(decl_.D),
                         scan_shape(d));
  scatter_columns(d_xbc_.data(), d_x_.data(), d.T, d.conv, 0, d.inner);
  scatter_columns(d_xbc_.data(), d_Bm_.data(), d.T, d.conv, d.inner, bc);
  scatter_columns(d_xbc_.data(), d_Cm_.data(), d.T, d.conv, d.inner + bc, bc);
  ref::mamba_dt_backward(d_zxbcdt_.data() + d.inner + d.conv, d.in_proj, io.grad(decl_.dt_bias), ddt_.data(),
                         zxbcdt_.data() + d.inner + d.conv, d.in_proj, io.weight(decl_.dt_bias), d.T, d.heads,
                         static_cast<float>(m.dt_limit_min), static_cast<float>(m.dt_limit_max));
  ref::mamba_a_backward(io.grad(decl_.A_log), dA_.data(), io.weight(decl_.A_log), d.heads);
  float* g_D = io.grad(decl_.D);
  for (int64_t h = 0; h < d.heads; ++h) g_D[h] += dD_[sz(h)];
  ref::causal_conv1d_silu_backward(d_zxbcdt_.data() + d.inner, d.in_proj, io.grad(decl_.conv_weight),
                                   io.grad(decl_.conv_bias), d_xbc_.data(), zxbcdt_.data() + d.inner, d.in_proj,
                                   io.weight(decl_.conv_weight), io.weight(decl_.conv_bias), d.batch, d.seq,
                                   d.conv);
  ref::linear_backward_input(io.d_input, d_zxbcdt_.data(), io.weight(decl_.in_proj), d.T, d.H, d.in_proj);
  ref::linear_backward_weight(io.grad(decl_.in_proj), d_zxbcdt_.data(), io.input, d.T, d.H, d.in_proj);
}

double MambaDecodeCpu::state_bytes(const ModelSpec& m, const DecodeSpec& decode) {
  const double per_sequence = static_cast<double>(m.mamba_conv_dim()) * (ref::kCausalConv1dWidth - 1) +
                              static_cast<double>(m.mamba_heads() * m.mamba.head_dim * m.mamba.state_dim);
  return static_cast<double>(decode.batch) * per_sequence * sizeof(float);
}

void MambaDecodeCpu::plan(const ModelSpec& model, const DecodeSpec& decode) {
  model_ = model;
  const int64_t rows = decode.max_rows();
  dims_ = MambaDims::of(model, BatchSpec{.micro_batch_size = 1});  // the widths; rows per call below
  MambaDims& d = dims_;
  d.T = d.seq = rows;
  conv_state_.assign(sz(decode.batch * d.conv * (ref::kCausalConv1dWidth - 1)), 0.0f);
  ssm_state_.assign(sz(decode.batch * d.heads * d.head_dim * d.state), 0.0f);
  zxbcdt_.resize(sz(rows * d.in_proj));
  xbc_.resize(sz(rows * d.conv));
  for (auto* v : {&x_, &y_, &normed_}) v->resize(sz(rows * d.inner));
  for (auto* v : {&Bm_, &Cm_}) v->resize(sz(rows * d.groups * d.state));
  dt_.resize(sz(rows * d.heads));
  A_.resize(sz(d.heads));
  rstd_.resize(sz(rows * d.groups));
}

void MambaDecodeCpu::reset() {
  std::fill(conv_state_.begin(), conv_state_.end(), 0.0f);
  std::fill(ssm_state_.begin(), ssm_state_.end(), 0.0f);
}

void MambaDecodeCpu::forward(const CpuDecodeIO& io) {
  const MambaDims& d = dims_;
  const DecodeRows& r = io.rows;
  const int64_t T = r.T, bc = d.groups * d.state;
  ref::linear_forward(zxbcdt_.data(), io.input, io.weight(decl_.in_proj), T, d.H, d.in_proj);
  ref::mamba_dt_forward(dt_.data(), zxbcdt_.data() + d.inner + d.conv, d.in_proj, io.weight(decl_.dt_bias), T, d.heads,
                        static_cast<float>(model_.mamba.dt_limit_min), static_cast<float>(model_.mamba.dt_limit_max));
  ref::mamba_a_forward(A_.data(), io.weight(decl_.A_log), d.heads);
  // Each slot's rows continue its sequence: the conv, then the scan, from the slot's kept states.
  const int64_t conv_kept = d.conv * (ref::kCausalConv1dWidth - 1), ssm_kept = d.heads * d.head_dim * d.state;
  for (int64_t first = 0; first < T; first += r.rows_per_slot) {
    const int64_t n = std::min(r.rows_per_slot, T - first), slot = r.first_slot + first / r.rows_per_slot;
    ref::causal_conv1d_silu_forward_continued(xbc_.data() + first * d.conv, conv_state_.data() + slot * conv_kept,
                                              zxbcdt_.data() + first * d.in_proj + d.inner, d.in_proj,
                                              io.weight(decl_.conv_weight), io.weight(decl_.conv_bias), n, d.conv);
  }
  gather_columns(x_.data(), xbc_.data(), T, d.conv, 0, d.inner);
  gather_columns(Bm_.data(), xbc_.data(), T, d.conv, d.inner, bc);
  gather_columns(Cm_.data(), xbc_.data(), T, d.conv, d.inner + bc, bc);
  for (int64_t first = 0; first < T; first += r.rows_per_slot) {
    const int64_t n = std::min(r.rows_per_slot, T - first), slot = r.first_slot + first / r.rows_per_slot;
    const ref::SsdScanShape piece{
        .batch = 1, .seqlen = n, .nheads = d.heads, .headdim = d.head_dim, .ngroups = d.groups, .dstate = d.state};
    ref::ssd_scan_forward_continued(y_.data() + first * d.inner, ssm_state_.data() + slot * ssm_kept,
                                    x_.data() + first * d.inner, dt_.data() + first * d.heads, A_.data(),
                                    Bm_.data() + first * bc, Cm_.data() + first * bc, io.weight(decl_.D), piece);
  }
  ref::gated_rmsnorm_forward(normed_.data(), rstd_.data(), y_.data(), zxbcdt_.data(), d.in_proj, io.weight(decl_.norm),
                             T, d.inner, d.groups, static_cast<float>(model_.layernorm_epsilon));
  ref::linear_forward(io.output, normed_.data(), io.weight(decl_.out_proj), T, d.inner, d.H);
}

}  // namespace sg::model
