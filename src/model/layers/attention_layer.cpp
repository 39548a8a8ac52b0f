// The attention layer's declarations and its GPU side (the CPU twin: attention_layer_cpu.cpp).
#include "model/layers/attention_layer.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/gemm.h"
#include "kernels/partial_sums.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

void AttentionDeclarations::declare(LayerDeclarations& d) {
  const ModelSpec& s = d.model;
  SG_CHECK(s.num_attention_heads > 0 && s.num_query_groups > 0,
           strprintf("model.num_attention_heads = %lld and model.num_query_groups = %lld must be positive",
                     static_cast<long long>(s.num_attention_heads), static_cast<long long>(s.num_query_groups)));
  SG_CHECK(s.kv_channels > 0 || s.hidden_size % s.num_attention_heads == 0,
           strprintf("model.hidden_size = %lld is not a multiple of model.num_attention_heads = %lld: pick "
                     "heads that divide the hidden size",
                     static_cast<long long>(s.hidden_size), static_cast<long long>(s.num_attention_heads)));
  SG_CHECK(s.num_attention_heads % s.num_query_groups == 0,
           strprintf("model.num_attention_heads = %lld is not a multiple of model.num_query_groups = %lld: "
                     "grouped-query attention needs whole groups",
                     static_cast<long long>(s.num_attention_heads), static_cast<long long>(s.num_query_groups)));
  SG_CHECK(s.position_embedding != PositionEmbedding::rope || s.head_dim() % 2 == 0,
           strprintf("head_dim (model.kv_channels, or hidden_size / num_attention_heads) = %lld is odd: "
                     "rotate-half RoPE needs an even head_dim",
                     static_cast<long long>(s.head_dim())));
  const int64_t H = s.hidden_size, Q = s.q_dim(), KV = s.kv_dim();
  const std::string& p = d.place.param_prefix;
  qkv = d.params.matrix({{p + "q_proj.weight", {Q, H}},
                         {p + "k_proj.weight", {KV, H}},
                         {p + "v_proj.weight", {KV, H}}});
  o_proj = d.params.matrix(p + "o_proj.weight", {H, Q}, ParamInit::output_projection);
  if (s.has_qkv_bias()) {
    qkv_bias = d.params.vector({{p + "q_proj.bias", {Q}, ParamInit::zeros},
                                {p + "k_proj.bias", {KV}, ParamInit::zeros},
                                {p + "v_proj.bias", {KV}, ParamInit::zeros}});
  }
  if (s.add_bias_linear) o_proj_bias = d.params.vector(p + "o_proj.bias", {H}, ParamInit::zeros);
  if (s.qk_layernorm) {
    q_norm = d.params.vector(p + "q_norm.weight", {s.head_dim()});
    k_norm = d.params.vector(p + "k_norm.weight", {s.head_dim()});
  }
  probs_site = d.dropout_sites.next();
}

std::array<QkNormRows, 2> AttentionDeclarations::qk_norms(const ModelSpec& m, int64_t T) const {
  const int64_t heads = m.num_attention_heads;
  return {{{.weight = q_norm, .column = 0, .per_token = heads, .rstd_offset = 0},
           {.weight = k_norm, .column = m.q_dim(), .per_token = m.num_query_groups, .rstd_offset = T * heads}}};
}

LayerFlops AttentionLayer::flops_per_token(const ModelSpec& m) {
  const double H = static_cast<double>(m.hidden_size);
  return {.matmul_weights = H * static_cast<double>(m.qkv_dim()) + H * static_cast<double>(m.q_dim()),
          .attention = static_cast<double>(m.q_dim()) / H};
}

// The GEMMs of one attention layer; their cuBLASLt plans are cached in the step's Blas, so every
// attention layer shares them.
struct AttentionLayer::Gemms {
  kernels::LinearForward qkv, o_proj;           // y[T, N] = x[T, K] W^T
  kernels::LinearBackwardInput qkv_dx, o_proj_dx;  // dx = dy W
  kernels::LinearBackwardWeight qkv_dw, o_proj_dw;  // dW += dy^T x (main_grad; = in the first microbatch)
  Gemms(kernels::Blas& b, int64_t T, int64_t H, int64_t Q, int64_t QKV, bool qkv_bias, bool o_proj_bias,
        kernels::FloatDtype grad_dtype)
      : qkv(b, T, H, QKV, qkv_bias),
        o_proj(b, T, Q, H, o_proj_bias),
        qkv_dx(b, T, H, QKV),
        o_proj_dx(b, T, Q, H),
        qkv_dw(b, T, H, QKV, grad_dtype),
        o_proj_dw(b, T, Q, H, grad_dtype) {}
};

