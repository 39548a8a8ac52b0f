// The Mamba layer's declarations and its GPU side (the CPU twin: mamba_layer_cpu.cpp).
#include "model/layers/mamba_layer.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/causal_conv1d.h"
#include "kernels/gated_rmsnorm.h"
#include "kernels/gemm.h"
#include "kernels/mamba_dt.h"
#include "kernels/partial_sums.h"
#include "kernels/ssd_scan.h"
#include "reference/mamba_init.h"

namespace sg::model {

namespace {

size_t sz(int64_t n) { return static_cast<size_t>(n); }
long long ll(int64_t v) { return static_cast<long long>(v); }

// Megatron's MambaMixer init of one tensor, computed whole by reference/mamba_init.h (its values depend
// only on the seed, the tensor's stream and the element) and copied for the range asked.
using MambaFill = void (*)(float* out, int64_t numel, const ref::MambaInitSpec& spec, const InitStreams& s);
CustomInit mamba_init(MambaFill fill, const ref::MambaInitSpec& spec) {
  return [fill, spec](const ParamTensor& t, float* dst, int64_t begin, int64_t end, const InitStreams& s) {
    std::vector<float> all(sz(t.numel));
    fill(all.data(), t.numel, spec, s);
    std::copy(all.begin() + begin, all.begin() + end, dst + begin);
  };
}
void fill_A_log(float* out, int64_t n, const ref::MambaInitSpec& spec, const InitStreams& s) {
  ref::mamba_init_A_log(out, n, spec, s.seed, s.stream);
}
void fill_dt_bias(float* out, int64_t n, const ref::MambaInitSpec& spec, const InitStreams& s) {
  ref::mamba_init_dt_bias(out, n, spec, s.seed, s.stream);
}
void fill_conv_weight(float* out, int64_t n, const ref::MambaInitSpec& spec, const InitStreams& s) {
  ref::mamba_init_conv_weight(out, n / kernels::kCausalConv1dWidth, kernels::kCausalConv1dWidth, spec, s.seed,
                              s.stream);
}
void fill_conv_bias(float* out, int64_t n, const ref::MambaInitSpec& /*spec*/, const InitStreams& s) {
  ref::mamba_init_conv_bias(out, n, kernels::kCausalConv1dWidth, s.seed, s.stream);
}

void check_mamba_shapes(const ModelSpec& s) {
  const MambaSpec& m = s.mamba;
  auto positive = [](const char* key, int64_t v) {
    SG_CHECK(v > 0, strprintf("model.%s = %lld: must be positive", key, ll(v)));
  };
  positive("mamba_state_dim", m.state_dim);
  positive("mamba_head_dim", m.head_dim);
  positive("mamba_num_groups", m.num_groups);
  if (m.num_heads <= 0) {
    SG_CHECK(m.expand > 0 && (m.expand * s.hidden_size) % m.head_dim == 0,
             strprintf("model.mamba_num_heads is not set and %lld * hidden_size = %lld is not a multiple of "
                       "model.mamba_head_dim = %lld: set model.mamba_num_heads",
                       ll(m.expand), ll(m.expand * s.hidden_size), ll(m.head_dim)));
  }
  const int64_t heads = s.mamba_heads();
  positive("mamba_num_heads", heads);
  SG_CHECK(heads % m.num_groups == 0,
           strprintf("model.mamba_num_heads = %lld is not a multiple of model.mamba_num_groups = %lld: every group "
                     "of B and C serves a whole number of heads",
                     ll(heads), ll(m.num_groups)));
  SG_CHECK(m.conv_kernel == kernels::kCausalConv1dWidth,
           strprintf("model.mamba_conv_kernel = %lld: only 4 is supported (the causal conv1d kernel's width, "
                     "Megatron's d_conv default)",
                     ll(m.conv_kernel)));
  SG_CHECK(m.chunk_size == kernels::kSsdChunk,
           strprintf("model.mamba_chunk_size = %lld: only %d is supported (the SSD kernels' chunk, Megatron's "
                     "default)",
                     ll(m.chunk_size), kernels::kSsdChunk));
  SG_CHECK(m.dt_limit_min >= 0.0 && m.dt_limit_max > m.dt_limit_min,
           strprintf("model.mamba_dt_limit = [%g, %g]: need 0 <= min < max (Megatron's default is [0, inf])",
                     m.dt_limit_min, m.dt_limit_max));
}

ref::MambaInitSpec init_spec(const MambaSpec& m) {
  ref::MambaInitSpec spec;
  spec.A_init_min = m.A_init_min;
  spec.A_init_max = m.A_init_max;
  spec.dt_min = m.dt_min;
  spec.dt_max = m.dt_max;
  spec.dt_init_floor = m.dt_init_floor;
  ref::validate_mamba_init(spec);
  return spec;
}

}  // namespace

MambaDims MambaDims::of(const ModelSpec& m, const BatchSpec& b) {
  MambaDims d;
  d.T = b.tokens_per_microbatch(m);
  d.H = m.hidden_size;
  d.batch = b.micro_batch_size;
  d.seq = m.seq_length;
  d.heads = m.mamba_heads();
  d.head_dim = m.mamba.head_dim;
  d.groups = m.mamba.num_groups;
  d.state = m.mamba.state_dim;
  d.inner = m.mamba_inner();
  d.conv = m.mamba_conv_dim();
  d.in_proj = m.mamba_in_proj_dim();
  return d;
}

void MambaDeclarations::declare(LayerDeclarations& d) {
  check_mamba_shapes(d.model);
  const ref::MambaInitSpec init = init_spec(d.model.mamba);
  const int64_t H = d.model.hidden_size, heads = d.model.mamba_heads(), inner = d.model.mamba_inner();
  const int64_t conv = d.model.mamba_conv_dim(), P = d.model.mamba_in_proj_dim();
  const std::string& p = d.place.param_prefix;
  in_proj = d.params.matrix(p + "in_proj.weight", {P, H});
  conv_weight = d.params.matrix({{p + "conv1d.weight", {conv, 1, kernels::kCausalConv1dWidth}, ParamInit::custom,
                                  mamba_init(fill_conv_weight, init)}});
  out_proj = d.params.matrix(p + "out_proj.weight", {H, inner}, ParamInit::output_projection);
  conv_bias = d.params.vector({{p + "conv1d.bias", {conv}, ParamInit::custom, mamba_init(fill_conv_bias, init)}});
  // Read in fp32 by the forward (bind: main_weight).
  dt_bias = d.params.fp32_vector({{p + "dt_bias", {heads}, ParamInit::custom, mamba_init(fill_dt_bias, init)}});
  A_log = d.params.fp32_vector({{p + "A_log", {heads}, ParamInit::custom, mamba_init(fill_A_log, init)}});
  D = d.params.fp32_vector(p + "D", {heads}, ParamInit::ones);
  norm = d.params.vector(p + "norm.weight", {inner}, ParamInit::ones);
}

LayerFlops MambaLayer::flops_per_token(const ModelSpec& m) {
  // in_proj and out_proj, and Megatron's count of the SSD scan: 7 d_inner d_state per token forward,
  // three times that for forward + backward.
  const double H = static_cast<double>(m.hidden_size);
  return {.matmul_weights = H * static_cast<double>(m.mamba_in_proj_dim() + m.mamba_inner()),
          .scan = 21.0 * static_cast<double>(m.mamba_inner()) * static_cast<double>(m.mamba.state_dim)};
}

// The GEMMs of one Mamba layer; their cuBLASLt plans are cached in the step's Blas.
struct MambaLayer::Gemms {
  kernels::LinearForward in_proj, out_proj;
  kernels::LinearBackwardInput in_proj_dx, out_proj_dx;
  kernels::LinearBackwardWeight in_proj_dw, out_proj_dw;
  Gemms(kernels::Blas& b, const MambaDims& d, kernels::FloatDtype grad_dtype)
      : in_proj(b, d.T, d.H, d.in_proj),
        out_proj(b, d.T, d.inner, d.H),
        in_proj_dx(b, d.T, d.H, d.in_proj),
        out_proj_dx(b, d.T, d.inner, d.H),
        in_proj_dw(b, d.T, d.H, d.in_proj, grad_dtype),
        out_proj_dw(b, d.T, d.inner, d.H, grad_dtype) {}
};

MambaLayer::MambaLayer(LayerPlace place) : Layer(std::move(place)) {}
MambaLayer::~MambaLayer() = default;

namespace {
// dA and dD share one scratch buffer; dD starts at a 256-byte boundary.
int64_t dD_offset(int64_t heads) { return (heads + 63) / 64 * 64; }

kernels::SsdShape ssd_shape(const MambaDims& d) {
  return {.batch = d.batch,
          .seqlen = d.seq,
          .nheads = d.heads,
          .headdim = d.head_dim,
          .ngroups = d.groups,
          .dstate = d.state};
}
}  // namespace

void MambaLayer::plan(LayerPlanContext& ctx) {
  using graph::Module;
  model_ = ctx.model();
  dims_ = MambaDims::of(model_, ctx.batch());
  const MambaDims& d = dims_;
  full_recompute_ = ctx.full_recompute();
  const RecomputeModule by = RecomputeModule::mamba;  // every saved activation: the mixer reruns from n
  zxbcdt_slot_ = ctx.saved_array<bf16>(Module::mamba, "in_proj_out", sz(d.T * d.in_proj), by);
  xbc_slot_ = ctx.saved_array<bf16>(Module::mamba, "conv_out", sz(d.T * d.conv), by);
  dt_slot_ = ctx.saved_array<float>(Module::mamba, "dt", sz(d.T * d.heads), by);
  A_slot_ = ctx.saved_array<float>(Module::mamba, "A", sz(d.heads), by);
  y_slot_ = ctx.saved_array<bf16>(Module::mamba, "ssd_out", sz(d.T * d.inner), by);
  normed_slot_ = ctx.saved_array<bf16>(Module::mamba, "gated_norm_out", sz(d.T * d.inner), by);
  rstd_slot_ = ctx.saved_array<float>(Module::mamba, "gated_norm_rstd", sz(d.T * d.groups), by);
  d_normed_ref_ = ctx.scratch("grad.mamba_d_normed", sz(d.T * d.inner) * sizeof(bf16));
  d_xbc_ref_ = ctx.scratch("grad.mamba_d_conv_out", sz(d.T * d.conv) * sizeof(bf16));
  d_zxbcdt_ref_ = ctx.scratch("grad.mamba_d_in_proj_out", sz(d.T * d.in_proj) * sizeof(bf16));
  ddt_ref_ = ctx.scratch("grad.mamba_ddt", sz(d.T * d.heads) * sizeof(float));
  dA_dD_ref_ = ctx.scratch("grad.mamba_dA_dD", sz(dD_offset(d.heads) + d.heads) * sizeof(float));
}

void MambaLayer::plan_device(DevicePlanContext& ctx) {
  const MambaDims& d = dims_;
  ssd_ws_bytes_ = kernels::ssd_workspace_bytes(ssd_shape(d));
  conv_ws_bytes_ = kernels::causal_conv1d_backward_scratch_bytes(d.batch, d.seq, d.conv);
  dt_ws_bytes_ = kernels::mamba_dt_backward_scratch_bytes(d.T, d.heads);
  norm_ws_bytes_ = kernels::gated_rmsnorm_backward_scratch_bytes(d.T, d.inner, d.groups);
  ssd_ws_ref_ = ctx.workspace("workspace.ssd_scan", ssd_ws_bytes_);
  conv_ws_ref_ = ctx.workspace("workspace.mamba_conv_partials", conv_ws_bytes_);
  dt_ws_ref_ = ctx.workspace("workspace.mamba_dt_partials", dt_ws_bytes_);
  norm_ws_ref_ = ctx.workspace("workspace.mamba_norm_partials", norm_ws_bytes_);
}

void MambaLayer::bind(LayerBindContext& ctx) {
  zxbcdt_ = ctx.get<bf16>(zxbcdt_slot_);
  xbc_ = ctx.get<bf16>(xbc_slot_);
  dt_ = ctx.get<float>(dt_slot_);
  A_ = ctx.get<float>(A_slot_);
  y_ = ctx.get<bf16>(y_slot_);
  normed_ = ctx.get<bf16>(normed_slot_);
  rstd_ = ctx.get<float>(rstd_slot_);
  d_normed_ = ctx.get<bf16>(d_normed_ref_);
  d_xbc_ = ctx.get<bf16>(d_xbc_ref_);
  d_zxbcdt_ = ctx.get<bf16>(d_zxbcdt_ref_);
  ddt_ = ctx.get<float>(ddt_ref_);
  dA_ = ctx.get<float>(dA_dD_ref_);
  dD_ = dA_ + dD_offset(dims_.heads);
  ssd_ws_ = ctx.get<void>(ssd_ws_ref_);
  conv_ws_ = ctx.get<float>(conv_ws_ref_);
  dt_ws_ = ctx.get<float>(dt_ws_ref_);
  norm_ws_ = ctx.get<float>(norm_ws_ref_);
  w_in_ = ctx.weight(decl_.in_proj);
  w_conv_ = ctx.weight(decl_.conv_weight);
  b_conv_ = ctx.weight(decl_.conv_bias);
  w_norm_ = ctx.weight(decl_.norm);
  w_out_ = ctx.weight(decl_.out_proj);
  dt_bias_ = ctx.main_weight(decl_.dt_bias);
  A_log_ = ctx.main_weight(decl_.A_log);
  D_ = ctx.main_weight(decl_.D);
  g_in_ = ctx.grad(decl_.in_proj);
  g_conv_ = ctx.grad(decl_.conv_weight);
  g_conv_bias_ = ctx.grad(decl_.conv_bias);
  g_norm_ = ctx.grad(decl_.norm);
  g_out_ = ctx.grad(decl_.out_proj);
  g_dt_bias_ = ctx.grad(decl_.dt_bias);
  g_A_log_ = ctx.grad(decl_.A_log);
  g_D_ = ctx.grad(decl_.D);
  gemms_ = std::make_unique<Gemms>(ctx.blas(), dims_, ctx.grad_dtype());
}

struct MambaLayer::ScanInputs {
  const bf16 *x, *Bm, *Cm;  // column slices of the conv output row [x | B | C]
  int64_t row_stride;       // theirs: the row's width
  const float *dt, *A, *D;
  void* workspace;
  size_t workspace_bytes;
  kernels::SsdShape shape;
};

MambaLayer::ScanInputs MambaLayer::scan_inputs() const {
  const MambaDims& d = dims_;
  return {.x = xbc_,
          .Bm = xbc_ + d.inner,
          .Cm = xbc_ + d.inner + d.groups * d.state,
          .row_stride = d.conv,
          .dt = dt_,
          .A = A_,
          .D = D_,
          .workspace = ssd_ws_,
          .workspace_bytes = ssd_ws_bytes_,
          .shape = ssd_shape(d)};
}

void MambaLayer::forward(graph::Module /*module: mamba*/, cudaStream_t stream, const LayerIO& io) {
  mixer_forward(stream, io);
  gemms_->out_proj.run(stream, io.output, normed_, w_out_);
}

void MambaLayer::recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) {
  if (full_recompute_) {
    forward(module, stream, io);
  } else {
    mixer_forward(stream, io);  // the output is not needed: the step adds it only in the forward
  }
}

