#pragma once
// The parameters of a model as ONE flat buffer, built from declarations. The fp32 main weights, their
// bf16 mirror, the fp32 gradients and both Adam moments all use these offsets, so every optimizer-side
// kernel is one pass over a flat array and a checkpoint is a list of (Hugging Face name, offset, shape)
// slices.
//
// Layers (and the step, for the embedding, norms and LM head) declare BLOCKS: a block is one or more
// Hugging Face tensors stored consecutively (q_proj, k_proj, v_proj as one [qkv_dim, H] block, so the
// GEMM sees one weight and each HF tensor is still a contiguous slice). A block is either
//   decayed      (matrix(): weight decay applies — projections, embeddings, conv weights), or
//   not decayed  (vector(): norm weights, biases, Mamba's A_log / D / dt_bias).
// A non-decayed block the forward reads from the fp32 master weights rather than their bf16 copy is
// declared with fp32_vector() (Mamba's A_log / D / dt_bias, MoE's expert bias): the layout also packs
// those blocks (fp32_packed_*), where the step keeps every rank's copy of them when the distributed
// optimizer leaves each rank only its shard of the master weights (model/train_step.h).
// Placement: every decayed block first, then every non-decayed block, each in declaration order and
// each starting at a multiple of kParamAlignment elements, so AdamW takes ONE boundary num_decay():
// elements [0, num_decay) decay, [num_decay, total) do not. Gaps are zero and stay zero (their
// gradient is zero and decoupled weight decay keeps a zero at zero).
//
// The tensor list (tensors()) is grouped as Hugging Face lists a state dict: groups in declaration
// order (begin_group(): one HF layer), inside a group the decayed tensors, then the others. A tensor's
// index in that list is its initialisation stream (model/init.h), so the list order is part of the
// model's definition: the dense Llama lists embed; per block q, k, v, o, gate, up, down,
// input_layernorm, post_attention_layernorm; model.norm; lm_head.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sg::model {

// 64 elements = 256 B of fp32 and 128 B of bf16: vector loads and cuBLASLt's alignment are satisfied.
inline constexpr int64_t kParamAlignment = 64;

// How a tensor's initial values are drawn (model/init.cpp).
enum class ParamInit : uint8_t {
  normal,             // N(0, init_method_std)
  output_projection,  // N(0, init_method_std / sqrt(2 num_layers)), / sqrt(num_layers) with is_hybrid_model:
                      // o_proj, down_proj, Mamba out_proj (GPT-2 / Megatron's output_layer_init_method)
  ones,               // norm weights
  zeros,              // biases
  custom,             // ParamDecl::custom (Mamba's A_log, dt_bias, ...)
};

struct ParamTensor;
// Custom initialisation: fills dst[begin, end) of `tensor` (dst points at the tensor's first element);
// `normal(i)` / `uniform(i)` are the tensor's own deterministic streams for element i (model/init.h),
// so the values depend only on (seed, tensor index, element) like every other init.
struct InitStreams {
  std::function<float(uint64_t)> normal;   // standard normal
  std::function<float(uint64_t)> uniform;  // in [0, 1)
  uint64_t seed = 0;    // the model's seed and the tensor's stream id, for initialisers with their own
  uint32_t stream = 0;  // deterministic draws (reference/mamba_init.h)
};
using CustomInit = std::function<void(const ParamTensor& tensor, float* dst, int64_t begin, int64_t end,
                                      const InitStreams& streams)>;

// One Hugging Face tensor to declare.
struct ParamDecl {
  ParamDecl(std::string name_, std::vector<int64_t> shape_, ParamInit init_ = ParamInit::normal,
            CustomInit custom_ = {})
      : name(std::move(name_)), shape(std::move(shape_)), init(init_), custom(std::move(custom_)) {}
  std::string name;            // "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // PyTorch shape, row-major: [out_features, in_features] or [H]
  ParamInit init = ParamInit::normal;
  CustomInit custom;  // only with ParamInit::custom
};

