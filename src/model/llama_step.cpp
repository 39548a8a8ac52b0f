// LlamaStep: planning (memory, GEMMs, attention) and the synchronous setup / inspection calls.
// The step itself is in llama_step_run.cpp.
#include "model/llama_step.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/rmsnorm.h"
#include "model/llama_step_gemms.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

LlamaStep::LlamaStep(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer, uint64_t seed,
                     const LlamaStepOptions& options)
    : layout_(model), batch_(batch), optimizer_(optimizer), rng_(seed) {
  SG_CHECK(batch.micro_batch_size > 0 && batch.num_microbatches > 0,
           strprintf("micro_batch_size = %lld and num_microbatches = %lld must be positive",
                     static_cast<long long>(batch.micro_batch_size), static_cast<long long>(batch.num_microbatches)));
  T_ = batch.tokens_per_microbatch(model);
  // Plan-time work that needs the device but not the arena: cuDNN graphs (their workspace size), CUB's
  // scratch size for the embedding backward, the LM head's chunking.
  cudnn_ = std::make_unique<kernels::CudnnContext>();
  kernels::AttentionShape shape;
  shape.batch = batch.micro_batch_size;
  shape.seq_len = model.seq_length;
  shape.heads = model.num_attention_heads;
  shape.kv_heads = model.num_query_groups;
  shape.head_dim = model.head_dim();
  shape.dropout_p = model.attention_dropout;
  attention_ = std::make_unique<kernels::AttentionPlan>(*cudnn_, shape);
  if (shape.dropout_p > 0.0f) {
    // Evaluation runs with dropout off (Megatron's model.eval()); cuDNN's dropout is a plan-time constant.
    shape.dropout_p = 0.0f;
    eval_attention_ = std::make_unique<kernels::AttentionPlan>(*cudnn_, shape);
  }
  lm_head_layout_ = kernels::lm_head_layout({T_, model.hidden_size, model.vocab_size}, options.lm_head_chunk_budget_bytes);
  embedding_scratch_bytes_ = kernels::embedding_backward_scratch_bytes(T_, model.vocab_size);
  rmsnorm_scratch_bytes_ = kernels::rmsnorm_backward_scratch_bytes(T_, model.hidden_size);

  plan_memory(options);

  blas_ = std::make_unique<kernels::Blas>(cublas_workspace_, kernels::Blas::kWorkspaceBytes);
  gemms_ = std::make_unique<Gemms>(*blas_, T_, model.hidden_size, model.qkv_dim(), model.ffn_hidden_size);
  lm_head_ = std::make_unique<kernels::LmHeadPlan>(*blas_, kernels::LmHeadShape{T_, model.hidden_size, model.vocab_size},
                                                   1.0f / static_cast<float>(batch.num_microbatches),
                                                   options.lm_head_chunk_budget_bytes);
  SG_CHECK(lm_head_->layout().workspace_bytes == lm_head_layout_.workspace_bytes,
           "LM head workspace differs between lm_head_layout() and LmHeadPlan (kernels/lm_head.h)");
}

LlamaStep::~LlamaStep() = default;

