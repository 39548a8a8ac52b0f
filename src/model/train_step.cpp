// TrainStep: planning (memory, layers, GEMMs) and the synchronous setup / inspection calls.
// The step itself is in train_step_run.cpp.
#include "model/train_step.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/rmsnorm.h"
#include "model/chunked_upload.h"
#include "model/gradient_zeroing.h"
#include "model/layer_registry.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) { return static_cast<size_t>(n); }
}  // namespace

TrainStep::TrainStep(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer, uint64_t seed,
                     const TrainStepOptions& options)
    : layers_(make_layers(model)),
      layout_(declare_model(model, [this](size_t i, LayerDeclarations& d) { layers_[i]->declare(d); })),
      reducer_(options.reducer),
      dp_(data_parallel_layout(options, layout_.total())),
      batch_(batch),
      optimizer_(optimizer),
      rng_(seed),
      recompute_(std::make_unique<RecomputeLayout>(model)) {
  SG_CHECK(batch.micro_batch_size > 0 && batch.num_microbatches > 0,
           strprintf("micro_batch_size = %lld and num_microbatches = %lld must be positive",
                     static_cast<long long>(batch.micro_batch_size), static_cast<long long>(batch.num_microbatches)));
  SG_CHECK(options.reducer != nullptr || (options.planned_world_size == 1 && !options.planned_distributed_optimizer),
           "TrainStepOptions::planned_world_size and planned_distributed_optimizer size a memory plan "
           "(TrainStep::plan_memory); a step trains at another world size only through a reducer");
  SG_CHECK(dp_.num_params == layout_.total() && dp_.world_size == batch.data_parallel_size,
           strprintf("the data-parallel layout (%lld parameters, world size %d) does not match the model (%lld) and "
                     "batch (data_parallel_size %lld)",
                     static_cast<long long>(dp_.num_params), dp_.world_size, static_cast<long long>(layout_.total()),
                     static_cast<long long>(batch.data_parallel_size)));
  T_ = batch.tokens_per_microbatch(model);
  first_writers_overwrite_ = !options.zero_all_gradients;
  SG_CHECK(options.upload_chunk_elements > 0, "TrainStepOptions::upload_chunk_elements must be positive");
  upload_chunk_ = options.upload_chunk_elements;
  grad_zero_ranges_ = gradient_zero_ranges(
      layout_, first_writers_overwrite_ ? first_written_gradients(layout_, layers_) : std::vector<ParamRef>{},
      dp_.padded_params);
  // Plan-time work that needs the device but not the arena: the layers' kernel plans (cuDNN graphs and
  // their workspace sizes), CUB's scratch size for the embedding backward, the LM head's chunking.
  cudnn_ = std::make_unique<kernels::CudnnContext>();
  lm_head_layout_ = kernels::lm_head_layout({T_, model.hidden_size, model.vocab_size}, options.lm_head_chunk_budget_bytes);
  embedding_scratch_bytes_ = kernels::embedding_backward_scratch_bytes(T_, model.vocab_size);
  rmsnorm_scratch_bytes_ = kernels::rmsnorm_backward_scratch_bytes(T_, model.hidden_size);

  plan_memory(options);
  SG_CHECK(lm_head_->layout().workspace_bytes == lm_head_layout_.workspace_bytes,
           "LM head workspace differs between lm_head_layout() and LmHeadPlan (kernels/lm_head.h)");
  bind_reducer();
}

TrainStep::~TrainStep() = default;

