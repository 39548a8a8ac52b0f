#pragma once
// The GPU decoder: bf16 weights and activations with fp32 accumulation, the training step's embedding
// and norms around each layer's GPU decoding twin (model/gpu_decode_layer.h: attention with its KV cache,
// MLP, MoE, Mamba with its conv and SSM states), then the LM head, sampling (kernels/sampling.h) and the
// step bookkeeping (kernels/decode_state.h). CPU twin: model/cpu_decoder.h; the structure is
// model/decoder.h's.
//
// Memory: planned once in one Arena for the DecodeSpec — the bf16 weights and the fp32 blocks the layers
// read in fp32, each layer's state for capacity() positions per sequence, one scratch region the layers
// share, activations for max(max_prompt_tokens, batch) rows, the logits [batch, Vp], the token history,
// and the device-resident decoding state (the latest tokens, each sequence's position, the step counter).
// Prefill: eager, one prompt at a time (its GEMMs are planned for its length on first use).
// Decoding step: one sequence of launches that reads everything that changes (tokens, positions, the
// step) from device memory, so with graphs on it is captured ONCE (after one eager step, which loads
// every kernel) and replayed for every later step: one graph per batch shape.
#include <cuda_runtime.h>

#include <memory>
#include <utility>
#include <vector>

#include "cuda/arena.h"
#include "cuda/stream.h"
#include "graph/full_iteration_runner.h"
#include "graph/registry.h"
#include "kernels/gemm.h"
#include "model/decoder.h"
#include "model/flat_view.h"
#include "model/gpu_decode_layer.h"

namespace sg::model {

class GpuDecoder final : public Decoder {
 public:
  // weights: the flat fp32 buffer of model_layout(model) (a host vector, or a view of a mapped folder's tensors);
  // uploaded once, rounded to bf16. use_graphs = false runs every decoding step eagerly (the same launches).
  GpuDecoder(const ModelSpec& model, const FlatView& weights, const DecodeSpec& decode, bool use_graphs = true);
  // Plans and allocates everything (refused with generate's fixes when it does not fit the free device
  // memory) but uploads no weights: generate builds the decoder first, so a cache too large for the GPU is
  // refused before minutes of reading weights. upload_weights() must come before start().
  GpuDecoder(const ModelSpec& model, const DecodeSpec& decode, bool use_graphs = true);
  // Reads `weights` chunk_elements at a time through two host buffers (model/chunked_upload.h), so the host holds no
  // copy of them (generate uploads a mapped folder's tensors, checkpoint::map_hf_weights); every element rounded to
  // bf16 (round to nearest even, as __float2bfloat16), the fp32 blocks also kept in fp32. Returns once the device
  // holds them: the view's memory may be released then. Tests pass a small chunk.
  void upload_weights(const FlatView& weights, int64_t chunk_elements = kUploadChunkElements);
  // The weights as the device holds them (tests): the bf16 bits of the flat buffer, and each block kept in fp32
  // with its offset in the flat buffer.
  struct Fp32Block {
    int64_t offset = 0;
    std::vector<float> values;
  };
  std::vector<uint16_t> download_weight_bits();
  std::vector<Fp32Block> download_fp32_blocks();
  ~GpuDecoder() override;

  std::string description() const override;
  const DecodeSpec& decode_spec() const override { return decode_; }
  void start(const std::vector<std::vector<int32_t>>& prompts) override;
  void decode(int64_t steps) override;
  std::vector<std::vector<int32_t>> generated() override;
  std::vector<float> last_logits() override;

  std::string memory_breakdown() const { return arena_->breakdown(); }
  const graph::GraphRegistry& graphs() const { return registry_; }
  cudaStream_t stream() const { return stream_; }

 private:
  struct Buffers;
  struct Rows;  // the row arrangement of one forward (prefill of one prompt, or one decoding step)
  void plan_memory(int64_t fp32_count);
  // sg::Error naming the sizes and generate's fixes when the plan does not fit the free device memory.
  void check_device_memory(const cuda::MemoryPlan& plan) const;
  // Enqueues the model on `rows` and the logits of its last out_rows rows (no host sync).
  void enqueue_forward(cudaStream_t stream, const Rows& rows);
  void enqueue_sample_and_advance(cudaStream_t stream);
  const kernels::GemmPlan& lm_head_plan(int64_t rows);

  ModelSpec model_;
  std::vector<std::unique_ptr<GpuDecodeLayer>> layers_;
  ModelLayout layout_;
  DecodeSpec decode_;
  bool use_graphs_;
  int64_t rows_ = 0;          // activation rows planned: max(max_prompt_tokens, batch)
  int64_t padded_vocab_ = 0;  // logits row stride (16-byte aligned rows for cuBLASLt)
  size_t sampling_scratch_bytes_ = 0;
  std::vector<std::pair<ParamRef, int64_t>> fp32_blocks_;  // the fp32 blocks' offsets in parameters.fp32
  std::vector<const float*> fp32_by_ref_;                  // GpuDecodeIO::fp32_weights
  bool weights_uploaded_ = false;
  int64_t steps_done_ = 0;  // generated tokens per sequence so far

  cuda::Stream stream_;
  std::unique_ptr<cuda::Arena> arena_;
  std::unique_ptr<Buffers> buf_;
  std::unique_ptr<kernels::Blas> blas_;
  graph::GraphRegistry registry_;
  std::unique_ptr<graph::FullIterationRunner> runner_;
};

}  // namespace sg::model
