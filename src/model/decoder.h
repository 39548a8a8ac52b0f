#pragma once
// Text generation with a KV cache: what the GPU decoder (model/gpu_decoder.h) and its CPU twin
// (model/cpu_decoder.h) share. One generation of `batch` sequences:
//
//   start(prompts)   prefill: each prompt runs through the model once (its rows attend within the
//                    prompt), its keys and values fill its slot of the KV cache, and the last row's
//                    logits give the sequence's first new token (sampled, step 0)
//   decode(n)        n decoding steps: every sequence feeds its latest token at its next position,
//                    appends its k/v to the cache, attends over the cache and samples the next token
//                    (Philox offset = the step)
//   generated()      the tokens so far, [batch][1 + steps]
//
// Both decoders run every layer kind of model/stack.h, each through the kinds' decoding twins
// (model/decode_layer.h, model/gpu_decode_layer.h) between the training step's norms. Per row of a Llama
// with input x (as the training step and transformers compute it):
//   n = rmsnorm(x; input_layernorm)   qkv = n Wqkv^T; RoPE on q and k at the row's position
//   append k, v to the cache          a = attention over the cache (positions 0..pos)
//   h = x + a Wo^T                    m = rmsnorm(h; post_attention_layernorm)
//   x' = h + down(silu(gate(m)) * up(m))
// then model.norm and lm_head on the rows whose next token is wanted.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/decode_gemv.h"
#include "model/spec.h"
#include "model/stack.h"
#include "reference/sampling.h"

namespace sg::model {

struct DecodeSpec {
  int64_t batch = 1;              // sequences generated together (one graph per batch shape)
  int64_t max_prompt_tokens = 0;  // the longest prompt
  int64_t max_new_tokens = 0;     // tokens generated per sequence, the first (from the prefill) included
  ref::SamplingConfig sampling;   // greedy when temperature == 0
  // Ids are drawn from [0, sample_vocab): the tokenizer's vocabulary, so the rows Megatron pads vocab_size
  // with (which no tokenizer can decode) are never drawn; 0: every row of model.vocab_size.
  int64_t sample_vocab = 0;
  // The GPU decoder's linears: which rows take the matrix-vector kernel (model/decode_gemv.h); none: the process's
  // STEPGRAPH_DECODE_GEMV.
  std::optional<DecodeGemv> gemv;

  // KV-cache positions per sequence: the prompt and every generated token but the last (which is
  // sampled, never fed back).
  int64_t capacity() const { return max_prompt_tokens + max_new_tokens; }
  // Rows of one model call: one prompt's prefill, or one decoding step of the batch.
  int64_t max_rows() const { return max_prompt_tokens > batch ? max_prompt_tokens : batch; }
  int64_t sampled_vocab(int64_t model_vocab) const { return sample_vocab > 0 ? sample_vocab : model_vocab; }
};

// Throws sg::Error naming the option when the generation cannot run (no prompt, empty prompt, prompt
// longer than max_prompt_tokens, token id outside the vocabulary, ...).
void check_decode_request(const ModelSpec& model, const DecodeSpec& decode,
                          const std::vector<std::vector<int32_t>>& prompts);

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::string description() const = 0;  // one line: backend, precision, graphs
  virtual const DecodeSpec& decode_spec() const = 0;

  // Prefills every prompt (prompts.size() == batch) and samples each sequence's first token. Starts a
  // new generation (the cache and the history are reset).
  virtual void start(const std::vector<std::vector<int32_t>>& prompts) = 0;
  // `steps` more tokens per sequence (the GPU enqueues them and returns). Throws when the total would
  // exceed max_new_tokens.
  virtual void decode(int64_t steps) = 0;
  // Waits for the device; the tokens generated so far, per sequence.
  virtual std::vector<std::vector<int32_t>> generated() = 0;
  // Waits for the device; fp32 logits [batch, vocab_size] the latest tokens were sampled from (tests).
  virtual std::vector<float> last_logits() = 0;
};

// Why the GPU decoder cannot run `model` (a shape its kernels do not take); empty when it can. Both
// decoders run every layer kind; the CPU decoder runs every shape.
std::string gpu_decoder_refusal(const ModelSpec& model);

}  // namespace sg::model
