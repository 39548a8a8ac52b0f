#include "model/gpu_decoder.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/bf16.h"
#include "cuda/check.h"
#include "kernels/decode_state.h"
#include "kernels/embedding.h"
#include "kernels/rmsnorm.h"
#include "kernels/sampling.h"
#include "model/chunked_upload.h"
#include "model/layer_registry.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}
}  // namespace

struct GpuDecoder::Buffers {
  bf16* params = nullptr;
  float* fp32_params = nullptr;                       // the blocks the layers read in fp32, one after another
  bf16 *x = nullptr, *n = nullptr, *delta = nullptr;  // [rows, H]: residual stream, pre-norm output, layer output
  float* rstd = nullptr;
  void* layer_scratch = nullptr;        // shared by the layers (model/gpu_decode_layer.h)
  float* logits = nullptr;              // [batch, padded_vocab]
  int32_t* prompt_tokens = nullptr;     // [rows]
  int32_t* prompt_positions = nullptr;  // [rows]
  int32_t* tokens = nullptr;            // [batch] the latest tokens (decoding input and sampling output)
  int32_t* positions = nullptr;         // [batch] where each sequence's latest token goes
  int32_t* history = nullptr;           // [batch, max_new_tokens]
  int64_t* step = nullptr;              // tokens generated per sequence: the next draw's Philox offset
  void* sampling_scratch = nullptr;
  void* cublas_workspace = nullptr;
};

struct GpuDecoder::Rows {
  const int32_t* tokens = nullptr;     // device [T]
  const int32_t* positions = nullptr;  // device [T]
  int64_t T = 0, rows_per_slot = 1, first_slot = 0;
  int64_t out_rows = 0, first_out = 0;  // logits of the last out_rows rows -> logits rows first_out..
};

const float* GpuDecodeIO::fp32_weight(ParamRef ref) const {
  const float* w = fp32_weights != nullptr && ref.valid() && sz(ref.index) < fp32_weights->size()
                       ? (*fp32_weights)[sz(ref.index)]
                       : nullptr;
  SG_CHECK(w != nullptr, strprintf("GpuDecodeIO::fp32_weight: block %d was not asked for by fp32_params()", ref.index));
  return w;
}

GpuDecoder::GpuDecoder(const ModelSpec& model, const DecodeSpec& decode, bool use_graphs)
    : model_(model), layers_(make_gpu_decode_layers(model)), decode_(decode), use_graphs_(use_graphs) {
  const std::string refusal = gpu_decoder_refusal(model);
  SG_REQUIRE(refusal.empty(), "generate: " + refusal);
  layout_ = declare_model(model, [this](size_t i, LayerDeclarations& d) { layers_[i]->declare(d); });
  check_decode_request(model, decode, std::vector<std::vector<int32_t>>(sz(decode.batch), std::vector<int32_t>{0}));
  rows_ = decode.max_rows();
  padded_vocab_ = (model.vocab_size + 7) / 8 * 8;
  sampling_scratch_bytes_ = kernels::sample_tokens_scratch_bytes(decode.batch, decode.sampled_vocab(model.vocab_size),
                                                                 padded_vocab_, decode.sampling);
  // The fp32 blocks, in the order the layers ask for them: where each lands in parameters.fp32.
  int64_t fp32_count = 0;
  for (auto& layer : layers_) {
    for (const ParamRef ref : layer->fp32_params()) {
      fp32_blocks_.emplace_back(ref, fp32_count);
      fp32_count += layout_.params.numel(ref);
    }
  }
  plan_memory(fp32_count);
  blas_ = std::make_unique<kernels::Blas>(buf_->cublas_workspace, kernels::Blas::kWorkspaceBytes);
  // The decoding step's GEMMs are planned now, so nothing is planned inside a step or a capture.
  for (auto& layer : layers_) layer->bind(*arena_, *blas_);
  lm_head_plan(decode.batch);
  for (const auto& [ref, at] : fp32_blocks_) {
    if (fp32_by_ref_.size() <= sz(ref.index)) fp32_by_ref_.resize(sz(ref.index) + 1, nullptr);
    fp32_by_ref_[sz(ref.index)] = buf_->fp32_params + at;
  }
  runner_ = std::make_unique<graph::FullIterationRunner>(registry_, /*warmup_steps=*/1, use_graphs_, "decode step");
}