AttentionLayer::AttentionLayer(LayerPlace place) : Layer(std::move(place)) {}
AttentionLayer::~AttentionLayer() = default;

void AttentionLayer::plan(LayerPlanContext& ctx) {
  using graph::Module;
  model_ = ctx.model();
  T_ = ctx.tokens();
  const int64_t Q = model_.q_dim(), QKV = model_.qkv_dim();
  const int64_t lse_count = ctx.batch().micro_batch_size * model_.num_attention_heads * model_.seq_length;
  full_recompute_ = ctx.full_recompute();
  qkv_slot_ = ctx.saved_array<bf16>(Module::attn, "qkv", sz(T_ * QKV));
  attn_slot_ = ctx.saved_array<bf16>(Module::attn, "attn_out", sz(T_ * Q), RecomputeModule::core_attn);
  lse_slot_ = ctx.saved_array<float>(Module::attn, "softmax_lse", sz(lse_count), RecomputeModule::core_attn);
  d_attn_ref_ = ctx.scratch("grad.d_attn", sz(T_ * Q) * sizeof(bf16));
  d_qkv_ref_ = ctx.scratch("grad.d_qkv", sz(T_ * QKV) * sizeof(bf16));
  if (model_.qk_layernorm) {
    const int64_t norm_rows = T_ * (model_.num_attention_heads + model_.num_query_groups);
    qkv_proj_slot_ = ctx.saved_array<bf16>(Module::attn, "qkv_before_qk_norm", sz(T_ * QKV));
    qk_rstd_slot_ = ctx.saved_array<float>(Module::attn, "qk_norm_rstd", sz(norm_rows));
  }
  if (model_.attention_dropout > 0.0f) dropout_slot_ = ctx.attention_dropout_slot(decl_.probs_site);
  if (model_.position_embedding == PositionEmbedding::rope) {
    rope_table_ref_ =
        ctx.shared_state("rope_cos_sin", kernels::rope_table_bytes(model_.seq_length, model_.rope_rotated_dims()));
  }
}

void AttentionLayer::plan_device(DevicePlanContext& ctx) {
  kernels::AttentionShape shape;
  shape.batch = ctx.batch().micro_batch_size;
  shape.seq_len = model_.seq_length;
  shape.heads = model_.num_attention_heads;
  shape.kv_heads = model_.num_query_groups;
  shape.head_dim = model_.head_dim();
  shape.dropout_p = model_.attention_dropout;
  attention_ = &ctx.objects().get<kernels::AttentionPlan>(
      "attention.cudnn_plan", [&] { return std::make_unique<kernels::AttentionPlan>(ctx.cudnn(), shape); });
  workspace_ref_ = ctx.workspace("workspace.cudnn_attention", attention_->workspace_bytes());
  if (model_.qk_layernorm) {
    // The query heads' rows outnumber the keys': their partial rows serve both backwards, one after the other.
    qk_norm_partials_bytes_ = kernels::rmsnorm_backward_scratch_bytes(T_ * model_.num_attention_heads, shape.head_dim);
    qk_norm_partials_ref_ = ctx.workspace("workspace.qk_norm_partials", qk_norm_partials_bytes_);
  }
  qkv_bias_.plan_device(ctx, model_.has_qkv_bias(), T_, model_.qkv_dim());
  o_proj_bias_.plan_device(ctx, model_.add_bias_linear, T_, model_.hidden_size);
  if (shape.dropout_p > 0.0f) {
    // Evaluation runs with dropout off (Megatron's model.eval()); cuDNN's dropout is a plan-time constant.
    shape.dropout_p = 0.0f;
    eval_attention_ = &ctx.objects().get<kernels::AttentionPlan>(
        "attention.cudnn_plan_eval", [&] { return std::make_unique<kernels::AttentionPlan>(ctx.cudnn(), shape); });
    ctx.workspace("workspace.cudnn_attention", eval_attention_->forward_workspace_bytes());
  }
}

