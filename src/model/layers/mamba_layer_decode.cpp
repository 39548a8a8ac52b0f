// The Mamba layer's GPU decoding twin (model/gpu_decode_layer.h): the training step's in_proj, dt, gated
// norm and out_proj kernels (mamba_layer.cpp) around the conv and the scan continued from each sequence's
// kept state (kernels/mamba_decode.h), as the CPU twin (mamba_layer_cpu.cpp) continues them.
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/gated_rmsnorm.h"
#include "kernels/mamba_decode.h"
#include "kernels/mamba_dt.h"
#include "kernels/shape_limits.h"
#include "model/layers/mamba_layer.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}
}  // namespace

void MambaDecodeGpu::plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) {
  model_ = model;
  dims_ = MambaDims::of(model, BatchSpec{.micro_batch_size = 1});  // the widths; rows per call below
  in_proj_ = DecodeLinear(dims_.H, dims_.in_proj, std::nullopt, decode.gemv);
  out_proj_ = DecodeLinear(dims_.inner, dims_.H, std::nullopt, decode.gemv);
  rows_ = decode.max_rows();
  batch_ = decode.batch;
  const MambaDims& d = dims_;
  const std::string prefix = strprintf("decode.layer%d.", index());
  conv_state_slot_ = memory.add_array<bf16>(prefix + "conv_state", cuda::MemoryCategory::activations,
                                            sz(batch_ * d.conv * (kernels::kCausalConv1dWidth - 1)));
  ssm_state_slot_ = memory.add_array<float>(prefix + "ssm_state", cuda::MemoryCategory::activations,
                                            sz(batch_ * d.heads * d.head_dim * d.state));
}

void MambaDecodeGpu::take_scratch(DecodeScratch& scratch) {
  const MambaDims& d = dims_;
  zxbcdt_ = scratch.take<bf16>(rows_ * d.in_proj);
  xbc_ = scratch.take<bf16>(rows_ * d.conv);
  dt_ = scratch.take<float>(rows_ * d.heads);
  A_ = scratch.take<float>(d.heads);
  y_ = scratch.take<bf16>(rows_ * d.inner);
  normed_ = scratch.take<bf16>(rows_ * d.inner);
  rstd_ = scratch.take<float>(rows_ * d.groups);
}

void MambaDecodeGpu::bind(const cuda::Arena& arena, kernels::Blas& blas) {
  conv_state_ = arena.get<bf16>(conv_state_slot_);
  ssm_state_ = arena.get<float>(ssm_state_slot_);
  in_proj_.prepare(blas, batch_);
  out_proj_.prepare(blas, batch_);
}

void MambaDecodeGpu::reset(cudaStream_t stream) {
  const MambaDims& d = dims_;
  SG_CUDA_CHECK(
      cudaMemsetAsync(conv_state_, 0, sz(batch_ * d.conv * (kernels::kCausalConv1dWidth - 1)) * sizeof(bf16), stream));
  SG_CUDA_CHECK(cudaMemsetAsync(ssm_state_, 0, sz(batch_ * d.heads * d.head_dim * d.state) * sizeof(float), stream));
}

void MambaDecodeGpu::forward(cudaStream_t stream, const GpuDecodeIO& io) {
  const MambaDims& d = dims_;
  const MambaSpec& m = model_.mamba;
  const GpuDecodeRows& r = io.rows;
  const int64_t T = r.T, bc = d.groups * d.state;
  in_proj_.run(stream, io.blas, T, zxbcdt_, io.input, io.weight(decl_.in_proj));
  kernels::mamba_dt_forward(stream, {.dt = dt_,
                                     .dt_raw = zxbcdt_ + d.inner + d.conv,
                                     .dt_bias = io.fp32_weight(decl_.dt_bias),
                                     .T = T,
                                     .H = d.heads,
                                     .dt_raw_row_stride = d.in_proj,
                                     .dt_min = static_cast<float>(m.dt_limit_min),
                                     .dt_max = static_cast<float>(m.dt_limit_max)});
  kernels::mamba_a_forward(stream, {.A = A_, .A_log = io.fp32_weight(decl_.A_log), .H = d.heads});
  kernels::causal_conv1d_silu_continued(stream, {.out = xbc_,
                                                 .state = conv_state_,
                                                 .in = zxbcdt_ + d.inner,
                                                 .weight = io.weight(decl_.conv_weight),
                                                 .bias = io.weight(decl_.conv_bias),
                                                 .T = T,
                                                 .rows_per_slot = r.rows_per_slot,
                                                 .first_slot = r.first_slot,
                                                 .slots = batch_,
                                                 .C = d.conv,
                                                 .in_row_stride = d.in_proj});
  kernels::ssd_scan_continued(stream, {.y = y_,
                                       .state = ssm_state_,
                                       .x = xbc_,
                                       .dt = dt_,
                                       .A = A_,
                                       .Bm = xbc_ + d.inner,
                                       .Cm = xbc_ + d.inner + bc,
                                       .D = io.fp32_weight(decl_.D),
                                       .T = T,
                                       .rows_per_slot = r.rows_per_slot,
                                       .first_slot = r.first_slot,
                                       .slots = batch_,
                                       .nheads = d.heads,
                                       .headdim = d.head_dim,
                                       .ngroups = d.groups,
                                       .dstate = d.state,
                                       .x_row_stride = d.conv,
                                       .bm_row_stride = d.conv,
                                       .cm_row_stride = d.conv});
  kernels::gated_rmsnorm_forward(stream, {.out = normed_,
                                          .rstd = rstd_,
                                          .y = y_,
                                          .z = zxbcdt_,
                                          .weight = io.weight(decl_.norm),
                                          .T = T,
                                          .D = d.inner,
                                          .G = d.groups,
                                          .z_row_stride = d.in_proj,
                                          .eps = static_cast<float>(model_.layernorm_epsilon)});
  out_proj_.run(stream, io.blas, T, io.output, normed_, io.weight(decl_.out_proj));
}

}  // namespace sg::model