cuda::MemoryPlan LlamaStep::plan_memory(const ModelSpec& m, const BatchSpec& batch, const LlamaStepOptions& options,
                                        const DeviceWorkspaceSizes& device) {
  using cuda::MemoryCategory;
  const int64_t T = batch.tokens_per_microbatch(m), H = m.hidden_size, F = m.ffn_hidden_size, QKV = m.qkv_dim(),
                L = m.num_layers;
  const int64_t n = ParamLayout(m).total();
  const int64_t lse_count = batch.micro_batch_size * m.num_attention_heads * m.seq_length;
  cuda::MemoryPlan plan;

  plan.add_array<bf16>("parameters.bf16", MemoryCategory::parameters, sz(n));
  plan.add_array<float>("main_weights.fp32", MemoryCategory::main_weights, sz(n));
  plan.add_array<float>("gradients.fp32", MemoryCategory::gradients, sz(n));
  plan.add_array<float>("optimizer.exp_avg", MemoryCategory::optimizer_state, sz(n));
  plan.add_array<float>("optimizer.exp_avg_sq", MemoryCategory::optimizer_state, sz(n));
  plan.add("step.scalars", MemoryCategory::optimizer_state, sizeof(StepScalars));
  cuda::RngTracker(0).plan(plan, "rng.states");  // the size depends on the generators, not the seed
  plan.add_array<int64_t>("attention.dropout_seeds", MemoryCategory::optimizer_state, sz(L));
  plan.add_array<int64_t>("attention.dropout_offsets", MemoryCategory::optimizer_state, sz(L));

  // Activations of one microbatch. Residual stream and input norms: L + 1 entries (the last is the final
  // norm's input / output).
  for (int64_t l = 0; l <= L; ++l) {
    const long long i = static_cast<long long>(l);
    plan.add_array<bf16>(strprintf("act.resid%lld", i), MemoryCategory::activations, sz(T * H));
    plan.add_array<bf16>(strprintf("act.norm_in%lld", i), MemoryCategory::activations, sz(T * H));
    plan.add_array<float>(strprintf("act.rstd_in%lld", i), MemoryCategory::activations, sz(T));
  }
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = strprintf("act.layer%lld.", static_cast<long long>(l));
    plan.add_array<bf16>(p + "qkv", MemoryCategory::activations, sz(T * QKV));
    plan.add_array<bf16>(p + "attn_out", MemoryCategory::activations, sz(T * H));
    plan.add_array<float>(p + "softmax_lse", MemoryCategory::activations, sz(lse_count));
    plan.add_array<bf16>(p + "resid_mid", MemoryCategory::activations, sz(T * H));
    plan.add_array<bf16>(p + "norm_post", MemoryCategory::activations, sz(T * H));
    plan.add_array<float>(p + "rstd_post", MemoryCategory::activations, sz(T));
    plan.add_array<bf16>(p + "gate_up", MemoryCategory::activations, sz(T * 2 * F));
    plan.add_array<bf16>(p + "swiglu_out", MemoryCategory::activations, sz(T * F));
  }
  // Scratch shared by every layer (each region uses fixed ones).
  plan.add_array<bf16>("act.delta", MemoryCategory::activations, sz(T * H));
  plan.add_array<bf16>("grad.d_resid_a", MemoryCategory::activations, sz(T * H));
  plan.add_array<bf16>("grad.d_resid_b", MemoryCategory::activations, sz(T * H));
  plan.add_array<bf16>("grad.d_delta", MemoryCategory::activations, sz(T * H));
  plan.add_array<bf16>("grad.d_norm", MemoryCategory::activations, sz(T * H));
  plan.add_array<bf16>("grad.d_attn", MemoryCategory::activations, sz(T * H));
  plan.add_array<bf16>("grad.d_qkv", MemoryCategory::activations, sz(T * QKV));
  plan.add_array<bf16>("grad.d_gate_up", MemoryCategory::activations, sz(T * 2 * F));
  plan.add_array<bf16>("grad.d_act", MemoryCategory::activations, sz(T * F));

  plan.add("workspace.cublaslt", MemoryCategory::workspaces, kernels::Blas::kWorkspaceBytes);
  plan.add("workspace.cudnn_attention", MemoryCategory::workspaces, device.attention);
  plan.add("workspace.lm_head", MemoryCategory::workspaces,
           kernels::lm_head_layout({T, H, m.vocab_size}, options.lm_head_chunk_budget_bytes).workspace_bytes);
  plan.add("workspace.rmsnorm_backward", MemoryCategory::workspaces, kernels::rmsnorm_backward_scratch_bytes(T, H));
  plan.add("workspace.embedding_backward", MemoryCategory::workspaces, device.embedding_backward);
  plan.add("workspace.grad_norm", MemoryCategory::workspaces, kernels::kGradNormScratchBytes);

  const size_t batch_tokens = sz(T * batch.num_microbatches);
  plan.add_array<int32_t>("input.tokens", MemoryCategory::inputs, batch_tokens);
  plan.add_array<int32_t>("input.targets", MemoryCategory::inputs, batch_tokens);
  plan.add_array<float>("input.loss_mask", MemoryCategory::inputs, batch_tokens);
  return plan;
}