void AttentionLayer::bind(LayerBindContext& ctx) {
  qkv_ = ctx.get<bf16>(qkv_slot_);
  attn_ = ctx.get<bf16>(attn_slot_);
  lse_ = ctx.get<float>(lse_slot_);
  d_attn_ = ctx.get<bf16>(d_attn_ref_);
  d_qkv_ = ctx.get<bf16>(d_qkv_ref_);
  workspace_ = ctx.get<void>(workspace_ref_);
  size_t cudnn_bytes = attention_->workspace_bytes();
  if (eval_attention_ != nullptr) cudnn_bytes = std::max(cudnn_bytes, eval_attention_->forward_workspace_bytes());
  workspace_registration_ = cuda::LibraryWorkspace(workspace_, cudnn_bytes);
  w_qkv_ = ctx.weight(decl_.qkv);
  w_o_ = ctx.weight(decl_.o_proj);
  g_qkv_ = ctx.grad(decl_.qkv);
  g_o_ = ctx.grad(decl_.o_proj);
  if (model_.qk_layernorm) {
    qkv_proj_ = ctx.get<bf16>(qkv_proj_slot_);
    qk_rstd_ = ctx.get<float>(qk_rstd_slot_);
    qk_norm_partials_ = ctx.get<float>(qk_norm_partials_ref_);
    const std::array<QkNormRows, 2> norms = decl_.qk_norms(model_, T_);
    for (size_t i = 0; i < norms.size(); ++i) {
      qk_norm_weights_[i] = ctx.weight(norms[i].weight);
      qk_norm_grads_[i] = ctx.grad(norms[i].weight);
    }
  }
  qkv_bias_.bind(ctx, decl_.qkv_bias);
  o_proj_bias_.bind(ctx, decl_.o_proj_bias);
  if (dropout_slot_ >= 0) {
    dropout_seed_ = ctx.pointers().attention_dropout_seeds + dropout_slot_;
    dropout_offset_ = ctx.pointers().attention_dropout_offsets + dropout_slot_;
  }
  gemms_ = std::make_unique<Gemms>(ctx.blas(), T_, model_.hidden_size, model_.q_dim(), model_.qkv_dim(),
                                   qkv_bias_.present(), o_proj_bias_.present(), ctx.grad_dtype());
  if (model_.position_embedding == PositionEmbedding::rope) rope_table_ = rope_cos_sin_table(ctx);
}

// The first attention layer bound fills the shared table (on the legacy stream, waited for here: bind is
// setup, before any step); the others reuse what it returned.
kernels::RopeTable AttentionLayer::rope_cos_sin_table(LayerBindContext& ctx) const {
  float* storage = ctx.get<float>(rope_table_ref_);
  return ctx.objects().get<kernels::RopeTable>("attention.rope_cos_sin_table", [&] {
    auto table =
        std::make_unique<kernels::RopeTable>(kernels::rope_table_build(nullptr, {.cos_sin = storage,
                                                                                 .positions = model_.seq_length,
                                                                                 .head_dim = model_.rope_rotated_dims(),
                                                                                 .base = model_.rotary_base,
                                                                                 .scaling = model_.rope_scaling}));
    SG_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    return table;
  });
}

namespace {
kernels::RopeParams rope_params(const ModelSpec& m, bf16* x, int64_t T, const kernels::RopeTable& table) {
  // q and k heads are contiguous in the QKV row: rotate them in one launch.
  return {.x = x,
          .T = T,
          .S = m.seq_length,
          .num_heads = m.num_attention_heads + m.num_query_groups,
          .head_dim = m.head_dim(),
          .rotary_dim = m.rotary_dim,
          .row_stride = m.qkv_dim(),
          .base = m.rotary_base,
          .scaling = m.rope_scaling,
          .table = table};
}
}  // namespace

// `dropout` false: the evaluation forward, with the plan built without dropout (when there is one).
void AttentionLayer::attention_forward(cudaStream_t stream, bool dropout) {
  const bool with_dropout = dropout || eval_attention_ == nullptr;
  (with_dropout ? attention_ : eval_attention_)
      ->forward(stream, {.out = attn_,
                         .lse = lse_,
                         .qkv = qkv_,
                         .dropout_seed = with_dropout ? dropout_seed_ : nullptr,
                         .dropout_offset = with_dropout ? dropout_offset_ : nullptr,
                         .workspace = workspace_});
}

