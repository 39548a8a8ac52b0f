#pragma once
// The parameters of a dense Llama as ONE flat buffer. The fp32 main weights, their bf16 mirror, the fp32
// gradients and both Adam moments all use these offsets, so every optimizer-side kernel is one pass over
// a flat array and a checkpoint is a list of (Hugging Face name, offset, shape) slices.
//
// Order: every matrix first (weight decay applies), then every norm weight (no decay), so AdamW takes a
// single boundary num_decay(): elements [0, num_decay) decay, [num_decay, total) do not.
// Fused blocks: q_proj, k_proj, v_proj are consecutive rows of one [qkv_dim, H] block and gate_proj,
// up_proj of one [2F, H] block, so the GEMMs see one weight and each HF tensor is still a contiguous slice.
// Every block starts at a multiple of kParamAlignment elements (the gaps are zero and stay zero: their
// gradient is zero and decoupled weight decay keeps a zero at zero).
#include <cstdint>
#include <string>
#include <vector>

#include "model/spec.h"

namespace sg::model {

// 64 elements = 256 B of fp32 and 128 B of bf16: vector loads and cuBLASLt's alignment are satisfied.
inline constexpr int64_t kParamAlignment = 64;

// One Hugging Face tensor: a contiguous slice of the flat buffer.
struct ParamTensor {
  std::string name;            // "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // PyTorch shape, row-major: [out_features, in_features] or [H]
  int64_t offset = 0;          // in elements from the start of the flat buffer
  int64_t numel = 0;
  bool weight_decay = false;   // matrices yes, norm weights no
  bool is_output_projection = false;  // o_proj, down_proj: init std scaled by 1/sqrt(2 L)
};

// Offsets (in elements) of one transformer block's fused blocks.
struct LayerParamOffsets {
  int64_t qkv = 0;         // [qkv_dim, H]: q_proj rows, then k_proj, then v_proj
  int64_t o_proj = 0;      // [H, H]
  int64_t gate_up = 0;     // [2F, H]: gate_proj rows, then up_proj
  int64_t down_proj = 0;   // [H, F]
  int64_t input_norm = 0;  // [H] input_layernorm
  int64_t post_norm = 0;   // [H] post_attention_layernorm
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelSpec& spec);

  const ModelSpec& spec() const { return spec_; }
  int64_t total() const { return total_; }          // elements of the flat buffer (with alignment gaps)
  int64_t num_decay() const { return num_decay_; }  // [0, num_decay) gets weight decay
  int64_t num_parameters() const;                   // real parameters (without gaps; tied counted once)

  int64_t embedding() const { return embedding_; }     // [V, H]
  int64_t lm_head() const { return lm_head_; }         // [V, H]; == embedding() when tied
  bool tied() const { return spec_.share_embeddings_and_output_weights; }
  int64_t final_norm() const { return final_norm_; }   // [H]
  const LayerParamOffsets& layer(int64_t i) const { return layers_.at(static_cast<size_t>(i)); }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

  // Every HF tensor (lm_head.weight absent when tied), in Hugging Face state-dict order.
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // The tensor named `name`; throws sg::Error naming the closest valid name otherwise.
  const ParamTensor& find(const std::string& name) const;
  // A one-line-per-tensor table (name, shape, offset) for logs and `stepgraph config`.
  std::string describe() const;

 private:
  ModelSpec spec_;
  int64_t total_ = 0, num_decay_ = 0;
  int64_t embedding_ = 0, lm_head_ = 0, final_norm_ = 0;
  std::vector<LayerParamOffsets> layers_;
  std::vector<ParamTensor> tensors_;
};

// Checks the shapes the dense Llama step needs (divisibility of heads, even head_dim for RoPE, ...);
// throws sg::Error naming the key, its value and the fix.
void validate_dense_llama(const ModelSpec& spec);

}  // namespace sg::model