TrainStep::LayerPlans TrainStep::declare_memory(cuda::MemoryPlan& plan, const ModelLayout& layout,
                                                const BatchSpec& batch, const TrainStepOptions& options,
                                                const OptimizerSpec& optimizer,
                                                std::vector<std::unique_ptr<Layer>>& layers, SharedBuffers& shared,
                                                RecomputeLayout& recompute, DevicePlanContext* device,
                                                size_t embedding_scratch_bytes) {
  using cuda::MemoryCategory;
  const ModelSpec& m = layout.spec;
  const int64_t T = batch.tokens_per_microbatch(m), H = m.hidden_size, N = layout.num_layers();

  // Parameters and gradients: the whole (padded) flat buffer; the optimizer state: what this rank owns
  // (everything, or its shard with the distributed optimizer), the moments in their storage dtype.
  const dist::DataParallelLayout dp = data_parallel_layout(options, layout.total());
  const size_t flat = sz(dp.padded_params), owned = sz(dp.owned.size);
  plan.add_array<bf16>("parameters.bf16", MemoryCategory::parameters, flat);
  plan.add_array<float>("main_weights.fp32", MemoryCategory::main_weights, owned);
  if (const size_t replica = sz(fp32_replica_count(dp, layout)); replica > 0) {  // kernels/fp32_replica.h
    plan.add_array<float>("main_weights.fp32_replica", MemoryCategory::main_weights, replica);
    plan.add_array<int64_t>("state.fp32_replica_offsets", MemoryCategory::main_weights, replica);
  }
  const auto add_floats = [&](const char* name, MemoryCategory category, size_t count, kernels::FloatDtype dtype) {
    if (dtype == kernels::FloatDtype::bf16) {
      plan.add_array<bf16>(name, category, count);
    } else {
      plan.add_array<float>(name, category, count);
    }
  };
  add_floats("gradients", MemoryCategory::gradients, flat, optimizer.main_grad_dtype);
  add_floats("optimizer.exp_avg", MemoryCategory::optimizer_state, owned, optimizer.exp_avg_dtype);
  add_floats("optimizer.exp_avg_sq", MemoryCategory::optimizer_state, owned, optimizer.exp_avg_sq_dtype);
  plan.add("step.scalars", MemoryCategory::optimizer_state, sizeof(StepScalars));
  cuda::RngTracker(0).plan(plan, "rng.states");  // the size depends on the generators, not the seed

  // Activations of one microbatch. The residual stream and the pre-norms: N + 1 boundaries (the last is
  // the final norm's input / output); what recompute gives back goes to the recompute buffers.
  BoundarySlots boundaries = plan_boundaries(plan, recompute, N, T, H);
  // Each layer's own saved activations and scratch, then its device plans and workspaces.
  LayerPlanContext plan_context(m, batch, plan, shared, &recompute);
  for (auto& layer : layers) {
    plan_context.set_layer(layer->index());
    layer->plan(plan_context);
  }
  LayerPlans out{plan_context.saved_bytes(), plan_context.attention_dropout_sites(), plan_context.step_counts_total(),
                 std::move(boundaries)};
  if (device != nullptr) {
    for (auto& layer : layers) layer->plan_device(*device);
  }
  shared.plan(plan);
  recompute.plan(plan);

  const size_t slots = out.attention_dropout_sites.size();
  plan.add_array<uint32_t>("attention.dropout_sites", MemoryCategory::optimizer_state, slots);
  plan.add_array<int64_t>("attention.dropout_seeds", MemoryCategory::optimizer_state, slots);
  plan.add_array<int64_t>("attention.dropout_offsets", MemoryCategory::optimizer_state, slots);
  plan.add_array<int32_t>("state.step_counts", MemoryCategory::optimizer_state, sz(out.step_counts));
  if (options.weight_fingerprints) {
    plan.add_array<uint64_t>("workspace.weight_fingerprints", MemoryCategory::workspaces,
                             sz(weight_fingerprint_layout(layout, dp.padded_params, dp.sharded).count()));
  }
  // The step's scratch between layers (each region uses fixed ones).
  for (const char* name : {"act.delta", "grad.d_resid_a", "grad.d_resid_b", "grad.d_delta", "grad.d_norm"}) {
    plan.add_array<bf16>(name, MemoryCategory::activations, sz(T * H));
  }

  plan.add("workspace.cublaslt", MemoryCategory::workspaces, kernels::Blas::kWorkspaceBytes);
  plan.add("workspace.lm_head", MemoryCategory::workspaces,
           kernels::lm_head_layout({T, H, m.vocab_size}, options.lm_head_chunk_budget_bytes).workspace_bytes);
  // One partial-sum matrix per norm (norm_before(0..N)), summed by one launch per microbatch.
  plan.add("workspace.rmsnorm_backward", MemoryCategory::workspaces,
           static_cast<size_t>(N + 1) * kernels::rmsnorm_backward_scratch_bytes(T, H));
  plan.add_array<int64_t>("state.norm_grad_offsets", MemoryCategory::optimizer_state, static_cast<size_t>(N + 1));
  plan.add("workspace.embedding_backward", MemoryCategory::workspaces, embedding_scratch_bytes);
  plan.add("workspace.grad_norm", MemoryCategory::workspaces, kernels::kGradNormScratchBytes);

  const size_t batch_tokens = sz(T * batch.num_microbatches);
  plan.add_array<int32_t>("input.tokens", MemoryCategory::inputs, batch_tokens);
  plan.add_array<int32_t>("input.targets", MemoryCategory::inputs, batch_tokens);
  plan.add_array<float>("input.loss_mask", MemoryCategory::inputs, batch_tokens);
  return out;
}