// One Hugging Face tensor: a contiguous slice of the flat buffer.
struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in elements from the start of the flat buffer
  int64_t numel = 0;
  bool weight_decay = false;
  ParamInit init = ParamInit::normal;
  CustomInit custom;
};

// A declared block; resolves to its offset once the layout is built.
struct ParamRef {
  int32_t index = -1;
  bool valid() const { return index >= 0; }
};

class ParamLayout {
 public:
  int64_t total() const { return total_; }          // elements of the flat buffer (with alignment gaps)
  int64_t num_decay() const { return num_decay_; }  // [0, num_decay) gets weight decay
  int64_t num_parameters() const;                   // real parameters (without gaps)

  int64_t offset(ParamRef block) const;  // first element of the block (of its first tensor)
  int64_t numel(ParamRef block) const;   // elements of the block (its tensors together)

  // Every HF tensor, grouped as described above.
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // The tensor named `name`; throws sg::Error naming the closest valid name otherwise.
  const ParamTensor& find(const std::string& name) const;
  // A one-line-per-tensor table (name, shape, offset) for logs and `stepgraph config`.
  std::string describe() const;

  // The fp32_vector() blocks packed one after another, each at a multiple of kParamAlignment (as in the
  // flat buffer), in declaration order.
  bool is_fp32_block(ParamRef block) const;
  int64_t fp32_packed_total() const { return fp32_packed_total_; }
  // Where `block` starts in the packing; throws sg::Error unless it is an fp32_vector() block.
  int64_t fp32_packed_offset(ParamRef block) const;
  // Each fp32_vector() block: where it lies in the flat buffer and in the packing.
  struct Fp32Block {
    int64_t flat_offset = 0, numel = 0, packed_offset = 0;
  };
  std::vector<Fp32Block> fp32_blocks() const;
  // For each element of the packing its offset in the flat buffer, -1 in the gaps between blocks.
  std::vector<int64_t> fp32_packed_flat_offsets() const;

 private:
  friend class ParamBuilder;
  int64_t total_ = 0, num_decay_ = 0, fp32_packed_total_ = 0;
  std::vector<int64_t> block_offsets_, block_numels_;
  std::vector<int64_t> fp32_packed_offsets_;  // per block; -1 for a block not read in fp32
  std::vector<ParamTensor> tensors_;
};

class ParamBuilder {
 public:
  // Starts a group of the tensor list (one HF layer, the embedding, ...). Declaring before the first
  // begin_group() opens an unnamed group.
  void begin_group();
  // A decayed block of consecutive tensors (one fused GEMM weight), or of one tensor.
  ParamRef matrix(std::vector<ParamDecl> tensors);
  ParamRef matrix(std::string name, std::vector<int64_t> shape, ParamInit init = ParamInit::normal);
  // A block without weight decay (norm weights: ParamInit::ones).
  ParamRef vector(std::vector<ParamDecl> tensors);
  ParamRef vector(std::string name, std::vector<int64_t> shape, ParamInit init = ParamInit::ones);
  // A block without weight decay that the forward reads in fp32 (LayerBindContext::main_weight).
  ParamRef fp32_vector(std::vector<ParamDecl> tensors);
  ParamRef fp32_vector(std::string name, std::vector<int64_t> shape, ParamInit init = ParamInit::ones);

  // Places every block; the builder is spent afterwards. Throws sg::Error on a duplicate name, an
  // empty or non-positive shape, or a custom init without its function.
  ParamLayout build();

 private:
  struct Block {
    bool decay = false;
    bool fp32 = false;  // fp32_vector()
    int group = 0;
    std::vector<ParamDecl> tensors;
  };
  ParamRef add(bool decay, bool fp32, std::vector<ParamDecl> tensors);
  std::vector<Block> blocks_;
  int group_ = 0;
  bool built_ = false;
};

}  // namespace sg::model