GpuDecoder::GpuDecoder(const ModelSpec& model, const FlatView& weights, const DecodeSpec& decode, bool use_graphs)
    : GpuDecoder(model, decode, use_graphs) {
  upload_weights(weights);
}

void GpuDecoder::upload_weights(const FlatView& weights, int64_t chunk_elements) {
  const int64_t n = layout_.total();
  SG_CHECK(weights.size() == n, strprintf("GpuDecoder: %lld weights for a model whose flat buffer has %lld",
                                          static_cast<long long>(weights.size()), static_cast<long long>(n)));
  cuda::check_host_sync_allowed("GpuDecoder::upload_weights");
  ChunkedUpload upload(stream_, chunk_elements, n);
  upload.each_chunk(weights, 0, n, [&](int64_t b, int64_t e) {
    SG_CUDA_CHECK(cudaMemcpyAsync(buf_->params + b, upload.bf16_bits(e - b), sz(e - b) * sizeof(uint16_t),
                                  cudaMemcpyHostToDevice, stream_));
    // The parts of the fp32 blocks in this chunk, to where each lands in parameters.fp32.
    for (const auto& [ref, at] : fp32_blocks_) {
      const int64_t first = layout_.offset(ref), last = first + layout_.params.numel(ref);
      const int64_t from = std::max(b, first), to = std::min(e, last);
      if (from >= to) continue;
      SG_CUDA_CHECK(cudaMemcpyAsync(buf_->fp32_params + at + (from - first), upload.values() + (from - b),
                                    sz(to - from) * sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
  });
  SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  weights_uploaded_ = true;
}

std::vector<uint16_t> GpuDecoder::download_weight_bits() {
  std::vector<uint16_t> bits(sz(layout_.total()));
  SG_CUDA_CHECK(
      cudaMemcpyAsync(bits.data(), buf_->params, bits.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream_));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return bits;
}

std::vector<GpuDecoder::Fp32Block> GpuDecoder::download_fp32_blocks() {
  std::vector<Fp32Block> blocks;
  for (const auto& [ref, at] : fp32_blocks_) {
    Fp32Block& block = blocks.emplace_back();
    block.offset = layout_.offset(ref);
    block.values.resize(sz(layout_.params.numel(ref)));
    SG_CUDA_CHECK(cudaMemcpyAsync(block.values.data(), buf_->fp32_params + at, block.values.size() * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
  }
  SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return blocks;
}

GpuDecoder::~GpuDecoder() {
  registry_.destroy_all();
}

void GpuDecoder::check_device_memory(const cuda::MemoryPlan& plan) const {
  // The arena is one allocation: what does not fit is said in generate's terms, before cudaMalloc's own error.
  const cuda::MemoryLayout layout = plan.layout();
  size_t free_bytes = 0, total_bytes = 0;
  SG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (layout.total_bytes <= free_bytes) return;
  const size_t weights = plan.category_bytes(cuda::MemoryCategory::parameters);
  throw Error(strprintf(
      "the GPU decoder needs %s of device memory: %s of weights, and %s of KV caches, Mamba states and "
      "workspaces for %lld sequence(s) of up to %lld positions (the longest prompt plus --max-new-tokens %lld); "
      "%s of the GPU's %s is free. Lower --max-new-tokens, give fewer or shorter prompts, or add --cpu",
      human_bytes(layout.total_bytes).c_str(), human_bytes(weights).c_str(),
      human_bytes(layout.total_bytes - weights).c_str(), static_cast<long long>(decode_.batch),
      static_cast<long long>(decode_.capacity()), static_cast<long long>(decode_.max_new_tokens),
      human_bytes(free_bytes).c_str(), human_bytes(total_bytes).c_str()));
}

void GpuDecoder::plan_memory(int64_t fp32_count) {
  using cuda::MemoryCategory;
  const ModelSpec& m = model_;
  const int64_t R = rows_, B = decode_.batch, H = m.hidden_size;
  cuda::MemoryPlan plan;
  const auto params = plan.add_array<bf16>("parameters.bf16", MemoryCategory::parameters, sz(layout_.total()));
  const auto fp32_params = plan.add_array<float>("parameters.fp32", MemoryCategory::parameters, sz(fp32_count));
  // Each layer's state (KV caches, Mamba states) and its workspaces; then the scratch they share.
  size_t scratch_bytes = 0;
  for (auto& layer : layers_) {
    layer->plan(m, decode_, plan);
    DecodeScratch sizing;
    layer->take_scratch(sizing);
    scratch_bytes = std::max(scratch_bytes, sizing.bytes());
  }
  const auto layer_scratch = plan.add("act.layer_scratch", MemoryCategory::activations, scratch_bytes);
  const auto act = [&](const char* name, int64_t width) {
    return plan.add_array<bf16>(name, MemoryCategory::activations, sz(R * width));
  };
  const auto x = act("act.resid", H), n = act("act.norm", H), delta = act("act.delta", H);
  const auto rstd = plan.add_array<float>("act.rstd", MemoryCategory::activations, sz(R));
  const auto logits = plan.add_array<float>("act.logits", MemoryCategory::activations, sz(B * padded_vocab_));
  const auto prompt_tokens = plan.add_array<int32_t>("input.prompt_tokens", MemoryCategory::inputs, sz(R));
  const auto prompt_positions = plan.add_array<int32_t>("input.prompt_positions", MemoryCategory::inputs, sz(R));
  const auto tokens = plan.add_array<int32_t>("decode.tokens", MemoryCategory::inputs, sz(B));
  const auto positions = plan.add_array<int32_t>("decode.positions", MemoryCategory::inputs, sz(B));
  const auto history =
      plan.add_array<int32_t>("decode.history", MemoryCategory::inputs, sz(B * decode_.max_new_tokens));
  const auto step = plan.add_array<int64_t>("decode.step", MemoryCategory::inputs, 1);
  const auto sampling = plan.add("workspace.sampling", MemoryCategory::workspaces, sampling_scratch_bytes_);
  const auto cublas = plan.add("workspace.cublaslt", MemoryCategory::workspaces, kernels::Blas::kWorkspaceBytes);

  check_device_memory(plan);
  arena_ = std::make_unique<cuda::Arena>(plan);
  arena_->zero();
  buf_ = std::make_unique<Buffers>();
  Buffers& b = *buf_;
  b.params = arena_->get<bf16>(params);
  b.fp32_params = arena_->get<float>(fp32_params);
  b.layer_scratch = arena_->raw(layer_scratch);
  for (auto& layer : layers_) {
    DecodeScratch bound(b.layer_scratch);
    layer->take_scratch(bound);
  }
  b.x = arena_->get<bf16>(x);
  b.n = arena_->get<bf16>(n);
  b.delta = arena_->get<bf16>(delta);
  b.rstd = arena_->get<float>(rstd);
  b.logits = arena_->get<float>(logits);
  b.prompt_tokens = arena_->get<int32_t>(prompt_tokens);
  b.prompt_positions = arena_->get<int32_t>(prompt_positions);
  b.tokens = arena_->get<int32_t>(tokens);
  b.positions = arena_->get<int32_t>(positions);
  b.history = arena_->get<int32_t>(history);
  b.step = arena_->get<int64_t>(step);
  b.sampling_scratch = sampling_scratch_bytes_ > 0 ? arena_->raw(sampling) : nullptr;
  b.cublas_workspace = arena_->raw(cublas);
}

std::string GpuDecoder::description() const {
  return strprintf(
      "GPU bf16 decoder: %lld sequence(s), caches and states for %lld positions each (%s), %s, "
      "decoding step %s, %s",
      static_cast<long long>(decode_.batch), static_cast<long long>(decode_.capacity()),
      human_bytes(arena_->total_bytes()).c_str(), describe_stack(model_).c_str(),
      use_graphs_ ? "captured as one CUDA graph" : "eager (graphs off)",
      describe_decode_gemv(decode_gemv_mode(decode_.gemv)).c_str());
}

const kernels::GemmPlan& GpuDecoder::lm_head_plan(int64_t rows) {
  // logits[rows, Vp] (fp32) = n[rows, H] W[V, H]^T: LinearForward's GEMM with an fp32 D and row stride Vp.
  const ModelSpec& m = model_;
  return blas_->plan({.transpose_a = true,
                      .m = m.vocab_size,
                      .n = rows,
                      .k = m.hidden_size,
                      .lda = m.hidden_size,
                      .ldb = m.hidden_size,
                      .ldd = padded_vocab_,
                      .d_type = kernels::GemmDtype::kFP32});
}

// As the CPU decoder and the training step: each residual add is fused with the norm that follows it, the
// last one with model.norm, so n always holds the next norm's output.
void GpuDecoder::enqueue_forward(cudaStream_t stream, const Rows& r) {
  const ModelSpec& m = model_;
  const int64_t T = r.T, H = m.hidden_size;
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const Buffers& b = *buf_;
  const bf16* W = b.params;
  const auto norm_weight = [&](int64_t boundary) { return W + layout_.offset(layout_.norm_before(boundary)); };
  kernels::embedding_forward(stream, {.out = b.x,
                                      .tokens = r.tokens,
                                      .table = W + layout_.offset(layout_.embedding),
                                      .T = T,
                                      .H = H,
                                      .vocab_size = m.vocab_size});
  kernels::rmsnorm_forward(
      stream, {.out = b.n, .rstd = b.rstd, .in = b.x, .weight = norm_weight(0), .T = T, .H = H, .eps = eps});
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(
        stream,
        {.layout = layout_,
         .weights = W,
         .fp32_weights = &fp32_by_ref_,
         .input = b.n,
         .output = b.delta,
         .rows = {.T = T, .rows_per_slot = r.rows_per_slot, .first_slot = r.first_slot, .positions = r.positions},
         .blas = *blas_});
    kernels::residual_rmsnorm_forward(stream, {.residual_out = b.x,
                                               .norm_out = b.n,
                                               .rstd = b.rstd,
                                               .residual_in = b.x,
                                               .delta = b.delta,
                                               .weight = norm_weight(static_cast<int64_t>(i) + 1),
                                               .T = T,
                                               .H = H,
                                               .eps = eps});
  }
  lm_head_plan(r.out_rows)
      .run(stream, W + layout_.offset(layout_.lm_head), b.n + (T - r.out_rows) * H,
           b.logits + r.first_out * padded_vocab_);
}

void GpuDecoder::enqueue_sample_and_advance(cudaStream_t stream) {
  const Buffers& b = *buf_;
  kernels::sample_tokens(stream, {.tokens = b.tokens,
                                  .logits = b.logits,
                                  .B = decode_.batch,
                                  .V = decode_.sampled_vocab(model_.vocab_size),
                                  .ld = padded_vocab_,
                                  .config = decode_.sampling,
                                  .step = b.step,
                                  .scratch = b.sampling_scratch,
                                  .scratch_bytes = sampling_scratch_bytes_});
  kernels::decode_advance(stream, {.history = b.history,
                                   .history_stride = decode_.max_new_tokens,
                                   .tokens = b.tokens,
                                   .positions = b.positions,
                                   .step = b.step,
                                   .B = decode_.batch});
}

void GpuDecoder::start(const std::vector<std::vector<int32_t>>& prompts) {
  SG_CHECK(weights_uploaded_, "GpuDecoder::start before upload_weights");
  check_decode_request(model_, decode_, prompts);
  cuda::check_host_sync_allowed("GpuDecoder::start");
  const Buffers& b = *buf_;
  for (auto& layer : layers_) layer->reset(stream_);
  std::vector<int32_t> positions(sz(decode_.max_prompt_tokens));
  std::iota(positions.begin(), positions.end(), 0);
  SG_CUDA_CHECK(
      cudaMemcpyAsync(b.prompt_positions, positions.data(), positions.size() * 4, cudaMemcpyHostToDevice, stream_));
  std::vector<int32_t> last_positions(sz(decode_.batch));
  for (int64_t s = 0; s < decode_.batch; ++s) {
    const auto& prompt = prompts[sz(s)];
    const auto P = static_cast<int64_t>(prompt.size());
    // The copy is ordered after the previous prompt's launches, which read the same buffer.
    SG_CUDA_CHECK(cudaMemcpyAsync(b.prompt_tokens, prompt.data(), sz(P) * 4, cudaMemcpyHostToDevice, stream_));
    Rows rows;
    rows.tokens = b.prompt_tokens;
    rows.positions = b.prompt_positions;
    rows.T = P;
    rows.rows_per_slot = P;
    rows.first_slot = s;
    rows.out_rows = 1;
    rows.first_out = s;
    enqueue_forward(stream_, rows);
    last_positions[sz(s)] = static_cast<int32_t>(P - 1);  // the advance moves it to P: the first new token's place
  }
  const int64_t zero = 0;
  SG_CUDA_CHECK(
      cudaMemcpyAsync(b.positions, last_positions.data(), last_positions.size() * 4, cudaMemcpyHostToDevice, stream_));
  SG_CUDA_CHECK(cudaMemcpyAsync(b.step, &zero, sizeof(zero), cudaMemcpyHostToDevice, stream_));
  enqueue_sample_and_advance(stream_);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host vectors above are copied before they go
  steps_done_ = 1;
}

void GpuDecoder::decode(int64_t steps) {
  SG_CHECK(steps_done_ > 0, "GpuDecoder::decode before start()");
  SG_CHECK(steps >= 0 && steps_done_ + steps <= decode_.max_new_tokens,
           strprintf("decode: %lld more steps after %lld exceed max_new_tokens = %lld", static_cast<long long>(steps),
                     static_cast<long long>(steps_done_), static_cast<long long>(decode_.max_new_tokens)));
  Rows rows;
  rows.tokens = buf_->tokens;
  rows.positions = buf_->positions;
  rows.T = decode_.batch;
  rows.rows_per_slot = 1;
  rows.first_slot = 0;
  rows.out_rows = decode_.batch;
  rows.first_out = 0;
  for (int64_t i = 0; i < steps; ++i) {
    runner_->run_step(stream_, [this, &rows](cudaStream_t s) {
      enqueue_forward(s, rows);
      enqueue_sample_and_advance(s);
    });
  }
  steps_done_ += steps;
}

std::vector<std::vector<int32_t>> GpuDecoder::generated() {
  cuda::check_host_sync_allowed("GpuDecoder::generated");
  std::vector<int32_t> history(sz(decode_.batch * decode_.max_new_tokens));
  SG_CUDA_CHECK(cudaMemcpyAsync(history.data(), buf_->history, history.size() * 4, cudaMemcpyDeviceToHost, stream_));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<std::vector<int32_t>> out(sz(decode_.batch));
  for (int64_t s = 0; s < decode_.batch; ++s) {
    const int32_t* row = history.data() + s * decode_.max_new_tokens;
    out[sz(s)].assign(row, row + steps_done_);
  }
  return out;
}

std::vector<float> GpuDecoder::last_logits() {
  cuda::check_host_sync_allowed("GpuDecoder::last_logits");
  const int64_t V = model_.vocab_size;
  std::vector<float> padded(sz(decode_.batch * padded_vocab_));
  SG_CUDA_CHECK(cudaMemcpyAsync(padded.data(), buf_->logits, padded.size() * 4, cudaMemcpyDeviceToHost, stream_));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<float> out(sz(decode_.batch * V));
  for (int64_t s = 0; s < decode_.batch; ++s) {
    std::copy(padded.begin() + s * padded_vocab_, padded.begin() + s * padded_vocab_ + V, out.begin() + s * V);
  }
  return out;
}

}  // namespace sg::model