void LlamaStep::plan_memory(const LlamaStepOptions& options) {
  const ModelSpec& m = layout_.spec();
  const int64_t L = m.num_layers;
  DeviceWorkspaceSizes device;
  device.attention = attention_->workspace_bytes();
  if (eval_attention_) device.attention = std::max(device.attention, eval_attention_->forward_workspace_bytes());
  device.embedding_backward = embedding_scratch_bytes_;
  const cuda::MemoryPlan plan = plan_memory(m, batch_, options, device);

  arena_ = std::make_unique<cuda::Arena>(plan);
  arena_->zero();
  const auto at = [&](const std::string& name) {
    const cuda::MemorySlot slot = plan.find(name);
    SG_CHECK(slot.valid(), "LlamaStep: no planned buffer named " + name);
    return arena_->raw(slot);
  };
  const auto get = [&]<class T>(const std::string& name, T*& out) { out = static_cast<T*>(at(name)); };

  get("parameters.bf16", params_);
  get("main_weights.fp32", main_weights_);
  get("gradients.fp32", grads_);
  get("optimizer.exp_avg", exp_avg_);
  get("optimizer.exp_avg_sq", exp_avg_sq_);
  get("step.scalars", scalars_);
  get("attention.dropout_seeds", dropout_seeds_);
  get("attention.dropout_offsets", dropout_offsets_);
  rng_.bind(static_cast<rng::RngState*>(at("rng.states")));  // uploads the initial generator states
  hidden_rng_ = rng_.device_state(cuda::kDefaultRng);
  attention_rng_ = rng_.device_state(cuda::kModelParallelRng);
  resid_.assign(sz(L + 1), nullptr);
  norm_in_.assign(sz(L + 1), nullptr);
  rstd_in_.assign(sz(L + 1), nullptr);
  for (int64_t l = 0; l <= L; ++l) {
    const long long i = static_cast<long long>(l);
    get(strprintf("act.resid%lld", i), resid_[sz(l)]);
    get(strprintf("act.norm_in%lld", i), norm_in_[sz(l)]);
    get(strprintf("act.rstd_in%lld", i), rstd_in_[sz(l)]);
  }
  layers_.assign(sz(L), LayerBuffers{});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = strprintf("act.layer%lld.", static_cast<long long>(l));
    LayerBuffers& b = layers_[sz(l)];
    get(p + "qkv", b.qkv);
    get(p + "attn_out", b.attn);
    get(p + "softmax_lse", b.lse);
    get(p + "resid_mid", b.h);
    get(p + "norm_post", b.m);
    get(p + "rstd_post", b.rstd_m);
    get(p + "gate_up", b.gate_up);
    get(p + "swiglu_out", b.act);
  }
  get("act.delta", delta_);
  get("grad.d_resid_a", d_resid_a_);
  get("grad.d_resid_b", d_resid_b_);
  get("grad.d_delta", d_delta_);
  get("grad.d_norm", d_norm_);
  get("grad.d_attn", d_attn_);
  get("grad.d_qkv", d_qkv_);
  get("grad.d_gate_up", d_gate_up_);
  get("grad.d_act", d_act_);
  cublas_workspace_ = at("workspace.cublaslt");
  cudnn_workspace_ = at("workspace.cudnn_attention");
  lm_head_workspace_ = at("workspace.lm_head");
  get("workspace.rmsnorm_backward", rmsnorm_scratch_);
  embedding_scratch_ = at("workspace.embedding_backward");
  get("workspace.grad_norm", grad_norm_partials_);
  get("input.tokens", tokens_);
  get("input.targets", targets_);
  get("input.loss_mask", loss_mask_);

  const StepScalars initial;
  SG_CUDA_CHECK(cudaMemcpy(scalars_, &initial, sizeof(initial), cudaMemcpyHostToDevice));
  // Legacy-stream copies from pageable memory may still be in flight when cudaMemcpy returns; the step
  // runs on a non-blocking stream, which does not wait for them.
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<graph::LayerRegions> LlamaStep::layer_regions(const ModelSpec& model) {
  std::vector<graph::LayerRegions> out;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    out.push_back({static_cast<int>(l), {graph::Module::attn, graph::Module::mlp}});
  }
  return out;
}

int32_t* LlamaStep::tokens() const { return tokens_; }
int32_t* LlamaStep::targets() const { return targets_; }
float* LlamaStep::loss_mask() const { return loss_mask_; }
const StepScalars* LlamaStep::scalars() const { return scalars_; }
StepScalars* LlamaStep::scalars_device() const { return scalars_; }

// ---- setup and inspection ----

void LlamaStep::check_setup_allowed(const char* what) const { cuda::check_host_sync_allowed(what); }

void LlamaStep::upload_parameters(cudaStream_t stream, const std::vector<float>& weights) {
  check_setup_allowed("LlamaStep::upload_parameters");
  const std::vector<float> zeros(sz(layout_.total()), 0.0f);
  load_state(stream, weights, zeros, zeros, 0, download_rng_state(stream));
}

