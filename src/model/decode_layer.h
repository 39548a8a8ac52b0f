#pragma once
// One layer of the stack as the CPU decoder (model/cpu_decoder.h) runs it: new rows of tokens through the
// layer, with what it keeps between calls of one generation (the attention's KV cache, the Mamba mixer's
// conv and SSM states). Each kind's decoding twin lives in its CPU file (model/layers/<kind>_layer_cpu.cpp)
// beside its training twin and shares its declarations, so the decoder reads the weights the training
// step wrote by the same ParamRefs; its registration line names it (model/layer_registry.cpp).
//
// Rows follow reference/decode_attention.h: row t belongs to slot first_slot + t / rows_per_slot (slot =
// one sequence of the batch) at position positions[t]; a slot's rows are consecutive positions.
//   prefill of one prompt of P tokens into slot b:  T = P, rows_per_slot = P, first_slot = b, 0..P-1
//   one decoding step of B sequences:               T = B, rows_per_slot = 1, first_slot = 0
// A kind without state (MLP, MoE) computes each row alone; one with state continues the slot's sequence.
#include <cstdint>

#include "model/decoder.h"
#include "model/layer.h"

namespace sg::model {

struct DecodeRows {
  int64_t T = 0;
  int64_t rows_per_slot = 1;
  int64_t first_slot = 0;
  const int32_t* positions = nullptr;  // [T]
};

struct CpuDecodeIO {
  const ModelLayout& layout;
  const float* weights = nullptr;  // flat fp32 parameters
  const float* input = nullptr;    // n_i [T, H]: the layer's pre-norm output
  float* output = nullptr;         // delta_i [T, H] (overwritten)
  DecodeRows rows;

  const float* weight(ParamRef ref) const { return weights + layout.offset(ref); }
  // An optional block's weights (a bias): null where the layer did not declare it.
  const float* optional_weight(ParamRef ref) const { return ref.valid() ? weight(ref) : nullptr; }
};

class CpuDecodeLayer : public LayerBase {
 public:
  using LayerBase::LayerBase;
  // Host bytes of what one layer of the kind keeps for a generation (its registration reads the twin's own;
  // this one for a kind that keeps nothing between calls).
  static double state_bytes(const ModelSpec& /*model*/, const DecodeSpec& /*decode*/) { return 0.0; }

  // Sizes the state for decode.batch sequences of decode.capacity() positions and the scratch for
  // max(max_prompt_tokens, batch) rows.
  virtual void plan(const ModelSpec& model, const DecodeSpec& decode) = 0;
  // A new generation: every sequence's state back to its start.
  virtual void reset() {}
  // Eval semantics: no dropout, no auxiliary loss; an MoE layer routes every token to its top-k
  // experts (no capacity drop: a decoding row is not a training microbatch).
  virtual void forward(const CpuDecodeIO& io) = 0;
};

}  // namespace sg::model