cuda::MemoryPlan TrainStep::plan_memory(const ModelSpec& model, const BatchSpec& batch,
                                        const TrainStepOptions& options, const OptimizerSpec& optimizer) {
  std::vector<std::unique_ptr<Layer>> layers = make_layers(model);
  const ModelLayout layout = declare_model(model, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
  cuda::MemoryPlan plan;
  SharedBuffers shared;
  RecomputeLayout recompute(layout.spec);
  declare_memory(plan, layout, batch, options, optimizer, layers, shared, recompute, /*device=*/nullptr,
                 /*embedding_scratch_bytes=*/0);
  return plan;
}

void TrainStep::plan_memory(const TrainStepOptions& options) {
  const ModelSpec& m = layout_.spec;
  const int64_t N = layout_.num_layers();
  cuda::MemoryPlan plan;
  DevicePlanContext device_context(m, batch_, shared_buffers_, shared_objects_, *cudnn_, optimizer_.main_grad_dtype);
  LayerPlans planned = declare_memory(plan, layout_, batch_, options, optimizer_, layers_, shared_buffers_, *recompute_,
                                      &device_context, embedding_scratch_bytes_);
  saved_activations_ = std::move(planned.saved_activations);
  attention_dropout_sites_ = std::move(planned.attention_dropout_sites);
  const size_t slots = attention_dropout_sites_.size();
  const auto slot = [&](const std::string& name) {
    const cuda::MemorySlot found = plan.find(name);
    SG_CHECK(found.valid(), "TrainStep: no planned buffer named " + name);
    return found;
  };

  arena_ = std::make_unique<cuda::Arena>(plan);
  arena_->zero();

  params_ = arena_->get<bf16>(slot("parameters.bf16"));
  main_weights_ = arena_->get<float>(slot("main_weights.fp32"));
  fp32_replica_count_ = fp32_replica_count(dp_, layout_);
  if (fp32_replica_count_ > 0) {
    fp32_replica_ = arena_->get<float>(slot("main_weights.fp32_replica"));
    fp32_replica_offsets_ = arena_->get<int64_t>(slot("state.fp32_replica_offsets"));
  }
  const auto floats = [&](const char* name, kernels::FloatDtype dtype) -> kernels::FloatBuffer {
    if (dtype == kernels::FloatDtype::bf16) return arena_->get<bf16>(slot(name));
    return arena_->get<float>(slot(name));
  };
  grads_ = floats("gradients", optimizer_.main_grad_dtype);
  exp_avg_ = floats("optimizer.exp_avg", optimizer_.exp_avg_dtype);
  exp_avg_sq_ = floats("optimizer.exp_avg_sq", optimizer_.exp_avg_sq_dtype);
  scalars_ = arena_->get<StepScalars>(slot("step.scalars"));
  dropout_sites_ = arena_->get<uint32_t>(slot("attention.dropout_sites"));
  dropout_seeds_ = arena_->get<int64_t>(slot("attention.dropout_seeds"));
  dropout_offsets_ = arena_->get<int64_t>(slot("attention.dropout_offsets"));
  step_counts_count_ = planned.step_counts;
  if (options.weight_fingerprints) {
    fingerprints_ = weight_fingerprint_layout(layout_, dp_.padded_params, dp_.sharded);
    fingerprint_values_ = arena_->get<uint64_t>(slot("workspace.weight_fingerprints"));
  }
  if (step_counts_count_ > 0) step_counts_ = arena_->get<int32_t>(slot("state.step_counts"));
  rng_.bind(arena_->get<rng::RngState>(slot("rng.states")));  // uploads the initial generator states
  hidden_rng_ = rng_.device_state(cuda::kDefaultRng);
  attention_rng_ = rng_.device_state(cuda::kModelParallelRng);
  recompute_->bind(*arena_);
  const auto boundary = [this](cuda::MemorySlot slot) {
    return static_cast<bf16*>(recompute_->owns(slot) ? recompute_->get(slot) : arena_->raw(slot));
  };
  for (int64_t i = 0; i <= N; ++i) {
    resid_.push_back(boundary(planned.boundaries.resid[sz(i)]));
    norm_.push_back(boundary(planned.boundaries.norm[sz(i)]));
    rstd_.push_back(arena_->get<float>(planned.boundaries.rstd[sz(i)]));
  }
  delta_ = arena_->get<bf16>(slot("act.delta"));
  d_resid_[0] = arena_->get<bf16>(slot("grad.d_resid_a"));
  d_resid_[1] = arena_->get<bf16>(slot("grad.d_resid_b"));
  d_delta_ = arena_->get<bf16>(slot("grad.d_delta"));
  d_norm_ = arena_->get<bf16>(slot("grad.d_norm"));
  lm_head_workspace_ = arena_->raw(slot("workspace.lm_head"));
  rmsnorm_scratch_ = arena_->get<float>(slot("workspace.rmsnorm_backward"));
  norm_grad_offsets_ = arena_->get<int64_t>(slot("state.norm_grad_offsets"));
  embedding_scratch_ = arena_->raw(slot("workspace.embedding_backward"));
  grad_norm_partials_ = arena_->get<double>(slot("workspace.grad_norm"));
  tokens_ = arena_->get<int32_t>(slot("input.tokens"));
  targets_ = arena_->get<int32_t>(slot("input.targets"));
  loss_mask_ = arena_->get<float>(slot("input.loss_mask"));
  shared_buffers_.bind(*arena_);

  blas_ = std::make_unique<kernels::Blas>(arena_->raw(slot("workspace.cublaslt")), kernels::Blas::kWorkspaceBytes);
  StepPointers pointers;
  pointers.params = params_;
  // With the distributed optimizer this rank's fp32 master weights are its shard only: no flat pointer.
  pointers.main_weights = dp_.sharded ? nullptr : main_weights_;
  pointers.fp32_replica = fp32_replica_;
  pointers.grads = grads_;
  pointers.aux_loss = &scalars_->aux_loss;
  pointers.z_loss = &scalars_->z_loss;
  pointers.step_counts = step_counts_;
  pointers.hidden_rng = hidden_rng_;
  pointers.attention_dropout_seeds = dropout_seeds_;
  pointers.attention_dropout_offsets = dropout_offsets_;
  LayerBindContext bind_context(layout_, *arena_, shared_buffers_, shared_objects_, *blas_, pointers,
                                recompute_.get());
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->bind(bind_context);
    // Layer i reads n_i; its output goes through the step's dropout (in place on delta_, or into
    // d_delta_ backward) unless dropout is off; it writes d n_i into d_norm_.
    LayerIO io;
    io.input = norm_[i];
    io.output = delta_;
    io.d_output = m.hidden_dropout > 0.0f ? d_delta_ : d_resid_[(i + 1) % 2];
    io.d_input = d_norm_;
    io_.push_back(io);
    io.dropout = false;
    eval_io_.push_back(io);
  }
  lm_head_ = std::make_unique<kernels::LmHeadPlan>(
      *blas_, kernels::LmHeadShape{.T = T_, .H = m.hidden_size, .V = m.vocab_size},
      1.0f / static_cast<float>(batch_.global_microbatches()), options.lm_head_chunk_budget_bytes,
      optimizer_.main_grad_dtype);

  const StepScalars initial;
  SG_CUDA_CHECK(cudaMemcpy(scalars_, &initial, sizeof(initial), cudaMemcpyHostToDevice));
  if (slots > 0) {
    SG_CUDA_CHECK(cudaMemcpy(dropout_sites_, attention_dropout_sites_.data(), slots * sizeof(uint32_t),
                             cudaMemcpyHostToDevice));
  }
  std::vector<int64_t> norm_offsets;
  for (int64_t i = 0; i <= N; ++i) norm_offsets.push_back(layout_.offset(layout_.norm_before(i)));
  SG_CUDA_CHECK(cudaMemcpy(norm_grad_offsets_, norm_offsets.data(), norm_offsets.size() * sizeof(int64_t),
                           cudaMemcpyHostToDevice));
  if (fp32_replica_count_ > 0) {
    const std::vector<int64_t> replica_offsets = layout_.params.fp32_packed_flat_offsets();
    SG_CUDA_CHECK(cudaMemcpy(fp32_replica_offsets_, replica_offsets.data(), replica_offsets.size() * sizeof(int64_t),
                             cudaMemcpyHostToDevice));
  }
  // Legacy-stream copies from pageable memory may still be in flight when cudaMemcpy returns; the step
  // runs on a non-blocking stream, which does not wait for them.
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<graph::LayerRegions> TrainStep::layer_regions() const {
  std::vector<graph::LayerRegions> out;
  for (const auto& layer : layers_) out.push_back({layer->index(), layer->modules()});
  return out;
}

int32_t* TrainStep::tokens() const { return tokens_; }
int32_t* TrainStep::targets() const { return targets_; }
float* TrainStep::loss_mask() const { return loss_mask_; }
const StepScalars* TrainStep::scalars() const { return scalars_; }
StepScalars* TrainStep::scalars_device() const { return scalars_; }

// ---- setup and inspection ----

void TrainStep::check_setup_allowed(const char* what) const { cuda::check_host_sync_allowed(what); }

void TrainStep::upload_parameters(cudaStream_t stream, const FlatView& weights) {
  check_setup_allowed("TrainStep::upload_parameters");
  const FlatView zeros = FlatView::zeros(layout_.total());
  load_state(stream, weights, zeros, zeros, 0, download_rng_state(stream));
}

void TrainStep::load_state(cudaStream_t stream, const FlatView& weights, const FlatView& exp_avg,
                           const FlatView& exp_avg_sq, int64_t steps_done, rng::RngState rng) {
  check_setup_allowed("TrainStep::load_state");
  const int64_t n = layout_.total();
  const auto check = [&](const char* what, const FlatView& v) {
    SG_CHECK(v.size() == n, strprintf("%s has %lld values; this model's flat parameter buffer has %lld (a checkpoint "
                                      "of another model shape?)",
                                      what, static_cast<long long>(v.size()), static_cast<long long>(n)));
  };
  check("main weights", weights);
  check("exp_avg", exp_avg);
  check("exp_avg_sq", exp_avg_sq);
  SG_CHECK(steps_done >= 0, "steps_done must not be negative");
  StepScalars scalars;
  scalars.steps_done = steps_done;
  // The fp32 state of what this rank owns (dist/sharding.h): [owned.begin, n) from the views, zero past n (the
  // shards' padding, as dist::owned_slice has it); the bf16 weights whole.
  const dist::FlatRange owned = dp_.owned;
  const int64_t owned_end = std::min(owned.end(), n);
  const int64_t padding_begin = std::max(owned.begin, n);
  // Two host buffers of upload_chunk_ elements (model/chunked_upload.h): each chunk is read, converted and copied,
  // and its copies finish before the next is read.
  ChunkedUpload upload(stream, upload_chunk_, n);
  // The weights: their bf16 copy rounded on the host exactly as the device's __float2bfloat16 (round to nearest
  // even), and the owned part in fp32.
  upload.each_chunk(weights, 0, n, [&](int64_t b, int64_t e) {
    SG_CUDA_CHECK(cudaMemcpyAsync(params_ + b, upload.bf16_bits(e - b), sz(e - b) * sizeof(uint16_t),
                                  cudaMemcpyHostToDevice, stream));
    const int64_t from = std::max(b, owned.begin), to = std::min(e, owned_end);
    if (from < to) {
      SG_CUDA_CHECK(cudaMemcpyAsync(main_weights_ + (from - owned.begin), upload.values() + (from - b),
                                    sz(to - from) * sizeof(float), cudaMemcpyHostToDevice, stream));
    }
    upload_fp32_replica_part(stream, upload.values(), b, e);
  });
  if (padding_begin < owned.end()) {
    SG_CUDA_CHECK(cudaMemsetAsync(main_weights_ + (padding_begin - owned.begin), 0,
                                  sz(owned.end() - padding_begin) * sizeof(float), stream));
  }
  // A bf16 moment takes the values rounded to nearest even (exact when they came from a bf16 run); a moment of zeros
  // (a fresh optimizer) is set on the device.
  const auto upload_moment = [&](const kernels::FloatBuffer& moment, const FlatView& view) {
    const size_t bytes = moment.element_bytes();
    if (view.is_zeros()) {
      SG_CUDA_CHECK(cudaMemsetAsync(moment.data, 0, sz(owned.size) * bytes, stream));
      return;
    }
    upload.each_chunk(view, owned.begin, owned_end, [&](int64_t b, int64_t e) {
      const void* source = upload.values();
      if (moment.dtype != kernels::FloatDtype::fp32) source = upload.bf16_bits(e - b);
      SG_CUDA_CHECK(
          cudaMemcpyAsync(moment.at(b - owned.begin).data, source, sz(e - b) * bytes, cudaMemcpyHostToDevice, stream));
    });
    if (padding_begin < owned.end()) {
      SG_CUDA_CHECK(cudaMemsetAsync(moment.at(padding_begin - owned.begin).data, 0,
                                    sz(owned.end() - padding_begin) * bytes, stream));
    }
  };
  upload_moment(exp_avg_, exp_avg);
  upload_moment(exp_avg_sq_, exp_avg_sq);
  SG_CUDA_CHECK(cudaMemcpyAsync(scalars_, &scalars, sizeof(scalars), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemsetAsync(grads_.data, 0, sz(dp_.padded_params) * grads_.element_bytes(), stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  // Every generator keeps its seed and takes the checkpoint's offset (they advance together), moved to
  // where this rank's microbatches start.
  for (size_t g = 0; g < rng_.size(); ++g) rng_.host_state(g).offset = rng.offset + rank_rng_offset();
  rng_.host_state(rng_.index(cuda::kDefaultRng)).seed = rng.seed;
  rng_.upload();
  SG_CUDA_CHECK(cudaDeviceSynchronize());  // the tracker's legacy-stream copy, before non-blocking streams use it
}

void TrainStep::upload_fp32_replica_part(cudaStream_t stream, const float* values, int64_t begin, int64_t end) {
  if (fp32_replica_count_ == 0) return;
  // The whole of every fp32_vector() block, whoever owns it (its gaps stay the arena's zeros).
  for (const ParamLayout::Fp32Block& block : layout_.params.fp32_blocks()) {
    const int64_t from = std::max(begin, block.flat_offset), to = std::min(end, block.flat_offset + block.numel);
    if (from >= to) continue;
    const int64_t packed = block.packed_offset + (from - block.flat_offset);
    SG_CUDA_CHECK(cudaMemcpyAsync(fp32_replica_ + packed, values + (from - begin), sz(to - from) * sizeof(float),
                                  cudaMemcpyHostToDevice, stream));
  }
}

void TrainStep::download_floats(cudaStream_t stream, const float* src, std::vector<float>& out) const {
  check_setup_allowed("TrainStep::download");
  out.resize(sz(layout_.total()));
  SG_CUDA_CHECK(cudaMemcpyAsync(out.data(), src, out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<float> TrainStep::download_main_weights(cudaStream_t stream) const {
  return download_moment(stream, main_weights_);
}
std::vector<float> TrainStep::download_grads(cudaStream_t stream) const { return download_widened(stream, grads_); }

std::vector<float> TrainStep::download_widened(cudaStream_t stream, const kernels::FloatBuffer& src) const {
  std::vector<float> out;
  if (!src.is_bf16()) {
    download_floats(stream, static_cast<const float*>(src.data), out);
    return out;
  }
  check_setup_allowed("TrainStep::download");
  const size_t n = sz(layout_.total());
  std::vector<uint16_t> bits(n);
  SG_CUDA_CHECK(cudaMemcpyAsync(bits.data(), src.data, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(bits[i]);
  return out;
}
std::vector<float> TrainStep::download_exp_avg(cudaStream_t stream) const { return download_moment(stream, exp_avg_); }
std::vector<float> TrainStep::download_exp_avg_sq(cudaStream_t stream) const {
  return download_moment(stream, exp_avg_sq_);
}

std::vector<float> TrainStep::download_compute_weights(cudaStream_t stream) const {
  return download_widened(stream, params_);
}

StepScalars TrainStep::download_scalars(cudaStream_t stream) const {
  check_setup_allowed("TrainStep::download_scalars");
  StepScalars out;
  SG_CUDA_CHECK(cudaMemcpyAsync(&out, scalars_, sizeof(out), cudaMemcpyDeviceToHost, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

rng::RngState TrainStep::download_rng_state(cudaStream_t stream) {
  check_setup_allowed("TrainStep::download_rng_state");
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));  // the tracker copies on the legacy stream
  rng_.download();
  rng::RngState state = rng_.host_state(rng_.index(cuda::kDefaultRng));
  state.offset -= rank_rng_offset();  // the run's state: where rank 0's microbatches start
  return state;
}

void TrainStep::upload_batch(cudaStream_t stream, const HostBatch& batch) {
  check_setup_allowed("TrainStep::upload_batch");
  batch.check(layout_.spec, batch_);
  const size_t n = sz(tokens_per_step());
  SG_CUDA_CHECK(cudaMemcpyAsync(tokens_, batch.tokens.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(targets_, batch.targets.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(loss_mask_, batch.loss_mask.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace sg::model