void LlamaStep::load_state(cudaStream_t stream, const std::vector<float>& weights, const std::vector<float>& exp_avg,
                           const std::vector<float>& exp_avg_sq, int64_t steps_done, rng::RngState rng) {
  check_setup_allowed("LlamaStep::load_state");
  const size_t n = sz(layout_.total());
  const auto check = [&](const char* what, const std::vector<float>& v) {
    SG_CHECK(v.size() == n, strprintf("%s has %zu values; this model's flat parameter buffer has %zu (a checkpoint "
                                      "of another model shape?)",
                                      what, v.size(), n));
  };
  check("main weights", weights);
  check("exp_avg", exp_avg);
  check("exp_avg_sq", exp_avg_sq);
  SG_CHECK(steps_done >= 0, "steps_done must not be negative");
  // bf16 copy rounded on the host exactly as the device's __float2bfloat16 (round to nearest even).
  std::vector<uint16_t> compute(n);
  for (size_t i = 0; i < n; ++i) compute[i] = float_to_bf16_bits(weights[i]);
  StepScalars scalars;
  scalars.steps_done = steps_done;
  SG_CUDA_CHECK(cudaMemcpyAsync(main_weights_, weights.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(params_, compute.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(exp_avg_, exp_avg.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(exp_avg_sq_, exp_avg_sq.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(scalars_, &scalars, sizeof(scalars), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemsetAsync(grads_, 0, n * sizeof(float), stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  // Every generator keeps its seed and takes the checkpoint's offset (they advance together).
  for (size_t g = 0; g < rng_.size(); ++g) rng_.host_state(g).offset = rng.offset;
  rng_.host_state(rng_.index(cuda::kDefaultRng)).seed = rng.seed;
  rng_.upload();
  SG_CUDA_CHECK(cudaDeviceSynchronize());  // the tracker's legacy-stream copy, before non-blocking streams use it
}

void LlamaStep::download_floats(cudaStream_t stream, const float* src, std::vector<float>& out) const {
  check_setup_allowed("LlamaStep::download");
  out.resize(sz(layout_.total()));
  SG_CUDA_CHECK(cudaMemcpyAsync(out.data(), src, out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<float> LlamaStep::download_main_weights(cudaStream_t stream) const {
  std::vector<float> out;
  download_floats(stream, main_weights_, out);
  return out;
}
std::vector<float> LlamaStep::download_grads(cudaStream_t stream) const {
  std::vector<float> out;
  download_floats(stream, grads_, out);
  return out;
}
std::vector<float> LlamaStep::download_exp_avg(cudaStream_t stream) const {
  std::vector<float> out;
  download_floats(stream, exp_avg_, out);
  return out;
}
std::vector<float> LlamaStep::download_exp_avg_sq(cudaStream_t stream) const {
  std::vector<float> out;
  download_floats(stream, exp_avg_sq_, out);
  return out;
}

std::vector<float> LlamaStep::download_compute_weights(cudaStream_t stream) const {
  check_setup_allowed("LlamaStep::download_compute_weights");
  const size_t n = sz(layout_.total());
  std::vector<uint16_t> bits(n);
  SG_CUDA_CHECK(cudaMemcpyAsync(bits.data(), params_, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(bits[i]);
  return out;
}

StepScalars LlamaStep::download_scalars(cudaStream_t stream) const {
  check_setup_allowed("LlamaStep::download_scalars");
  StepScalars out;
  SG_CUDA_CHECK(cudaMemcpyAsync(&out, scalars_, sizeof(out), cudaMemcpyDeviceToHost, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

rng::RngState LlamaStep::download_rng_state(cudaStream_t stream) {
  check_setup_allowed("LlamaStep::download_rng_state");
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));  // the tracker copies on the legacy stream
  rng_.download();
  return rng_.host_state(rng_.index(cuda::kDefaultRng));
}

void LlamaStep::upload_batch(cudaStream_t stream, const HostBatch& batch) {
  check_setup_allowed("LlamaStep::upload_batch");
  batch.check(layout_.spec(), batch_);
  const size_t n = sz(tokens_per_step());
  SG_CUDA_CHECK(cudaMemcpyAsync(tokens_, batch.tokens.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(targets_, batch.targets.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(loss_mask_, batch.loss_mask.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace sg::model