void MambaLayer::mixer_forward(cudaStream_t stream, const LayerIO& io) {
  const MambaDims& d = dims_;
  const MambaSpec& m = model_.mamba;
  bf16* xbc_in = zxbcdt_ + d.inner;
  bf16* dt_raw = zxbcdt_ + d.inner + d.conv;
  gemms_->in_proj.run(stream, zxbcdt_, io.input, w_in_);
  kernels::causal_conv1d_silu_forward(stream, {.out = xbc_,
                                               .in = xbc_in,
                                               .weight = w_conv_,
                                               .bias = b_conv_,
                                               .B = d.batch,
                                               .S = d.seq,
                                               .C = d.conv,
                                               .in_row_stride = d.in_proj});
  kernels::mamba_dt_forward(stream, {.dt = dt_,
                                     .dt_raw = dt_raw,
                                     .dt_bias = dt_bias_,
                                     .T = d.T,
                                     .H = d.heads,
                                     .dt_raw_row_stride = d.in_proj,
                                     .dt_min = static_cast<float>(m.dt_limit_min),
                                     .dt_max = static_cast<float>(m.dt_limit_max)});
  kernels::mamba_a_forward(stream, {.A = A_, .A_log = A_log_, .H = d.heads});
  const ScanInputs scan = scan_inputs();
  kernels::ssd_scan_forward(stream, {.y = y_,
                                     .x = scan.x,
                                     .dt = scan.dt,
                                     .A = scan.A,
                                     .Bm = scan.Bm,
                                     .Cm = scan.Cm,
                                     .D = scan.D,
                                     .workspace = scan.workspace,
                                     .workspace_bytes = scan.workspace_bytes,
                                     .shape = scan.shape,
                                     .x_row_stride = scan.row_stride,
                                     .bm_row_stride = scan.row_stride,
                                     .cm_row_stride = scan.row_stride});
  kernels::gated_rmsnorm_forward(stream, {.out = normed_,
                                          .rstd = rstd_,
                                          .y = y_,
                                          .z = zxbcdt_,
                                          .weight = w_norm_,
                                          .T = d.T,
                                          .D = d.inner,
                                          .G = d.groups,
                                          .z_row_stride = d.in_proj,
                                          .eps = static_cast<float>(model_.layernorm_epsilon)});
}

