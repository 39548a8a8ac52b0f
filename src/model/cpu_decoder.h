#pragma once
// The CPU fp32 decoder, composed only of sg::ref functions, for every layer kind: the stack's decoding
// twins (model/decode_layer.h) between the step's norms, as the training step runs them:
//   x = embedding(tokens);  per layer i: n = rmsnorm(x; pre-norm i), x += layer_i(n);  logits = lm_head(norm(x))
// with each kind's state kept per sequence (attention: the KV cache; Mamba: conv and SSM states). It is the
// twin of the GPU decoder (model/gpu_decoder.h): the same prefill / decode structure, state layouts,
// positions, sampling draws and step bookkeeping, in fp32 with fp64 accumulation, and the ground truth of
// the GPU decoder's tests. It is what `stepgraph generate --cpu` runs, and what generate runs without a GPU.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/decode_layer.h"
#include "model/decoder.h"

namespace sg::model {

class CpuDecoder final : public Decoder {
 public:
  // weights: the flat fp32 buffer of model_layout(model) (layout().total() floats).
  CpuDecoder(const ModelSpec& model, std::vector<float> weights, const DecodeSpec& decode);
  // Host bytes of the state its layers keep (fp32 KV caches, Mamba states), to check before.
  static double state_bytes(const ModelSpec& model, const DecodeSpec& decode);

  std::string description() const override;
  const DecodeSpec& decode_spec() const override { return decode_; }
  void start(const std::vector<std::vector<int32_t>>& prompts) override;
  void decode(int64_t steps) override;
  std::vector<std::vector<int32_t>> generated() override;
  std::vector<float> last_logits() override { return logits_; }

 private:
  // The model on T rows (tokens, positions), rows_per_slot consecutive rows per cache slot starting at
  // first_slot; the logits of the last `out_rows` rows go to logits_ rows [first_out, first_out+out_rows).
  void forward(const int32_t* tokens, const int32_t* positions, int64_t T, int64_t rows_per_slot, int64_t first_slot,
               int64_t out_rows, int64_t first_out);
  void sample_and_advance();

  ModelSpec model_;
  ModelLayout layout_;
  std::vector<std::unique_ptr<CpuDecodeLayer>> layers_;
  DecodeSpec decode_;
  std::vector<float> weights_;
  std::vector<float> logits_;                          // [batch, vocab]
  std::vector<int32_t> tokens_, positions_, history_;  // [batch], [batch], [batch, max_new_tokens]
  int64_t step_ = 0;
  // Scratch for up to max(max_prompt_tokens, batch) rows: the residual stream, the norm's output, a layer's.
  std::vector<float> x_, n_, rstd_, delta_;
};

}  // namespace sg::model