// The query heads, then the key heads, of qkv_proj_ as rows of head_dim into qkv_; the values copied as they are.
void AttentionLayer::qk_norm_forward(cudaStream_t stream) {
  const ModelSpec& m = model_;
  const int64_t Q = m.q_dim(), KV = m.kv_dim(), QKV = m.qkv_dim();
  const std::array<QkNormRows, 2> norms = decl_.qk_norms(m, T_);
  for (size_t i = 0; i < norms.size(); ++i) {
    const QkNormRows& n = norms[i];
    kernels::rmsnorm_forward(stream, {.out = qkv_ + n.column,
                                      .rstd = qk_rstd_ + n.rstd_offset,
                                      .in = qkv_proj_ + n.column,
                                      .weight = qk_norm_weights_[i],
                                      .T = T_ * n.per_token,
                                      .H = m.head_dim(),
                                      .eps = static_cast<float>(m.layernorm_epsilon),
                                      .rows_per_group = n.per_token,
                                      .group_stride = QKV});
  }
  const size_t row_bytes = sz(QKV) * sizeof(bf16);
  SG_CUDA_CHECK(cudaMemcpy2DAsync(qkv_ + Q + KV, row_bytes, qkv_proj_ + Q + KV, row_bytes, sz(KV) * sizeof(bf16),
                                  sz(T_), cudaMemcpyDeviceToDevice, stream));
}

// d_qkv_'s query and key heads through their norms, in place; the weight gradients summed from the partial rows
// (into main_grad of either dtype).
void AttentionLayer::qk_norm_backward(cudaStream_t stream) {
  const ModelSpec& m = model_;
  const int64_t d = m.head_dim();
  const std::array<QkNormRows, 2> norms = decl_.qk_norms(m, T_);
  for (size_t i = 0; i < norms.size(); ++i) {
    const QkNormRows& n = norms[i];
    kernels::rmsnorm_backward(stream, {.din = d_qkv_ + n.column,
                                       .dweight = nullptr,
                                       .scratch = qk_norm_partials_,
                                       .scratch_bytes = qk_norm_partials_bytes_,
                                       .dout = d_qkv_ + n.column,
                                       .in = qkv_proj_ + n.column,
                                       .weight = qk_norm_weights_[i],
                                       .rstd = qk_rstd_ + n.rstd_offset,
                                       .T = T_ * n.per_token,
                                       .H = d,
                                       .rows_per_group = n.per_token,
                                       .group_stride = m.qkv_dim()});
    kernels::add_partial_column_sums(stream, qk_norm_partials_,
                                     kernels::rmsnorm_backward_num_partials(T_ * n.per_token),
                                     {{.dst = qk_norm_grads_[i], .cols = d}});
  }
}

void AttentionLayer::forward(graph::Module /*module: attn*/, cudaStream_t stream, const LayerIO& io) {
  if (model_.qk_layernorm) {
    gemms_->qkv.run(stream, qkv_proj_, io.input, w_qkv_, qkv_bias_.weight());
    qk_norm_forward(stream);
  } else {
    gemms_->qkv.run(stream, qkv_, io.input, w_qkv_, qkv_bias_.weight());
  }
  if (model_.position_embedding == PositionEmbedding::rope)
    kernels::rope_forward(stream, rope_params(model_, qkv_, T_, rope_table_));
  attention_forward(stream, io.dropout);
  gemms_->o_proj.run(stream, io.output, attn_, w_o_, o_proj_bias_.weight());
}

void AttentionLayer::recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) {
  if (full_recompute_) {
    forward(module, stream, io);
  } else {
    attention_forward(stream, io.dropout);  // core_attn: qkv was kept
  }
}

void AttentionLayer::backward(graph::Module /*module: attn*/, cudaStream_t stream, const LayerIO& io) {
  gemms_->o_proj_dx.run(stream, d_attn_, io.d_output, w_o_);
  gemms_->o_proj_dw.run(stream, g_o_, io.d_output, attn_, io.first_microbatch);
  o_proj_bias_.backward(stream, io.d_output);
  attention_->backward(stream, {.dqkv = d_qkv_,
                                .dout = d_attn_,
                                .qkv = qkv_,
                                .out = attn_,
                                .lse = lse_,
                                .dropout_seed = dropout_seed_,
                                .dropout_offset = dropout_offset_,
                                .workspace = workspace_});
  if (model_.position_embedding == PositionEmbedding::rope) {
    kernels::rope_backward(stream, rope_params(model_, d_qkv_, T_, rope_table_));
  }
  if (model_.qk_layernorm) qk_norm_backward(stream);
  gemms_->qkv_dx.run(stream, io.d_input, d_qkv_, w_qkv_);
  gemms_->qkv_dw.run(stream, g_qkv_, d_qkv_, io.input, io.first_microbatch);
  qkv_bias_.backward(stream, d_qkv_);
}

}  // namespace sg::model