void MambaLayer::backward(graph::Module /*module: mamba*/, cudaStream_t stream, const LayerIO& io) {
  const MambaDims& d = dims_;
  const MambaSpec& m = model_.mamba;
  const int64_t bc = d.groups * d.state;
  gemms_->out_proj_dx.run(stream, d_normed_, io.d_output, w_out_);
  gemms_->out_proj_dw.run(stream, g_out_, io.d_output, normed_, io.first_microbatch);
  // dy overwrites d_normed_ in place (allowed); dz goes into the z columns of d in_proj_out.
  kernels::gated_rmsnorm_backward(stream, {.dy = d_normed_,
                                           .dz = d_zxbcdt_,
                                           .dweight = g_norm_,
                                           .scratch = norm_ws_,
                                           .scratch_bytes = norm_ws_bytes_,
                                           .dout = d_normed_,
                                           .y = y_,
                                           .z = zxbcdt_,
                                           .weight = w_norm_,
                                           .rstd = rstd_,
                                           .T = d.T,
                                           .D = d.inner,
                                           .G = d.groups,
                                           .z_row_stride = d.in_proj,
                                           .dz_row_stride = d.in_proj});
  // dx, dB, dC straight into the columns of d conv_out.
  const ScanInputs scan = scan_inputs();
  kernels::ssd_scan_backward(stream, {.dx = d_xbc_,
                                      .ddt = ddt_,
                                      .dA = dA_,
                                      .dBm = d_xbc_ + d.inner,
                                      .dCm = d_xbc_ + d.inner + bc,
                                      .dD = dD_,
                                      .dy = d_normed_,
                                      .x = scan.x,
                                      .dt = scan.dt,
                                      .A = scan.A,
                                      .Bm = scan.Bm,
                                      .Cm = scan.Cm,
                                      .D = scan.D,
                                      .workspace = scan.workspace,
                                      .workspace_bytes = scan.workspace_bytes,
                                      .shape = scan.shape,
                                      .x_row_stride = scan.row_stride,
                                      .bm_row_stride = scan.row_stride,
                                      .cm_row_stride = scan.row_stride,
                                      .dx_row_stride = d.conv,
                                      .dbm_row_stride = d.conv,
                                      .dcm_row_stride = d.conv});
  kernels::mamba_dt_backward(stream, {.ddt_raw = d_zxbcdt_ + d.inner + d.conv,
                                      .ddt_bias = g_dt_bias_,
                                      .scratch = dt_ws_,
                                      .scratch_bytes = dt_ws_bytes_,
                                      .ddt = ddt_,
                                      .dt_raw = zxbcdt_ + d.inner + d.conv,
                                      .dt_bias = dt_bias_,
                                      .T = d.T,
                                      .H = d.heads,
                                      .dt_raw_row_stride = d.in_proj,
                                      .ddt_raw_row_stride = d.in_proj,
                                      .dt_min = static_cast<float>(m.dt_limit_min),
                                      .dt_max = static_cast<float>(m.dt_limit_max)});
  kernels::mamba_a_backward(stream, {.dA_log = g_A_log_, .dA = dA_, .A_log = A_log_, .H = d.heads});
  kernels::add_partial_column_sums(stream, dD_, 1, {{g_D_, d.heads}});
  kernels::causal_conv1d_silu_backward(stream, {.din = d_zxbcdt_ + d.inner,
                                                .dweight = g_conv_,
                                                .dbias = g_conv_bias_,
                                                .scratch = conv_ws_,
                                                .scratch_bytes = conv_ws_bytes_,
                                                .dout = d_xbc_,
                                                .in = zxbcdt_ + d.inner,
                                                .weight = w_conv_,
                                                .bias = b_conv_,
                                                .B = d.batch,
                                                .S = d.seq,
                                                .C = d.conv,
                                                .in_row_stride = d.in_proj,
                                                .din_row_stride = d.in_proj});
  gemms_->in_proj_dx.run(stream, io.d_input, d_zxbcdt_, w_in_);
  gemms_->in_proj_dw.run(stream, g_in_, d_zxbcdt_, io.input, io.first_microbatch);
}

}  // namespace sg::model
